"""Sending one planned request, with the recoveries: an expired parent, a lost conversation, an
expired item reference, a server that ignores server-side state.

Logs follow seed 000's levels: INFO for the request sent and the response received, WARNING for a
fallback, ERROR when the server rejects a request (before any recovery).
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
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
from geppetto.events import metadata_for
from geppetto.providers._chain import likely_edit
from geppetto.providers._hints import reworded
from geppetto.providers._http import HttpTransport, SSEEvent, openai_error_info, responses_create_error_info
from geppetto.providers._landed import LandedCheck
from geppetto.turns import BlockKind, Turn

from .._stateful import ResponsesMetrics
from ._answer import StreamState, consume_stream, usage_of
from ._background import open_background
from ._evidence import Endpoint, StateIgnored, Verdict, echoed, lost_calls, refused_state
from ._items import blocks_to_items
from ._landed import conversation_check, read_back
from ._repair import repair_conversation
from ._request import (
    CONVERSATION_ITEMS_PER_CALL,
    Plan,
    judge_answer,
    plan_full,
    plan_new_conversation,
    seed_split,
    turn_ids,
)

__all__ = ["Api", "Sender", "StateIgnored", "send_with_fallbacks"]

log = logging.getLogger("geppetto.providers.openai_responses")


@dataclass(frozen=True)
class Api:
    """One engine's requests on its (possibly shared) transport: its own headers (the key) and OpenAI's
    error parser go with every request, nothing is stored on the transport."""

    transport: HttpTransport
    headers: Mapping[str, str]
    whole: bool = False
    """Ask for whole Responses (``stream: false``) and read each as the one terminal event it amounts to."""

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


async def _append_items(http: Api, conversation_id: str, items: list[dict[str, Any]]) -> None:
    """Add ``items`` to a conversation, as many per call as the API takes."""
    step = CONVERSATION_ITEMS_PER_CALL
    for i in range(0, len(items), step):
        await http.post(f"conversations/{conversation_id}/items", {"items": items[i : i + step]})


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
    await _append_items(http, cid, items[step:])
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
    if engine.background:
        reader = open_background(
            http, body, turn, meta, poll_interval=engine.poll_interval, max_resumes=engine.max_resumes, landed=landed
        )
        events = reader.events()
        if reader.body is None:
            check = None  # a response picked up: what it answered is compared with the plan when recorded
    else:
        events = http.stream("responses", body, landed)
    try:
        async with aclosing(events):
            await consume_stream(events, stream, meta, on_created=check)
    except StreamError as exc:  # a response whose id arrived is read back, never created again
        stream.release()  # what the broken stream brought is published before the rest is read
        await read_back(http, body, stream, meta, exc, background=engine.background, poll_interval=engine.poll_interval)
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
    answer is judged (``_judge``) and a server that forgot raises :class:`StateIgnored`, its held deltas
    dropped; a kept or open verdict releases them and is reported with the answer (``plan.evidence``)."""
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
