"""On SQLite and PostgreSQL: a session named by a unique id prefix, an ambiguous prefix listing its
candidates, and the provider, model and mode a chat recorded in the snapshot shown in the summaries."""

from __future__ import annotations

import pytest

from geppetto import UsageError
from geppetto.runtime import CHAT_ENGINE
from geppetto.session.stores import open_store
from geppetto.turns import Block, Turn


def _chat_turn(mode: str) -> Turn:
    turn = Turn()
    CHAT_ENGINE.set(turn.metadata, {"profile": "sim", "provider": "openai-responses", "model": "m1", "mode": mode})
    turn.append(Block.user("hi"))
    turn.append(Block.llm_text("hello"))
    return turn


async def test_prefixes_and_engine_columns(store_target: str) -> None:
    with open_store(store_target) as store:
        await store.save_snapshot("abc123", _chat_turn("chained"))
        await store.save_snapshot("abd456", _chat_turn("conversation"))
        assert await store.resolve_session("abc") == "abc123"
        assert await store.resolve_session("abd456") == "abd456"
        with pytest.raises(UsageError, match=r"2 sessions start with 'ab' \(abc123, abd456\)"):
            await store.resolve_session("ab")
        with pytest.raises(UsageError, match="no session 'zz'"):
            await store.resolve_session("zz")
        infos = {i.session_id: i for i in await store.session_infos()}
        assert (infos["abc123"].provider, infos["abc123"].model, infos["abc123"].mode) == (
            "openai-responses",
            "m1",
            "chained",
        )
        assert infos["abd456"].mode == "conversation"
