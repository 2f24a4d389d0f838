"""Endpoint verdicts in the SQL stores (and ``MemoryTurnStore``): saved per base URL and model, replaced,
read back by a store opened again."""

from __future__ import annotations

from store_support import query

from geppetto.providers.openai_responses import Verdict
from geppetto.providers.openai_responses._evidence import VerdictStore
from geppetto.session import MemoryTurnStore
from geppetto.session.stores import open_store


async def test_a_verdict_is_kept_per_endpoint_and_replaced(store_target: str) -> None:
    first = Verdict("unknown", evidence="response_get", learned_at=100.0, detail="no usage")
    with open_store(store_target) as store:
        assert isinstance(store, VerdictStore)
        assert await store.load_endpoint_verdict("http://h/v1", "m") is None
        await store.save_endpoint_verdict("http://h/v1", "m", first.to_dict())
        await store.save_endpoint_verdict("http://h/v1", "other", Verdict("ignored", evidence="usage").to_dict())
        later = Verdict("kept", evidence="usage", learned_at=200.0, detail="412 input tokens")
        await store.save_endpoint_verdict("http://h/v1", "m", later.to_dict())
    with open_store(store_target) as again:
        loaded = await again.load_endpoint_verdict("http://h/v1", "m")
        assert loaded is not None and Verdict.from_dict(loaded) == later
        other = await again.load_endpoint_verdict("http://h/v1", "other")
        assert other is not None and Verdict.from_dict(other).ignored
    rows = query(store_target, "SELECT model, learned_at FROM endpoint_verdicts ORDER BY model")
    assert [r[0] for r in rows] == ["m", "other"] and float(rows[0][1]) == 200.0


async def test_the_memory_store_keeps_verdicts_too() -> None:
    store = MemoryTurnStore()
    assert isinstance(store, VerdictStore)
    await store.save_endpoint_verdict("u", "m", {"previous_response_id": "kept"})
    assert await store.load_endpoint_verdict("u", "m") == {"previous_response_id": "kept"}
    assert await store.load_endpoint_verdict("u", "n") is None
