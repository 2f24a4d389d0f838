"""Background responses (``ResponsesEngine(background=True)``): the request goes out with ``background``,
``store`` and ``stream`` set, so the response is generated server-side whatever happens to the connection.

The events are read as one stream even when the connection breaks: a broken or cut stream is resumed with
``GET /responses/{id}?stream=true&starting_after=N`` (N: the last ``sequence_number`` received), and events
are reconciled by ``sequence_number`` (one already received is skipped, so no delta is published twice and
no item is added twice). When the events can no longer be streamed (the resume answered with an error, or
resumes keep making no progress), the response is polled with ``GET /responses/{id}`` until it leaves
``queued``/``in_progress``, and its final output is read as the rest of the stream. Cancelling the caller
(``asyncio`` cancellation, a session's cancel) sends ``POST /responses/{id}/cancel`` and publishes the usage
of what the response had produced in a ``log`` event. A response that did not finish (not ``completed`` or
``incomplete``) never anchors a later request.

``geppetto serve`` follows a background request through :data:`BACKGROUND_OBSERVER` (the response id when it
is created, the cursor as events arrive) and picks one up in another worker through :data:`PENDING_RESPONSE`
(the mechanism the Interactions engine shares, :mod:`geppetto.providers._background`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

from geppetto._exceptions import ConfigurationError, ProviderError, StreamError
from geppetto.events import EventLog, EventMetadata, publish
from geppetto.providers._background import (
    BACKGROUND_OBSERVER,
    PENDING_RESPONSE,
    BackgroundObserver,
    PendingResponse,
    take_pending,
)
from geppetto.providers._http import SSEEvent, openai_error_info
from geppetto.providers._landed import ACTIVE_STATUSES, SAFE_TO_RESEND, LandedCheck
from geppetto.turns import Turn

from ._answer import usage_of

__all__ = [
    "ACTIVE_STATUSES",
    "BACKGROUND_OBSERVER",
    "PENDING_RESPONSE",
    "BackgroundObserver",
    "Cursor",
    "PendingResponse",
    "check_background",
    "final_events",
    "open_background",
]

log = logging.getLogger("geppetto.providers.openai_responses")

_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_RESUME_DELAYS = (0.0, 0.25, 0.5, 1.0, 2.0)
"""Seconds before each resume that follows a resume which brought nothing new (the first is at once)."""


def check_background(
    background: bool, *, store: bool, poll_interval: float, max_resumes: int, stream: bool = True
) -> None:
    """Raise ConfigurationError for settings background mode cannot work with."""
    if background and not store:
        raise ConfigurationError(
            "background=True needs the server to store the response (it is generated and read back "
            "server-side); pass store=True or leave background off"
        )
    if not 0 < poll_interval < float("inf"):
        raise ConfigurationError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}")
    if max_resumes < 0:
        raise ConfigurationError(f"max_resumes must be 0 or more, got {max_resumes!r}")
    if background and not stream:
        raise ConfigurationError(
            "background=True streams the response (so a broken stream can be resumed); leave stream=False out"
        )


@dataclass
class Cursor:
    """Where a background response's events stand: its id, the last sequence number received, its status."""

    response_id: str = ""
    last: int = -1
    status: str = ""
    ended: bool = False
    repeats: int = 0  # events skipped because their sequence number had been received already
    resumes: list[int] = field(default_factory=list)  # the cursor each resume started after
    texts: dict[tuple[int, int], str] | None = field(default_factory=dict)
    """The output text received per (output index, content index); None when the stream was not read from
    its start (a picked-up response: another process published the beginning)."""

    def take(self, event: SSEEvent) -> bool:
        """Note ``event``; False when its sequence number was received already (skip it)."""
        try:
            data = event.json()
        except ValueError:
            return True  # the reader reports malformed data
        if not isinstance(data, dict):
            return True
        seq = data.get("sequence_number")
        if isinstance(seq, int) and not isinstance(seq, bool):
            if seq <= self.last:
                self.repeats += 1
                return False
            self.last = seq
        response = data.get("response")
        if isinstance(response, dict):
            self.response_id = str(response.get("id") or self.response_id)
            self.status = str(response.get("status") or self.status)
        kind = str(data.get("type") or event.event)
        if kind == "response.output_text.delta" and self.texts is not None:
            at = (int(data.get("output_index") or 0), int(data.get("content_index") or 0))
            self.texts[at] = self.texts.get(at, "") + str(data.get("delta") or "")
        if kind in _ENDS:
            self.ended = True
        return True

    def missed(self, index: int, item: Any) -> list[SSEEvent]:
        """Text deltas for what of a polled message's text the stream did not bring (none for a picked-up
        response, whose beginning this process never read)."""
        if self.texts is None or not isinstance(item, dict) or item.get("type") != "message":
            return []
        out = []
        for ci, part in enumerate(item.get("content") or []):
            text = str(part.get("text") or "") if isinstance(part, dict) else ""
            got = self.texts.get((index, ci), "")
            if text.startswith(got) and len(text) > len(got):
                delta = {"type": "response.output_text.delta", "output_index": index, "content_index": ci}
                out.append(SSEEvent("response.output_text.delta", json.dumps({**delta, "delta": text[len(got) :]})))
        return out


def final_events(response: dict[str, Any], cursor: Cursor) -> list[SSEEvent]:
    """A finished response read back whole, as the rest of its stream: the text of its messages the stream
    did not bring (``cursor.texts``), each output item done, then its terminal event."""
    out: list[SSEEvent] = []
    for index, item in enumerate(response.get("output") or []):
        out.extend(cursor.missed(index, item))
        data = {"type": "response.output_item.done", "output_index": index, "item": item}
        out.append(SSEEvent("response.output_item.done", json.dumps(data)))
    status = str(response.get("status") or "")
    kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(status, "response.completed")
    out.append(SSEEvent(kind, json.dumps({"type": kind, "response": response})))
    return out


class _Reader(Protocol):
    """What reading a background response needs of the engine's requests (an ``Api``)."""

    @property
    def headers(self) -> Any: ...

    @property
    def transport(self) -> Any: ...

    def stream(self, path: str, body: Any, landed: LandedCheck | None = None) -> AsyncGenerator[SSEEvent, None]: ...

    async def get(self, path: str, params: Any = None) -> Any: ...


@dataclass
class Background:
    """One background request: its body (None to pick up ``pending``), where it stands, how to wait."""

    http: _Reader
    body: dict[str, Any] | None
    turn: Turn
    meta: EventMetadata
    cursor: Cursor
    poll_interval: float
    max_resumes: int
    sleep: Callable[[float], Any] = asyncio.sleep
    landed: LandedCheck | None = None
    """Asked before the create request is sent again after a connection that broke (``providers._landed``)."""

    def _resume(self) -> AsyncGenerator[SSEEvent, None]:
        self.cursor.resumes.append(self.cursor.last)
        params = {"stream": "true", "starting_after": self.cursor.last}
        events = self.http.transport.stream_sse(
            f"responses/{self.cursor.response_id}",
            None,
            method="GET",
            params=params,
            headers=self.http.headers,
            error_parser=openai_error_info,
        )
        return cast(AsyncGenerator[SSEEvent, None], events)

    def _tell(self, observer: BackgroundObserver | None, known: str) -> None:
        cursor = self.cursor
        if observer is None or not cursor.response_id:
            return
        if cursor.response_id != known:
            observer.created(cursor.response_id, self.turn)
        observer.advanced(cursor.response_id, cursor.last)

    async def events(self) -> AsyncGenerator[SSEEvent, None]:
        """The response's events, each once, across broken streams; then its polled end if need be."""
        cursor, observer = self.cursor, BACKGROUND_OBSERVER.get()
        source: AsyncGenerator[SSEEvent, None] = (
            self._resume() if self.body is None else self.http.stream("responses", self.body, self.landed)
        )
        idle = 0
        try:
            while True:
                progressed, reason = False, "the stream ended before the response did"
                try:
                    async with aclosing(source):
                        async for event in source:
                            known = cursor.response_id
                            if not cursor.take(event):
                                continue
                            progressed = True
                            self._tell(observer, known)
                            yield event
                            if cursor.ended:
                                return
                except StreamError as exc:
                    reason = str(exc)
                except ProviderError as exc:
                    if not cursor.resumes:
                        raise  # the request itself was refused
                    log.warning(
                        "responses: background response %s can no longer be streamed (%s); polling it",
                        cursor.response_id,
                        exc.message,
                    )
                    async for event in self._polled():
                        yield event
                    return
                idle = 0 if progressed else idle + 1
                if await self._stop_resuming(reason, idle):
                    async for event in self._polled():
                        yield event
                    return
                await self.sleep(_RESUME_DELAYS[min(idle, len(_RESUME_DELAYS) - 1)])
                source = self._resume()
        except asyncio.CancelledError:
            if cursor.response_id and not cursor.ended and (observer is None or observer.cancels_response()):
                await asyncio.shield(self._cancel())
            raise

    async def _stop_resuming(self, reason: str, idle: int) -> bool:
        """After a broken stream (``idle`` resumes in a row brought nothing): True when the response is to be
        polled instead (it is over, or resuming brings nothing); raises when it cannot be resumed at all."""
        cursor = self.cursor
        if not cursor.response_id:
            raise StreamError(
                f"{reason}; no response id had arrived, so the background response cannot be resumed",
                provider="openai",
            )
        if idle and await self._has_ended():  # the events ran out because the response is over
            return True
        if idle > self.max_resumes:
            log.warning(
                "responses: %d resumes of background response %s brought nothing new; polling it",
                idle - 1,
                cursor.response_id,
            )
            return True
        log.warning(
            "responses: the stream of background response %s broke after sequence number %d (%s); resuming",
            cursor.response_id,
            cursor.last,
            reason,
        )
        return False

    async def _has_ended(self) -> bool:
        """One look at the response (a resume brought nothing: the cursor may stand at its last event)."""
        response = await self.http.get(f"responses/{self.cursor.response_id}")
        return isinstance(response, dict) and response.get("status") not in ACTIVE_STATUSES

    async def _polled(self) -> AsyncGenerator[SSEEvent, None]:
        """Poll until the response leaves queued/in_progress; then its output and end as events."""
        cursor = self.cursor
        while True:
            response = await self.http.get(f"responses/{cursor.response_id}")
            if not isinstance(response, dict):
                raise ProviderError(f"GET responses/{cursor.response_id} answered without a response object")
            cursor.status = str(response.get("status") or "")
            if cursor.status not in ACTIVE_STATUSES:
                break
            await self.sleep(self.poll_interval)
        cursor.ended = True
        if cursor.status == "cancelled":
            raise ProviderError(
                f"background response {cursor.response_id} was cancelled before it finished (by another client "
                "or on the server); its output is not kept",
                provider="openai",
            )
        for event in final_events(response, cursor):
            yield event

    async def _cancel(self) -> None:
        """``POST /responses/{id}/cancel``; the usage of what was produced goes out in a ``log`` event."""
        cursor = self.cursor
        try:
            answer = await self.http.transport.request_json(
                "POST",
                f"responses/{cursor.response_id}/cancel",
                None,
                headers=self.http.headers,
                error_parser=openai_error_info,
                landed=SAFE_TO_RESEND,  # a second cancel changes nothing
            )
        except Exception as exc:  # the caller's cancel stands; the server ends the response in its own time
            log.warning("responses: could not cancel background response %s: %s", cursor.response_id, exc)
            return
        answer = answer if isinstance(answer, dict) else {}
        cursor.status = str(answer.get("status") or "")
        usage = usage_of(answer)
        log.info(
            "responses: background response %s cancelled (status %s, %s output tokens)",
            cursor.response_id,
            cursor.status or "?",
            usage.output_tokens if usage else "?",
        )
        meta = replace(self.meta, usage=usage, extra={**self.meta.extra, "response_id": cursor.response_id})
        fields = {"response_id": cursor.response_id, "status": cursor.status, "after": cursor.last}
        publish(EventLog(meta, level="info", message="background response cancelled", fields=fields))


def open_background(
    http: _Reader,
    body: dict[str, Any],
    turn: Turn,
    meta: EventMetadata,
    *,
    poll_interval: float,
    max_resumes: int,
    landed: LandedCheck | None = None,
) -> Background:
    """The reader of one background request: a new one for ``body``, or the pending response this Turn
    picks up (then ``body`` is not sent and the reader starts after the pending cursor)."""
    pending = take_pending(turn)
    if pending is None:
        return Background(http, body, turn, meta, Cursor(), poll_interval, max_resumes, landed=landed)
    log.info(
        "responses: picking up background response %s after sequence number %d", pending.response_id, pending.after
    )
    cursor = Cursor(response_id=pending.response_id, last=pending.after, texts=None)
    return Background(http, None, turn, meta, cursor, poll_interval, max_resumes)
