"""Reading one interaction's events: the create request's stream (or its whole answer with ``stream=False``)
and, for a background interaction (``background=True``), what keeps it one interaction whatever happens to
the connection, as for the Responses engine's background responses:

- a broken stream is resumed with ``GET /interactions/{id}?stream=true&last_event_id=<the last event id>``
  (the service sends the events after it, so no delta is published twice);
- after ``max_resumes`` resumes in a row that brought no new event, the interaction is polled with ``GET
  /interactions/{id}`` every ``poll_interval`` seconds until it is no longer running, and its steps are read
  as the rest of the stream;
- cancelling the caller sends ``POST /interactions/{id}/cancel``: the interaction stops, and since it did
  not complete, it never anchors a later request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Protocol, cast

import httpx

from ..._exceptions import ProviderError, StreamError
from .._http import HttpTransport, SSEEvent, gemini_error_info
from .._streaming import sse_events
from ._engine import API_VERSION
from ._interactions_stream import InteractionsReducer, whole_events

__all__ = ["RUNNING", "open_interaction"]

log = logging.getLogger("geppetto.providers.gemini.interactions")


class InteractionsClient(Protocol):
    """What reading an interaction needs of the engine (``InteractionsEngine`` has it; named here so this
    module does not import the engine's)."""

    stream: bool
    background: bool
    max_resumes: int
    poll_interval: float
    _transport: HttpTransport

    def _auth(self) -> dict[str, str]: ...

    async def get(self, interaction_id: str) -> dict[str, Any]: ...

    async def cancel(self, interaction_id: str) -> dict[str, Any]: ...


RUNNING = frozenset({"in_progress", "queued"})
"""Statuses of an interaction still being generated."""


async def open_interaction(
    engine: InteractionsClient, body: dict[str, object], reducer: InteractionsReducer
) -> AsyncGenerator[SSEEvent, None]:
    """The events of the interaction ``body`` creates; ``reducer`` is the one they are fed to (its id and
    last event id say where to resume)."""
    path = f"{API_VERSION}/interactions"
    if not engine.stream:
        answer = await engine._transport.request_json(
            "POST", path, body, headers=engine._auth(), error_parser=gemini_error_info
        )
        for event in whole_events(answer):
            yield event
        return
    source = sse_events(engine._transport, path, body, headers=engine._auth(), error_parser=gemini_error_info)
    idle = 0
    while True:
        seen = reducer.last_event_id
        try:
            async with aclosing(source) as events:
                async for event in events:
                    yield event
            return
        except StreamError:
            iid = reducer.response_id
            idle = 0 if reducer.last_event_id != seen else idle + 1
            if not (engine.background and iid):
                raise
            if idle >= engine.max_resumes:
                log.info("interactions: %d resumes of %s brought nothing new; polling it", idle, iid)
                inputs = body.get("input")
                count = len(inputs) if isinstance(inputs, list) else 1
                async with aclosing(_polled(engine, iid, reducer, count)) as events:
                    async for event in events:
                        yield event
                return
            log.info("interactions: resuming interaction %s after event %s", iid, reducer.last_event_id)
            source = _resume(engine, iid, reducer.last_event_id)
        except asyncio.CancelledError:
            if engine.background and reducer.response_id:
                await asyncio.shield(_cancel_quietly(engine, reducer.response_id))
            raise


async def _resume(
    engine: InteractionsClient, interaction_id: str, last_event_id: str | None
) -> AsyncGenerator[SSEEvent, None]:
    params = {"stream": "true"}
    if last_event_id:
        params["last_event_id"] = last_event_id
    stream = cast(
        AsyncGenerator[SSEEvent, None],
        engine._transport.stream_sse(
            f"{API_VERSION}/interactions/{interaction_id}",
            None,
            method="GET",
            params=params,
            headers=engine._auth(),
            error_parser=gemini_error_info,
        ),
    )
    async with aclosing(stream) as events:
        async for event in events:
            yield event


async def _polled(
    engine: InteractionsClient, interaction_id: str, reducer: InteractionsReducer, inputs: int
) -> AsyncGenerator[SSEEvent, None]:
    """The interaction, once it stopped running, as the rest of its stream (its output steps read whole:
    ``GET`` shows its ``inputs`` input steps first)."""
    while True:
        interaction = await engine.get(interaction_id)
        if str(interaction.get("status") or "") not in RUNNING:
            break
        await asyncio.sleep(engine.poll_interval)
    reducer.forget_steps()  # the whole interaction replaces what the broken stream had given
    for event in whole_events(interaction, inputs):
        yield event


async def _cancel_quietly(engine: InteractionsClient, interaction_id: str) -> None:
    try:
        await engine.cancel(interaction_id)
    except (ProviderError, httpx.HTTPError) as exc:
        log.warning("interactions: could not cancel interaction %s: %s", interaction_id, exc)
