"""Reading one interaction's events: the create request's stream (or its whole answer with ``stream=False``)
and, for a background interaction (``background=True``), what keeps it one interaction whatever happens to
the connection, as for the Responses engine's background responses:

- a broken stream is resumed with ``GET /interactions/{id}?stream=true&last_event_id=<the last event id>``
  (the service sends the events after it, so no delta is published twice);
- after ``max_resumes`` resumes in a row that brought no new event, the interaction is polled with ``GET
  /interactions/{id}`` every ``poll_interval`` seconds until it is no longer running, and its steps are read
  as the rest of the stream;
- a stream of an interaction that is not in the background but is stored, broken after its id arrived, is
  read back with ``GET /interactions/{id}`` (waited for while it runs) instead of being created again
  (``providers._landed``);
- cancelling the caller sends ``POST /interactions/{id}/cancel``: the interaction stops, and since it did
  not complete, it never anchors a later request; the usage of what it had produced goes out in a ``log``
  event (``background interaction cancelled``), as for a background response.

``geppetto serve`` follows a background interaction through the mechanism it uses for background responses
(:mod:`geppetto.providers._background`): the observer hears the interaction's id and, before each event is
published, the event's place in the stream (its count from the interaction's first event) and its
``event_id``; a worker that picks the inference up sets the pending request, and the engine resumes the same
interaction after that event id instead of creating one. Since the events before it were read by the dead
worker, the interaction's steps are read whole with ``GET`` once it completes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

import httpx

from ..._exceptions import ProviderError, StreamError
from ...events import EventLog, metadata_for, publish
from ...turns import Turn
from .._background import BACKGROUND_OBSERVER, BackgroundObserver, PendingResponse, take_pending
from .._http import HttpTransport
from .._http_errors import gemini_error_info
from .._landed import ACTIVE_STATUSES, NotLanded, await_landed
from .._sse import SSEEvent
from .._streaming import sse_events
from ._engine import API_VERSION
from ._interactions_stream import InteractionsReducer, interactions_usage, whole_events

__all__ = ["RUNNING", "open_interaction"]

log = logging.getLogger("geppetto.providers.gemini.interactions")


class InteractionsClient(Protocol):
    """What reading an interaction needs of the engine (``InteractionsEngine`` has it; named here so this
    module does not import the engine's)."""

    provider: str
    model: str
    stream: bool
    background: bool
    store: bool
    max_resumes: int
    poll_interval: float
    _transport: HttpTransport

    def _auth(self) -> dict[str, str]: ...

    async def get(self, interaction_id: str) -> dict[str, Any]: ...

    async def cancel(self, interaction_id: str) -> dict[str, Any]: ...


RUNNING = ACTIVE_STATUSES
"""Statuses of an interaction still being generated."""


@dataclass
class _Follow:
    """What the observer of background requests hears of one background interaction (see the module
    docstring): ``count`` is the place of the last event received, from the interaction's first (0)."""

    observer: BackgroundObserver | None
    turn: Turn
    response_id: str = ""
    count: int = -1
    picked_up: bool = False

    def take(self, event: SSEEvent) -> bool:
        """Note ``event`` (before it is published); True when it completes the interaction."""
        try:
            data = event.json()
        except ValueError:
            return False  # the reducer reports malformed data
        if not isinstance(data, dict) or not data.get("event_id"):
            return False
        self.count += 1
        kind = data.get("event_type")
        interaction = data.get("interaction")
        found = interaction.get("id") if isinstance(interaction, dict) else data.get("interaction_id")
        iid = self.response_id or str(found or "")
        if iid and self.observer is not None:
            if iid != self.response_id:
                self.observer.created(iid, self.turn)
            self.observer.advanced(iid, self.count, str(data["event_id"]))
        self.response_id = iid
        return kind == "interaction.completed"

    def cancels(self) -> bool:
        return self.observer is None or self.observer.cancels_response()


def _inputs(body: dict[str, object]) -> int:
    """How many input steps ``body`` sends (a stored interaction read back shows them first)."""
    inputs = body.get("input")
    return len(inputs) if isinstance(inputs, list) else 1


def _source(
    engine: InteractionsClient, body: dict[str, object], reducer: InteractionsReducer, follow: _Follow
) -> AsyncGenerator[SSEEvent, None]:
    """The create request's stream, or the resumed stream of the interaction this Turn picks up."""
    pending: PendingResponse | None = take_pending(follow.turn, "interactions") if engine.background else None
    if pending is None:
        path = f"{API_VERSION}/interactions"
        return sse_events(engine._transport, path, body, headers=engine._auth(), error_parser=gemini_error_info)
    log.info("interactions: picking up interaction %s after event %s", pending.response_id, pending.resume_after)
    follow.response_id, follow.count, follow.picked_up = pending.response_id, pending.after, True
    reducer.response_id, reducer.last_event_id = pending.response_id, pending.resume_after
    return _resume(engine, pending.response_id, pending.resume_after)


async def open_interaction(
    engine: InteractionsClient, body: dict[str, object], reducer: InteractionsReducer, turn: Turn
) -> AsyncGenerator[SSEEvent, None]:
    """The events of the interaction ``body`` creates for ``turn``; ``reducer`` is the one they are fed to
    (its id and last event id say where to resume)."""
    if not engine.stream:
        answer = await engine._transport.request_json(
            "POST", f"{API_VERSION}/interactions", body, headers=engine._auth(), error_parser=gemini_error_info
        )
        for event in whole_events(answer):
            yield event
        return
    follow = _Follow(BACKGROUND_OBSERVER.get() if engine.background else None, turn)
    source, idle, reading_back = _source(engine, body, reducer, follow), 0, False
    while True:
        seen = reducer.last_event_id
        try:
            async with aclosing(source) as events:
                async for event in events:
                    if engine.background and follow.take(event) and follow.picked_up:
                        source = _polled(engine, follow.response_id, reducer, _inputs(body))
                        break  # the steps before the pickup were read elsewhere: read them whole
                    yield event
                else:
                    return
            async with aclosing(source) as events:
                async for event in events:
                    yield event
            return
        except StreamError as exc:
            iid = reducer.response_id
            idle = 0 if reducer.last_event_id != seen else idle + 1
            if not engine.background and iid and engine.store and not reading_back:
                source, reading_back = _read_back(engine, iid, reducer, _inputs(body), exc), True  # never re-created
                continue
            if not (engine.background and iid):
                raise
            if idle >= engine.max_resumes:
                log.info("interactions: %d resumes of %s brought nothing new; polling it", idle, iid)
                source = _polled(engine, iid, reducer, _inputs(body))
                follow.picked_up = False
                continue
            log.info("interactions: resuming interaction %s after event %s", iid, reducer.last_event_id)
            source = _resume(engine, iid, reducer.last_event_id)
        except asyncio.CancelledError:
            if engine.background and reducer.response_id and follow.cancels():
                await asyncio.shield(_cancel_quietly(engine, reducer.response_id, follow))
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


async def _read_back(
    engine: InteractionsClient, interaction_id: str, reducer: InteractionsReducer, inputs: int, broken: StreamError
) -> AsyncGenerator[SSEEvent, None]:
    """A stored interaction whose stream broke after its id arrived, read back with ``GET`` (waited for while
    it runs) as the rest of its stream; ``broken`` is raised, saying a retry is safe, when it did not land."""
    try:
        interaction = await await_landed(
            lambda: engine.get(interaction_id),
            f"interaction {interaction_id}",
            interaction_id,
            poll_interval=engine.poll_interval,
        )
    except NotLanded as exc:
        message = f"{broken.message}; {exc.message}: it did not land, so sending the request again is safe"
        raise StreamError(message, provider=engine.provider) from broken
    except ProviderError as exc:  # the break is what the caller has to know; what landed is not known
        message = f"{broken.message}; reading interaction {interaction_id} back failed too ({exc.message})"
        raise StreamError(message, provider=engine.provider) from broken
    reducer.forget_steps()  # the whole interaction replaces what the broken stream had given
    for event in whole_events(interaction, inputs):
        yield event


async def _cancel_quietly(engine: InteractionsClient, interaction_id: str, follow: _Follow) -> None:
    """Cancel the interaction; the usage of what it had produced goes out in a ``log`` event."""
    try:
        answer = await engine.cancel(interaction_id)
    except (ProviderError, httpx.HTTPError) as exc:
        log.warning("interactions: could not cancel interaction %s: %s", interaction_id, exc)
        return
    answer = answer if isinstance(answer, dict) else {}
    status = str(answer.get("status") or "")
    usage = interactions_usage(answer.get("usage"))
    log.info(
        "interactions: background interaction %s cancelled (status %s, %s output tokens)",
        interaction_id,
        status or "?",
        usage.output_tokens if usage else "?",
    )
    meta = metadata_for(follow.turn, engine.provider, engine.model)
    meta = replace(meta, usage=usage, extra={**meta.extra, "response_id": interaction_id})
    fields = {"response_id": interaction_id, "status": status, "after": follow.count}
    publish(EventLog(meta, level="info", message="background interaction cancelled", fields=fields))
