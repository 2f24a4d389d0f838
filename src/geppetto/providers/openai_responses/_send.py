"""Sending one request and seeing it answered: the recoveries (an expired parent, a lost conversation, an
expired item reference, a server that ignores server-side state), repairing a conversation in place,
background responses, and what a request that failed after it went out left on the server.
See docs/responses.md ("Fallbacks", "What a retry sends", "Background responses").

Log levels: INFO for the request sent and the response received, WARNING for a fallback, ERROR when the
server rejects a request (before any recovery).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

from geppetto._exceptions import (
    BadRequestError,
    ChainingWarning,
    NotFoundError,
    PreviousResponseNotFoundError,
    ProviderConnectionError,
    ProviderError,
    StreamError,
    UsageError,
)
from geppetto._json import dumps
from geppetto.events import EventLog, EventMetadata, metadata_for, publish
from geppetto.pricing import BLOCK_META_USAGE
from geppetto.providers._background import (
    BACKGROUND_OBSERVER,
    BackgroundObserver,
    PendingResponse,
    take_pending,
)
from geppetto.providers._chain import likely_edit
from geppetto.providers._hints import reworded
from geppetto.providers._http import HttpTransport
from geppetto.providers._http_errors import openai_error_info, responses_create_error_info
from geppetto.providers._landed import ACTIVE_STATUSES, SAFE_TO_RESEND, LandedCheck, NotLanded, await_landed
from geppetto.providers._sse import SSEEvent
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ITEM_ID, BlockKind, Turn

from .._stateful import ResponsesMetrics
from ._answer import StreamState, consume_stream, usage_of
from ._evidence import (
    Endpoint,
    Requests,
    Sent,
    StateIgnored,
    Verdict,
    echoed,
    judge,
    lost_calls,
    refused_state,
    settle,
    token_bound,
)
from ._items import blocks_to_items, replayed
from ._request import (
    CONVERSATION_ITEMS_PER_CALL,
    COUNT_FIELDS,
    Plan,
    plan_full,
    plan_new_conversation,
    seed_split,
)
from ._state import get_state, list_items, turn_ids, visible

__all__ = [
    "Api",
    "Cursor",
    "Sender",
    "conversation_check",
    "final_events",
    "judge_answer",
    "open_background",
    "read_back",
    "repair_conversation",
    "send_with_fallbacks",
    "sent_of",
]

log = logging.getLogger("geppetto.providers.openai_responses")


@dataclass(frozen=True)
class Api:
    """One engine's requests on its (possibly shared) transport: its own headers (the key) and OpenAI's
    error parser go with every request, nothing is stored on the transport."""

    transport: HttpTransport
    headers: Mapping[str, str]
    whole: bool = False
    """Ask for whole Responses (``stream: false``) and read each as the one terminal event it amounts to."""
    socket: Any = None
    """A :class:`~geppetto.providers._websocket.ResponsesSocket`: create requests go over it (``transport="websocket"``)."""

    async def post(self, path: str, body: Any, landed: LandedCheck | None = None) -> Any:
        return await self.transport.request_json(
            "POST", path, body, headers=self.headers, error_parser=openai_error_info, landed=landed
        )

    async def delete(self, path: str) -> Any:
        return await self.transport.request_json("DELETE", path, headers=self.headers, error_parser=openai_error_info)

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return await self.transport.request_json(
            "GET", path, params=params, headers=self.headers, error_parser=openai_error_info
        )

    def stream(self, path: str, body: Any, landed: LandedCheck | None = None) -> AsyncGenerator[SSEEvent, None]:
        if self.socket is not None and path == "responses":
            return cast(AsyncGenerator[SSEEvent, None], self.socket.stream(body))
        if self.whole:
            return self._whole(path, body, landed)
        events = self.transport.stream_sse(
            path, body, headers=self.headers, error_parser=responses_create_error_info, landed=landed
        )
        return cast(AsyncGenerator[SSEEvent, None], events)

    async def _whole(self, path: str, body: Any, landed: LandedCheck | None) -> AsyncGenerator[SSEEvent, None]:
        response = await self.transport.request_json(
            "POST", path, body, headers=self.headers, error_parser=responses_create_error_info, landed=landed
        )
        # the whole response becomes the one terminal event a stream ends with, so one reader serves both
        status = str(response.get("status") or "completed") if isinstance(response, dict) else "completed"
        kind = f"response.{status if status in ('completed', 'incomplete', 'failed') else 'completed'}"
        yield SSEEvent(kind, dumps({"type": kind, "response": response}))


class Sender(Protocol):
    """What sending needs of its engine (a :class:`~geppetto.providers.openai_responses.ResponsesEngine`):
    its body builder, settings and counters, what it knows of its endpoint, and the flag a server that
    ignores state sets."""

    provider: str
    model: str
    base_url: str
    metrics: ResponsesMetrics
    instructions_mode: bool
    on_previous_not_found: str
    server_ignores_state: bool
    _endpoint: Endpoint
    background: bool
    poll_interval: float
    max_resumes: int

    def build_body(self, turn: Turn, plan: Plan) -> dict[str, Any]: ...

    def guard_plan(self, turn: Turn, plan: Plan) -> None: ...


def describe(plan: Plan) -> str:
    """The request's shape, for logs: ``chained request (previous_response_id=resp_1, 1 input item)``."""
    n = len(plan.items)
    items = f"{n} input item{'s' if n != 1 else ''}{', whole Turn' if plan.full else ''}"
    if plan.previous_response_id:
        return f"chained request (previous_response_id={plan.previous_response_id}, {items})"
    if plan.conversation_id:
        return f"conversation request (conversation={plan.conversation_id}, {items})"
    if plan.seed_items is not None:
        return f"conversation request (a new conversation, {items})"
    return f"stateless request ({items})"


async def _is_empty(http: Api, conversation_id: str) -> bool | None:
    """True/False for an existing conversation, None when it does not exist."""
    try:
        page = await http.get(f"conversations/{conversation_id}/items", {"limit": 1})
    except NotFoundError:
        return None
    return not (isinstance(page, dict) and page.get("data"))


async def _append_items(http: Api, conversation_id: str, items: list[dict[str, Any]], before: int = 0) -> None:
    """Add ``items`` to a conversation holding ``before`` items, as many per call as the API takes; a call
    whose answer was lost after the items went in is not sent again (``appended_check``)."""
    step = CONVERSATION_ITEMS_PER_CALL
    for i in range(0, len(items), step):
        chunk = items[i : i + step]
        landed = appended_check(http, conversation_id, before + i, len(chunk))
        try:
            await http.post(f"conversations/{conversation_id}/items", {"items": chunk}, landed)
        except ProviderConnectionError:
            if await landed() is not True:
                raise
            log.warning(
                "responses: the items added to conversation %s went in although the answer was lost", conversation_id
            )


_NO_ENDPOINT = (404, 405, 501)
"""Statuses of a server that has no such endpoint (not found, method not allowed, not implemented)."""


async def _create_conversation(http: Api, items: list[dict[str, Any]]) -> Any:
    """``POST /conversations``; on a server without the Conversations API, an error that says so and names
    the mode that works there."""
    try:
        return await http.post("conversations", {"items": items})
    except ProviderError as exc:
        if exc.status not in _NO_ENDPOINT:
            raise
        message = (
            f"the server has no Conversations API: POST /conversations answered {exc.status} ({exc.message}); "
            'mode="conversation" needs it, use ResponsesEngine(mode="chained") with this server'
        )
        raise reworded(exc, message) from exc


async def _prepare_conversation(http: Api, plan: Plan) -> None:
    """Put the plan's seed items into a conversation: the empty one it may reuse, else a new one."""
    if plan.seed_items is None or plan.conversation_id is not None:
        return
    items, step = plan.seed_items, CONVERSATION_ITEMS_PER_CALL
    reuse = plan.reuse_conversation
    if reuse:
        empty = await _is_empty(http, reuse)
        if empty:
            await _append_items(http, reuse, items)
            log.info("responses: conversation %s was empty; seeded it with %d items of the Turn", reuse, len(items))
            plan.conversation_id, plan.fallback, plan.detail = reuse, "", ""
            return
        if empty is None:
            plan.fallback, plan.detail = "conversation_not_found", f"conversation {reuse} not found"
    created = await _create_conversation(http, items[:step])
    cid = str(created["id"])
    await _append_items(http, cid, items[step:], before=len(items[:step]))
    plan.conversation_id, plan.created = cid, True
    if reuse and empty is False:
        plan.replaced = reuse  # it still exists, holding context the Turn no longer matches
        log.info(
            "responses: new conversation %s seeded with %d items, replacing %s (left on the server)",
            cid,
            len(items),
            reuse,
        )
    else:
        log.info("responses: new conversation %s seeded with %d items", cid, len(items))


def warn_system_change(turn: Turn) -> None:
    """A :class:`~geppetto.ChainingWarning` (shown once by Python's default filter) when a middleware most likely
    changed the system prompt since the latest response: if it does so on every request, every request sends
    the whole Turn, silently, unless the application configured logging."""
    found = likely_edit(turn)
    if found is None or found[1].kind is not BlockKind.SYSTEM:
        return
    index, _, middleware = found
    warnings.warn(
        f"the system prompt (block #{index}, from the middleware {middleware!r}) changed since the last response, "
        "so this request sends the whole Turn and starts a new chain; if it changes on every request, pass "
        "ResponsesEngine(..., instructions_mode=True) to send it as instructions and keep chaining",
        ChainingWarning,
        stacklevel=2,
    )


async def _send(engine: Sender, http: Api, turn: Turn, plan: Plan, stream: StreamState) -> None:
    await repair_conversation(http, turn, plan, include_system=not engine.instructions_mode)
    engine.guard_plan(turn, plan)  # before a conversation is seeded with the plan's items
    await _prepare_conversation(http, plan)
    if not plan.items:
        raise UsageError(
            "nothing to send: the Turn holds no block the Responses API takes; append Block.user(...) first"
        )
    body = engine.build_body(turn, plan)
    if plan.fallback:
        log.warning(
            "responses: %s; sending the whole Turn (fallback: %s; %s)", plan.detail, plan.fallback, turn_ids(turn)
        )
        engine.metrics.fallback(plan.fallback)
        if plan.fallback == "fingerprint_mismatch" and not engine.instructions_mode:
            warn_system_change(turn)
    engine.metrics.request(plan.mode, len(plan.items) + len(plan.seed_items or []), full=plan.full)
    log.info("responses: %s", describe(plan))

    prev, conv = plan.previous_response_id, plan.conversation_id
    # a conversation made for this request with nothing in it holds no context to have used or ignored
    holds = bool(prev) or not (plan.created and not plan.seed_items)
    proven = False

    def verify(response: dict[str, Any]) -> None:
        nonlocal proven
        if echoed(response, prev, conv):
            proven = True
        elif holds and endpoint.current() is None:
            stream.held = []  # not known yet whether this answer used the stored context: hold its text

    endpoint = engine._endpoint
    meta = metadata_for(turn, engine.provider, engine.model)
    check: Callable[[dict[str, Any]], None] | None = verify if prev or conv else None
    landed = conversation_check(http, turn, plan)
    on_created = check
    if engine.background:
        reader = open_background(
            http, body, turn, meta, poll_interval=engine.poll_interval, max_resumes=engine.max_resumes, landed=landed
        )
        events = reader.events()
        if reader.body is None:
            check = on_created = None  # a response picked up: what it answered is compared with the plan when recorded
    elif (pending := take_pending(turn)) is not None:  # created by a process that stopped: read back, not sent again
        events = pending_events(http, pending, body, landed, poll_interval=engine.poll_interval)
        check = None  # as for a background response picked up
        on_created = told_created(turn, body, None, pending.response_id)
    else:
        events = http.stream("responses", body, landed)
        on_created = told_created(turn, body, check)
    try:
        async with aclosing(events):
            await consume_stream(events, stream, meta, on_created=on_created)
    except StreamError as exc:  # a response whose id arrived is read back, never created again
        stream.release()  # what the broken stream brought is published before the rest is read
        await read_back(http, body, stream, meta, exc, background=engine.background, poll_interval=engine.poll_interval)
    except ProviderConnectionError:  # it landed and its answer was lost: read from the conversation, if it is there
        if (stored := landed_answer(landed, body)) is None:
            raise
        await consume_stream(as_events(stored), stream, meta, on_created=on_created)
    response = stream.response
    usage = usage_of(response)
    log.info(
        "responses: response %s received (%s, %d output items, %s input tokens)",
        response.get("id") or "(no id)",
        response.get("status") or stream.terminal,
        len(stream.output_items()),
        usage.input_tokens if usage else "?",
    )
    if check is not None:
        await _check_state(engine, http, turn, plan, body, stream, proven=proven, holds=holds)


async def _check_state(
    engine: Sender,
    http: Api,
    turn: Turn,
    plan: Plan,
    body: dict[str, Any],
    stream: StreamState,
    *,
    proven: bool,
    holds: bool,
) -> None:
    """After a stateful answer, before it is recorded: an exact echo proves the state was used; else the
    answer is judged (``judge_answer``, below) and a server that forgot raises :class:`StateIgnored`, its
    held deltas dropped; a kept or open verdict releases them and is reported with the answer
    (``plan.evidence``)."""
    endpoint, response = engine._endpoint, stream.response
    if proven or echoed(response, plan.previous_response_id, plan.conversation_id):
        if stream.held is not None:  # the echo came with the terminal event only
            stream.release()
        if not endpoint.echoes:
            await endpoint.learn(Verdict("kept", echo=True, evidence="echo", detail="the answers name it"))
            endpoint.echoes = True
    elif holds:
        try:
            verdict = await judge_answer(endpoint, http, turn, plan, body, response)
        except StateIgnored:
            stream.held = None  # the forgotten answer's text is never published
            raise
        stream.release()
        plan.evidence = verdict.describe()
    else:
        plan.evidence = f"nothing to judge: conversation {plan.conversation_id} was made for this request"


async def _attempt(engine: Sender, http: Api, turn: Turn, plan: Plan, streams: list[StreamState]) -> None:
    stream = StreamState()
    streams.append(stream)
    try:
        await _send(engine, http, turn, plan, stream)
    except StreamError as exc:
        log.error("responses: the stream of the %s broke: %s", describe(plan), exc)
        raise
    except ProviderConnectionError as exc:
        log.error("responses: the %s was not answered: %s", describe(plan), exc.message)
        raise
    except ProviderError as exc:
        code = " ".join(str(p) for p in (exc.status, exc.code or exc.param) if p)
        log.error(
            "responses: the server rejected the %s: %s",
            describe(plan),
            f"{code}: {exc.message}" if code else exc.message,
        )
        raise


def _without_references(plan: Plan, include_system: bool) -> Plan:
    retry = copy.copy(plan)
    items = blocks_to_items(plan.blocks, include_system=include_system, references=False, stale=plan.stale)
    if plan.seed_items is not None:
        retry.seed_items, retry.items = seed_split(items)
        retry.conversation_id = retry.reuse_conversation = None
    else:
        retry.items = items
    retry.fallback, retry.detail = "item_not_found", "an item referenced by id is no longer on the server"
    return retry


def _stateless_after(engine: Sender, turn: Turn, exc: StateIgnored) -> Plan:
    """The whole Turn, after a server was found to ignore server-side state; the engine stays stateless."""
    engine.server_ignores_state = True
    log.warning(
        "responses: the server at %s ignores server-side state (%s, evidence: %s); the whole Turn is "
        "sent again (the answer it gave, if any, is dropped) and this engine stays stateless (%s)",
        engine.base_url,
        exc.verdict.detail,
        exc.verdict.evidence,
        turn_ids(turn),
    )
    include_system = not engine.instructions_mode
    retry = plan_full(turn, include_system=include_system, fallback="server_ignores_state", detail=str(exc))
    retry.evidence = exc.verdict.describe()
    return retry


async def send_with_fallbacks(engine: Sender, http: Api, turn: Turn, plan: Plan, streams: list[StreamState]) -> Plan:
    """Send ``plan``; on an expired parent, a lost conversation or item, or a server that ignores state,
    send once more in the fallback shape. Each attempt's stream state is appended to ``streams``."""
    include_system = not engine.instructions_mode
    lost = f"; the context before this Turn (base {plan.base}) is not carried over" if plan.base else ""
    try:
        await _attempt(engine, http, turn, plan, streams)
        return plan
    except PreviousResponseNotFoundError:
        if engine.on_previous_not_found == "raise":
            raise
        detail = f"parent {plan.previous_response_id} not found on the server{lost}"
        retry = plan_full(turn, include_system=include_system, fallback="previous_response_not_found", detail=detail)
    except NotFoundError as exc:
        param = exc.param or ""
        if param.startswith(("input", "items")):
            retry = _without_references(plan, include_system)
        elif plan.conversation_id and param in ("", "conversation"):
            detail = f"conversation {plan.conversation_id} not found{lost}"
            retry = plan_new_conversation(
                turn, include_system=include_system, fallback="conversation_not_found", detail=detail
            )
        else:
            raise
    except StateIgnored as exc:
        retry = _stateless_after(engine, turn, exc)
    except BadRequestError as exc:
        # a tool result refused as having no call, after an anchor that made the call (the server forgot),
        # or previous_response_id refused as a parameter (the server does not chain)
        verdict = None
        if plan.previous_response_id:
            verdict = lost_calls(plan.items, exc.status, exc.message) or refused_state(
                exc.status, exc.param, exc.message
            )
        if verdict is None:
            raise
        await engine._endpoint.learn(verdict)
        retry = _stateless_after(engine, turn, StateIgnored("previous_response_id", verdict))
    retry.prefix = retry.prefix or plan.prefix
    await _attempt(engine, http, turn, retry, streams)
    return retry


# -- background ----------------------------------------------------------------------------------------------
# Background responses (``ResponsesEngine(background=True)``): the request goes out with ``background``,
# ``store`` and ``stream`` set, so the response is generated server-side whatever happens to the connection.
#
# The events are read as one stream even when the connection breaks: a broken or cut stream is resumed with
# ``GET /responses/{id}?stream=true&starting_after=N`` (N: the last ``sequence_number`` received), and events
# are reconciled by ``sequence_number`` (one already received is skipped, so no delta is published twice and
# no item is added twice). When the events can no longer be streamed (the resume answered with an error, or
# resumes keep making no progress), the response is polled with ``GET /responses/{id}`` until it leaves
# ``queued``/``in_progress``, and its final output is read as the rest of the stream. Cancelling the caller
# (``asyncio`` cancellation, a session's cancel) sends ``POST /responses/{id}/cancel`` and publishes the usage
# of what the response had produced in a ``log`` event. A response that did not finish (not ``completed`` or
# ``incomplete``) never anchors a later request.
#
# ``geppetto serve`` follows a background request through :data:`BACKGROUND_OBSERVER` (the response id when it
# is created, the cursor as events arrive) and picks one up in another worker through :data:`PENDING_RESPONSE`
# (the mechanism the Interactions engine shares, :mod:`geppetto.providers._background`).


_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_RESUME_DELAYS = (0.0, 0.25, 0.5, 1.0, 2.0)
"""Seconds before each resume that follows a resume which brought nothing new (the first is at once)."""


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


# -- landed --------------------------------------------------------------------------------------------------
# What a Responses request that failed after it went out left on the server (see ``providers._landed``).
#
# - A stream that broke after ``response.created`` named its response: the response is read back with
#   ``GET /responses/{id}`` (waited for while it is in progress) and its rest read as the rest of the stream,
#   instead of a second ``POST /responses``. A 404 proves it did not land: the break is raised as before,
#   saying that sending again is safe.
# - A conversation request whose connection broke before any answer: before the transport sends it again,
#   the conversation's newest items are read; items after the last one the Turn knows mean the request
#   landed (its input is in the conversation), so it is not sent again.
# - A foreground request another process created and did not finish reading (a server worker that died after
#   ``response.created``; ``geppetto serve`` hears the id through the background observer, as for a background
#   response): the next process reads the response back by its id (:func:`pending_events`) instead of sending
#   the step again; only a response the server proves it does not hold (404), or one it cancelled, is sent again.


_SERVER_SAID = frozenset({"response.failed", "error"})
"""Events after which a broken stream is the server's own end, not a cut (nothing more to read back)."""
_PAGE = 100
"""The most items one conversation listing returns."""


async def as_events(events: list[SSEEvent]) -> AsyncIterator[SSEEvent]:
    for event in events:
        yield event


async def read_back(
    http: Any,
    body: dict[str, Any],
    state: StreamState,
    meta: EventMetadata,
    broken: StreamError,
    *,
    background: bool,
    poll_interval: float,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> None:
    """Finish ``state``, a stream of the request ``body`` that broke with ``broken``, from its response read
    back from the server. ``broken`` is raised as it is when there is nothing to read back (no id arrived,
    the response is not stored, or a background reader already did all it could), and with what was found
    when the response did not land."""
    response_id = str(state.response.get("id") or "")
    if background or not response_id or body.get("store") is False or getattr(http, "whole", False):
        raise broken
    if state.event_types and state.event_types[-1] in _SERVER_SAID:
        raise broken  # not a cut: the server ended the response itself
    what = f"response {response_id}"
    log.warning("responses: the stream of %s broke (%s); reading it back instead of sending again", what, broken)
    try:
        response = await await_landed(
            lambda: http.get(f"responses/{response_id}"), what, response_id, poll_interval=poll_interval, sleep=sleep
        )
    except NotLanded as exc:
        raise StreamError(
            f"{broken.message}; {exc.message}: it did not land, so sending the request again is safe",
            received=state.received(),
            provider="openai",
        ) from broken
    except ProviderError as exc:  # the break is what the caller has to know; what landed is not known
        raise StreamError(
            f"{broken.message}; reading {what} back failed too ({exc.message}), so whether it landed is not known",
            received=state.received(),
            provider="openai",
        ) from broken
    if response.get("status") == "cancelled":
        raise StreamError(
            f"{broken.message}; {what} was cancelled on the server before it finished",
            received=state.received(),
            provider="openai",
        ) from broken
    cursor = Cursor(response_id=response_id, texts=state.published_texts())
    await consume_stream(as_events(final_events(response, cursor)), state, meta)


def _last_known_item(turn: Turn, plan: Plan) -> str | None:
    """The id of the last item the Turn knows the conversation holds: the item of the last block before the
    plan's delta that came from the server (None when the delta is the whole Turn)."""
    if plan.full:
        return None
    start = len(turn.blocks) - len(plan.blocks)
    for block in reversed(turn.blocks[:start]):
        item_id = block.payload.get(PAYLOAD_ITEM_ID)
        if item_id:
            return str(item_id)
    return None


class ConversationCheck:
    """The :data:`LandedCheck` of a conversation request: whether its earlier attempt landed, read from the
    conversation's newest items; when it did, the items it added (``added``, oldest first: its input, then
    the answer the server stored), from which the answer is read instead of sending the input again."""

    def __init__(self, http: Any, conversation_id: str, known: str | None, seeded: int | None) -> None:
        self.http, self.conversation_id, self.known, self.seeded = http, conversation_id, known, seeded
        self.added: list[dict[str, Any]] | None = None

    async def __call__(self) -> bool | None:
        # a cut before any answer: what the conversation holds now says whether the input went in
        cid = self.conversation_id
        page = await self.http.get(f"conversations/{cid}/items", {"limit": _PAGE, "order": "desc"})
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            return None
        items = [item for item in data if isinstance(item, dict)]
        ids = [item.get("id") for item in items]
        if self.seeded is not None and not page.get("has_more"):
            newer = items[: max(len(items) - self.seeded, 0)]  # a conversation made for this request: seed, input
        elif self.known is not None and self.known in ids:
            newer = items[: ids.index(self.known)]  # newer items than the last known one: the input landed
        else:
            return None  # the last known item is not on the newest page: nothing proves either way
        if newer:
            self.added = list(reversed(newer))
        return bool(newer)


def conversation_check(http: Any, turn: Turn, plan: Plan) -> ConversationCheck | None:
    """For a conversation request: whether its earlier attempt landed, read from the conversation's items
    (None for a request in no conversation)."""
    cid = plan.conversation_id
    if plan.mode != "conversation" or not cid:
        return None
    return ConversationCheck(
        http, cid, _last_known_item(turn, plan), len(plan.seed_items or []) if plan.created else None
    )


def appended_check(http: Any, conversation_id: str, before: int, adding: int) -> LandedCheck:
    """The check of ``POST /conversations/{id}/items`` adding ``adding`` items to a conversation that held
    ``before`` (a seed being put in): True when it holds both, False when it still holds ``before`` alone,
    None otherwise (counted by paging through its items, oldest first)."""

    async def landed() -> bool | None:
        count, after = 0, None
        while True:
            params: dict[str, Any] = {"limit": _PAGE, "order": "asc", **({"after": after} if after else {})}
            page = await http.get(f"conversations/{conversation_id}/items", params)
            data = page.get("data") if isinstance(page, dict) else None
            if not isinstance(data, list):
                return None
            count += len(data)
            if not page.get("has_more") or not data:
                break
            after = data[-1].get("id") if isinstance(data[-1], dict) else None
            if not after:
                return None
        return True if count == before + adding else False if count == before else None

    return landed


_OUTPUT_TYPES = frozenset({"message", "function_call", "reasoning", "custom_tool_call"})


def landed_answer(check: LandedCheck | None, body: dict[str, Any]) -> list[SSEEvent] | None:
    """The answer a conversation request that landed left in its conversation (``check`` found its items),
    as the final events of its stream: the items after its input, when the server stored them (None: no
    answer to read, the request is not sent again)."""
    if not isinstance(check, ConversationCheck) or not check.added:
        return None
    sent = body.get("input")
    inputs = len(sent) if isinstance(sent, list) else 1
    output = check.added[inputs:]
    if not output or not all(item.get("type") in _OUTPUT_TYPES for item in output):
        return None
    if any(item.get("type") == "message" and item.get("role") != "assistant" for item in output):
        return None
    log.warning(
        "responses: the answer to the request in conversation %s was lost with its connection; read %d items of "
        "it from the conversation instead of sending the input again",
        check.conversation_id,
        len(output),
    )
    # a conversation's items do not name the response that added them: the blocks are labelled with the
    # conversation and their last item (what anchors a conversation request is the conversation and item ids)
    response = {
        "id": f"{check.conversation_id}:{output[-1].get('id') or len(check.added)}",
        "object": "response",
        "status": "completed",
        "output": output,
        "conversation": {"id": check.conversation_id},
        "model": body.get("model"),
    }
    return final_events(response, Cursor(texts={}))


def told_created(
    turn: Turn, body: dict[str, Any], check: Callable[[dict[str, Any]], None] | None, known: str = ""
) -> Callable[[dict[str, Any]], None] | None:
    """The ``on_created`` of a foreground request: ``check``, and the background observer (``geppetto serve``)
    told the id of a stored response, so another process can read it back if this one stops before its end
    (``known``: the id of a response picked up, not told again)."""
    observer = BACKGROUND_OBSERVER.get()
    if observer is None or body.get("store") is False:
        return check

    def created(response: dict[str, Any]) -> None:
        response_id = str(response.get("id") or "")
        if response_id and response_id != known:
            observer.created(response_id, turn)
        if check is not None:
            check(response)

    return created


async def pending_events(
    http: Any,
    pending: PendingResponse,
    body: dict[str, Any],
    landed: LandedCheck | None,
    *,
    poll_interval: float,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> AsyncGenerator[SSEEvent, None]:
    """The events of the foreground response ``pending`` another process created for this step: read back with
    ``GET /responses/{id}`` (waited for while in progress) as its final events (the text deltas that process
    published are not published again); ``body`` is sent only when the server proves it does not hold the
    response (404) or cancelled it."""
    response_id = pending.response_id
    what = f"response {response_id}"
    try:
        response: dict[str, Any] | None = await await_landed(
            lambda: http.get(f"responses/{response_id}"), what, response_id, poll_interval=poll_interval, sleep=sleep
        )
    except NotLanded as exc:
        log.warning("responses: %s; sending the step again (it did not land)", exc.message)
        response = None
    if response is not None and response.get("status") == "cancelled":
        log.warning("responses: %s was cancelled on the server before it finished; sending the step again", what)
        response = None
    if response is None:
        async with aclosing(http.stream("responses", body, landed)) as events:
            async for event in events:
                yield event
        return
    log.info("responses: picked up %s by reading it back (status %s)", what, response.get("status"))
    for event in final_events(response, Cursor(response_id=response_id, texts=None)):
        yield event


# -- repair --------------------------------------------------------------------------------------------------
# Repairing a conversation in place: delete its items after the anchor, so the delta can follow it.
#
# A plan with ``repair`` set names a response answered in the conversation whose prefix still matches the
# Turn (the anchor proof). Before the request, the conversation's items are listed (``order=asc``) and the
# run of them that equals the Turn's wire form up to the end of that response is found; every item after
# that run is deleted (``DELETE /conversations/{id}/items/{item_id}``, newest first), and the request
# then sends only the blocks after the anchor. When the items do not hold that run (the conversation was
# changed elsewhere) or a deletion fails, the plan becomes a new conversation seeded with the whole Turn,
# with the reason (fallback ``repair_failed``); the old conversation is reported as replaced.


_RID = str(BLOCK_META_RESPONSE_ID)


def _end_of(turn: Turn, response_id: str) -> int:
    """The index of ``response_id``'s last block in the Turn."""
    return max(i for i, b in enumerate(turn.blocks) if b.metadata.get(_RID) == response_id)


async def _stale_items(http: Api, turn: Turn, plan: Plan, include_system: bool) -> list[str]:
    """The ids of the conversation's items after the anchor's (raises ``ValueError`` saying why none can be
    told apart)."""
    cid, anchor = plan.conversation_id, str(plan.repair)
    held = replayed(turn.blocks[: _end_of(turn, anchor) + 1])
    mine = [visible(i) for i in blocks_to_items(held, include_system=include_system)]
    stored, _ = await list_items(http, f"conversations/{cid}/items")
    theirs = [visible(i) for i in stored]
    # The Turn's part starts at the conversation's start, or later when the conversation held context
    # before the Turn (``base``) or a server compaction cut what came before.
    for start in range(len(theirs) - len(mine) + 1):
        if theirs[start : start + len(mine)] == mine:
            return [str(i.get("id")) for i in stored[start + len(mine) :]]
    raise ValueError(f"its items do not hold the Turn up to response {anchor}")


async def repair_conversation(http: Api, turn: Turn, plan: Plan, *, include_system: bool) -> None:
    """Delete the items of ``plan``'s conversation after its ``repair`` anchor (see the module text); on
    failure turn ``plan`` into a new conversation seeded with the whole Turn."""
    if plan.repair is None or plan.conversation_id is None:
        return
    cid = plan.conversation_id
    try:
        stale = await _stale_items(http, turn, plan, include_system)
        for item_id in reversed(stale):
            await http.delete(f"conversations/{cid}/items/{item_id}")
            plan.deleted += 1
    except (ProviderError, ValueError) as exc:
        reason = exc.message if isinstance(exc, ProviderError) else str(exc)
        detail = f"conversation {cid} could not be repaired in place ({reason}); a new conversation holds the Turn"
        fresh = plan_new_conversation(turn, include_system=include_system, fallback="repair_failed", detail=detail)
        plan.items, plan.blocks, plan.full, plan.seed_items = fresh.items, fresh.blocks, True, fresh.seed_items
        plan.conversation_id, plan.fallback, plan.detail, plan.prefix = None, fresh.fallback, detail, None
        plan.repair, plan.replaced, plan.why = None, cid, detail
        return
    log.info(
        "responses: conversation %s repaired in place: %d items after response %s deleted, %d blocks to send",
        cid,
        plan.deleted,
        plan.repair,
        len(plan.blocks),
    )


# -- judge ---------------------------------------------------------------------------------------------------
# Judging a stateful answer that did not echo its state, before it is recorded into the Turn.
#
# The engine side of :mod:`._evidence`: what the request sent (bounds of its tokens, the anchor's recorded
# usage from the Turn), the verdict of the answer alone, and, once per endpoint when that is open, the one
# settling request. Only answers without an exact echo come here: the common path costs nothing.


def _anchor_usage(turn: Turn, anchor: str | None) -> tuple[int | None, int | None]:
    """(input tokens, visible output tokens) recorded on the anchor's last block, when the Turn has it."""
    if not anchor:
        return None, None
    key = str(BLOCK_META_RESPONSE_ID)
    for block in reversed(turn.blocks):
        if block.metadata.get(key) == anchor:
            stamp = BLOCK_META_USAGE.get(block.metadata)
            usage = stamp.get("usage") if isinstance(stamp, dict) else None
            if not isinstance(usage, dict) or not usage.get("input_tokens"):
                return None, None
            out = int(usage.get("output_tokens") or 0) - int(usage.get("reasoning_tokens") or 0)
            return int(usage["input_tokens"]), max(0, out)
    return None, None


def sent_of(turn: Turn, plan: Plan, body: Mapping[str, Any]) -> Sent:
    """What ``plan``'s request (``body``) sent, with the anchor's recorded usage."""
    delta = token_bound(plan.items)
    fixed = [body[k] for k in ("instructions", "text") if body.get(k)] + list(body.get("tools") or [])
    if plan.previous_response_id:
        anchor: str | None = plan.previous_response_id
    else:
        state = get_state(turn)
        anchor = state.previous_response_id if state is not None else None
    anchor_input, anchor_output = _anchor_usage(turn, anchor)
    return Sent(
        previous_response_id=plan.previous_response_id,
        conversation_id=plan.conversation_id,
        bound=delta + token_bound(fixed),
        delta_bound=delta,
        anchor=anchor,
        anchor_input=anchor_input,
        anchor_output=anchor_output,
        items=len(plan.items),
        shrinks=bool(body.get("context_management")) or body.get("truncation") == "auto",
    )


async def judge_answer(
    endpoint: Endpoint, api: Requests, turn: Turn, plan: Plan, body: Mapping[str, Any], response: Mapping[str, Any]
) -> Verdict:
    """The verdict this answer is taken on: its own evidence; else, the first time at this endpoint, the one
    settling request; else what is known of the endpoint. Raises :class:`StateIgnored` when the server did
    not use the stored context (the caller sends the whole Turn). What is learned is remembered."""
    sent = sent_of(turn, plan, body)
    verdict = judge(sent, response)
    known = endpoint.current()
    if verdict.previous_response_id != "unknown":
        await endpoint.learn(verdict)
    elif known is None:
        count_body = {k: v for k, v in body.items() if k in COUNT_FIELDS}
        count_body.pop("previous_response_id", None)
        count_body.pop("conversation", None)
        verdict = await settle(api, sent, response, count_body)
        await endpoint.learn(verdict)  # an open verdict too: the endpoint is not asked again
    else:
        verdict = replace(known, detail=f"as learned before; this answer: {verdict.detail}")
    if verdict.ignored:
        raise StateIgnored(sent.field, verdict)
    return verdict
