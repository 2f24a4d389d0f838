"""A conversation the engine replaces with a new one (it no longer matches the Turn) is left on the server
by default and deleted with ``delete_replaced_conversations=True``; a new conversation is reported in the
``final`` event (``responses.conversation_created``, ``responses.conversation_replaced``) and the log."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from responses_support import engine

import geppetto as gp
from geppetto.events import Event, EventFinal
from geppetto.providers.openai_responses import get_state
from geppetto.providers.openai_responses._send import Api
from geppetto.simulator import Reply, Simulator

LOGGER = "geppetto.providers.openai_responses"


async def _replace(sim: Simulator, **options: Any) -> tuple[str, str, list[EventFinal]]:
    """Two prompts in conversation mode, the first answer edited by middleware in between: the second
    request goes into a new conversation. Returns (old conversation, new conversation, final events)."""
    sim.queue(Reply(text="One."), Reply(text="Two."))
    finals: list[EventFinal] = []

    def sink(event: Event) -> None:
        if isinstance(event, EventFinal):
            finals.append(event)

    session = gp.Session(engine(sim, mode="conversation", **options), sinks=[sink])
    first = await session.run("hi")
    old = str(get_state(first).conversation_id)  # type: ignore[union-attr]
    session.latest.blocks[-1].payload["text"] = "One, edited."  # type: ignore[union-attr]
    second = await session.run("more")
    new = str(get_state(second).conversation_id)  # type: ignore[union-attr]
    assert new != old
    return old, new, finals


def _calls(sim: Simulator) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in sim.requests]


async def test_a_replaced_conversation_is_left_on_the_server_by_default(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        old, new, finals = await _replace(geppetto_sim)
    assert not [c for c in _calls(geppetto_sim) if c[0] == "DELETE"]
    assert finals[0].metadata.extra["responses.conversation_created"] == old
    assert "responses.conversation_replaced" not in finals[0].metadata.extra
    extra = finals[1].metadata.extra
    assert (extra["responses.conversation_created"], extra["responses.conversation_replaced"]) == (new, old)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert f"responses: new conversation {new} seeded with 2 items, replacing {old} (left on the server)" in messages


async def test_delete_replaced_conversations_deletes_it(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        old, new, _ = await _replace(geppetto_sim, delete_replaced_conversations=True)
    assert _calls(geppetto_sim)[-1] == ("DELETE", f"/v1/conversations/{old}")
    assert [c for c in _calls(geppetto_sim) if c[0] == "DELETE"] == [("DELETE", f"/v1/conversations/{old}")]
    assert f"responses: deleted conversation {old}, replaced by {new}" in [r.getMessage() for r in caplog.records]


async def test_a_delete_that_fails_is_logged_and_the_answer_stands(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def refused(self: Api, path: str) -> Any:
        raise gp.ProviderError("no delete for you", provider="openai", status=403)

    monkeypatch.setattr(Api, "delete", refused)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        old, new, finals = await _replace(geppetto_sim, delete_replaced_conversations=True)
    assert finals[-1].text == "Two."
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "delete" in r.getMessage()]
    assert warning.startswith(f"responses: could not delete conversation {old}, replaced by {new}: ")
