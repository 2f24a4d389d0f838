"""An edit inside the Turn re-anchors both stateful modes: a chained request names the latest response
before the edit and sends only the blocks after it; a conversation is repaired in place (its items after
that response deleted) and gets only the blocks after it. The simulator's context equals the Turn."""

from __future__ import annotations

from typing import Any

import pytest
from responses_support import assert_valid_requests, engine, normalize, wire_before_last_response

import geppetto as gp
from geppetto.events import Event, EventFinal
from geppetto.providers.openai_responses import get_state
from geppetto.providers.openai_responses._items import blocks_to_items
from geppetto.providers.openai_responses._send import Api
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn
from geppetto.web._report import chained_plan

RID = str(BLOCK_META_RESPONSE_ID)


async def _three_prompts(sim: Simulator, mode: str, finals: list[EventFinal], **options: Any) -> gp.Session:
    sim.queue(*(Reply(text=t) for t in ("One.", "Two.", "Three.", "Four.")))

    def sink(event: Event) -> None:
        if isinstance(event, EventFinal):
            finals.append(event)

    session = gp.Session(engine(sim, mode=mode, **options), sinks=[sink])
    for text in ("a", "b", "c"):
        await session.run(text)
    return session


def _rids(turn: Turn) -> list[str]:
    return list(dict.fromkeys(b.metadata[RID] for b in turn.blocks if b.metadata.get(RID)))


def _edit_second_answer(session: gp.Session) -> list[Any]:
    """Edit the answer "Two." (between responses 1 and 3); the blocks after response 1 as their wire form."""
    turn = session.latest
    assert turn is not None
    (two,) = [b for b in turn.blocks if b.text == "Two."]
    two.payload["text"] = "Two, edited."
    first_end = max(i for i, b in enumerate(turn.blocks) if b.metadata.get(RID) == _rids(turn)[0])
    return list(turn.blocks[first_end + 1 :])


def _assert_context_is_the_turn(sim: Simulator, turn: Turn) -> None:
    rid, before = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == before


async def test_chained_edit_between_two_responses_anchors_on_the_earlier(geppetto_sim: Simulator) -> None:
    finals: list[EventFinal] = []
    session = await _three_prompts(geppetto_sim, "chained", finals)
    first = _rids(session.latest)[0]  # type: ignore[arg-type]
    after = _edit_second_answer(session)
    out = await session.run("d")
    body = geppetto_sim.requests[-1].body
    assert body["previous_response_id"] == first
    assert normalize(body["input"]) == normalize(blocks_to_items([*after, out.blocks[-2]]))
    assert "re-anchored on " + first in finals[-1].metadata.extra["responses.why"]
    _assert_context_is_the_turn(geppetto_sim, out)
    assert_valid_requests(geppetto_sim)


async def test_conversation_edit_is_repaired_in_place(geppetto_sim: Simulator) -> None:
    finals: list[EventFinal] = []
    session = await _three_prompts(geppetto_sim, "conversation", finals)
    cid = get_state(session.latest).conversation_id  # type: ignore[arg-type,union-attr]
    first = _rids(session.latest)[0]  # type: ignore[arg-type]
    after = _edit_second_answer(session)
    held = len(geppetto_sim.state.conversations[str(cid)].items)
    shown = chained_plan(session.latest)  # type: ignore[arg-type]  # what geppetto inspect and the inspector show
    assert shown.conversation == cid and not shown.full and "repaired in place" in shown.reason
    mark = len(geppetto_sim.requests)
    out = await session.run("d")
    calls = [(r.method, r.path) for r in geppetto_sim.requests[mark:]]
    deletes = [c for c in calls if c[0] == "DELETE"]
    assert len(deletes) == held - 2  # every item after "a" and "One." goes
    assert all(path.startswith(f"/v1/conversations/{cid}/items/") for _, path in deletes)
    assert not [c for c in calls if c == ("POST", "/v1/conversations")]  # no new conversation
    body = geppetto_sim.requests[-1].body
    assert body["conversation"] == cid
    assert normalize(body["input"]) == normalize(blocks_to_items([*after, out.blocks[-2]]))
    assert get_state(out).conversation_id == cid  # type: ignore[union-attr]
    extra = finals[-1].metadata.extra
    assert extra["responses.repair"] == {"after": first, "deleted": held - 2}
    assert "repaired in place" in extra["responses.why"] and not extra["responses.fallback"]
    _assert_context_is_the_turn(geppetto_sim, out)
    # the conversation now holds exactly the Turn
    stored = geppetto_sim.state.conversations[str(cid)].items
    assert normalize(stored) == normalize(blocks_to_items(out.blocks))
    # and the next request goes on in it with a plain delta
    out = await session.run("e")
    assert geppetto_sim.requests[-1].body["conversation"] == cid
    assert normalize(geppetto_sim.requests[-1].body["input"]) == [("message", "user", "e")]


async def test_an_edit_before_everything_the_conversation_holds_starts_a_new_one(geppetto_sim: Simulator) -> None:
    finals: list[EventFinal] = []
    session = await _three_prompts(geppetto_sim, "conversation", finals)
    cid = get_state(session.latest).conversation_id  # type: ignore[arg-type,union-attr]
    session.latest.blocks[0].payload["text"] = "a, edited"  # type: ignore[union-attr]
    out = await session.run("d")
    assert get_state(out).conversation_id != cid  # type: ignore[union-attr]
    assert not [r for r in geppetto_sim.requests if r.method == "DELETE"]
    assert "responses.repair" not in finals[-1].metadata.extra
    _assert_context_is_the_turn(geppetto_sim, out)


async def test_a_failed_deletion_starts_a_new_conversation_with_the_reason(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    finals: list[EventFinal] = []
    session = await _three_prompts(geppetto_sim, "conversation", finals)
    cid = get_state(session.latest).conversation_id  # type: ignore[arg-type,union-attr]
    _edit_second_answer(session)

    async def refused(self: Api, path: str) -> Any:
        raise gp.ProviderError("deletion not allowed", provider="openai", status=403)

    monkeypatch.setattr(Api, "delete", refused)
    out = await session.run("d")
    new = get_state(out).conversation_id  # type: ignore[union-attr]
    assert new != cid
    extra = finals[-1].metadata.extra
    assert extra["responses.fallback"] == "repair_failed"
    assert "deletion not allowed" in extra["responses.detail"]
    assert extra["responses.conversation_replaced"] == cid
    _assert_context_is_the_turn(geppetto_sim, out)
