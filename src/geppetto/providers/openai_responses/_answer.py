"""The answer to one request: its SSE stream read into blocks (``consume_stream``), then the response
recorded into the Turn (``record``): blocks appended and tagged for anchoring, reasoning stamped, state
kept. See docs/responses.md ("What goes on the wire", "Phases, citations and reasoning text").

SSE events become blocks in output order, with events published as the stream arrives. Only complete items
become blocks. A function call becomes a ``tool_call`` block (and a tool-call event) only when the response
completed; a stream that fails, carries a malformed event or ends without its terminal event raises
``StreamError`` naming what was received, and the caller may keep only the finished assistant messages
(``StreamState.finished_text_blocks``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from geppetto._exceptions import PreviousResponseNotFoundError, StreamError
from geppetto.events import (
    STOP_CONTENT_FILTER,
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_OTHER,
    STOP_TOOL_CALLS,
    EventFinal,
    EventMetadata,
    EventReasoningDelta,
    EventTextDelta,
    Usage,
    metadata_for,
    publish,
)
from geppetto.output import settle_output
from geppetto.pricing import record_usage
from geppetto.providers._chain import chain_extra, tag_chain
from geppetto.providers._chain_wire import block_wire
from geppetto.providers._http_errors import names_missing_response
from geppetto.providers._prefix_guard import Unit, stamp, start_digest
from geppetto.providers._sse import SSEEvent, malformed
from geppetto.providers._stream_loop import publish_parts
from geppetto.providers._streaming import parse_args
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    PAYLOAD_CITATIONS,
    PAYLOAD_LOGPROBS,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_STOP_REASON,
    Block,
    BlockKind,
    Turn,
    raw_block,
)

from ._items import (
    REPLAYABLE_ITEM_TYPES,
    builtin_of_item,
    mark_standalone,
    message_extras,
    message_text,
    reasoning_extras,
)
from ._request import Plan, prefix_header, wire_for
from ._state import ConversationState, set_state, turn_ids

__all__ = [
    "StreamState",
    "consume_stream",
    "item_to_block",
    "record",
    "stamp_response",
    "stop_reason_of",
    "tag_blocks",
    "unreplayed_items",
    "usage_of",
]

log = logging.getLogger("geppetto.providers.openai_responses")


_ALIASES = {"response.reasoning.delta": "response.reasoning_text.delta"}
_TERMINAL = ("response.completed", "response.incomplete")


def message_block(item: dict[str, Any]) -> Block:
    """An assistant message as an llm_text block: its phase and content parts as ``_items`` keeps them (what
    goes back), and, as a view in the vocabulary every engine uses, its annotations as ``citations`` and its
    token ``logprobs`` (never sent back)."""
    block = Block.llm_text(message_text(item), item_id=item.get("id"))
    block.payload.update(message_extras(item))
    parts = [p for p in item.get("content") or [] if isinstance(p, dict)]
    annotations = [a for p in parts for a in p.get("annotations") or []]
    logprobs = [lp for p in parts for lp in p.get("logprobs") or []]
    if annotations:
        block.payload[PAYLOAD_CITATIONS] = annotations
    if logprobs:
        block.payload[PAYLOAD_LOGPROBS] = logprobs
    return block


def item_to_block(item: dict[str, Any]) -> Block | None:
    """One finished output item as a block; None for a function call cut off before it completed.

    Items geppetto does not model (hosted tools such as web search) become ``other`` blocks holding the
    raw item, so the Turn keeps everything the server stores.
    """
    kind = item.get("type")
    if kind == "reasoning":
        summary = [str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, dict)]
        text = "".join(str(c.get("text", "")) for c in item.get("content") or [] if isinstance(c, dict))
        block = Block.reasoning(
            text=text or None,
            item_id=item.get("id"),
            encrypted_content=item.get("encrypted_content") or None,
            summary=summary,
        )
        block.payload.update(reasoning_extras(item))
        return block
    if kind == "message":
        return message_block(item)
    if kind == "function_call":
        if item.get("status") == "incomplete":
            return None
        args = parse_args(str(item.get("arguments") or ""))
        return Block.tool_call(
            str(item.get("call_id") or ""), str(item.get("name") or ""), args, item_id=item.get("id")
        )
    return raw_block(item, builtin_of_item(item))


def unreplayed_items(items: list[dict[str, Any]]) -> str | None:
    """Why a response whose output is ``items`` cannot anchor: the server stores an item the Turn will
    not replay (an incomplete function call, or a call that needs an output geppetto cannot give)."""
    for item in items:
        kind = item.get("type")
        if kind == "function_call" and item.get("status") == "incomplete":
            return f"incomplete function call {item.get('call_id') or item.get('id')} (dropped from the Turn)"
        if kind not in ("reasoning", "message", "function_call") and kind not in REPLAYABLE_ITEM_TYPES:
            return f"{kind} item {item.get('id')} (kept as an 'other' block, never replayed)"
    return None


def usage_of(response: dict[str, Any]) -> Usage | None:
    """The response's usage, with cached and reasoning tokens."""
    raw = response.get("usage")
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_tokens=int((raw.get("input_tokens_details") or {}).get("cached_tokens") or 0),
        reasoning_tokens=int((raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
        cache_write_tokens=int((raw.get("input_tokens_details") or {}).get("cache_write_tokens") or 0),
    )


def stop_reason_of(response: dict[str, Any], blocks: list[Block]) -> str:
    """Map ``status`` / ``incomplete_details.reason`` to geppetto's stop vocabulary."""
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return {"max_output_tokens": STOP_MAX_TOKENS, "content_filter": STOP_CONTENT_FILTER}.get(
            str(reason), STOP_OTHER
        )
    if any(b.kind is BlockKind.TOOL_CALL for b in blocks):
        return STOP_TOOL_CALLS
    return STOP_END


@dataclass
class StreamState:
    """What has arrived so far: the response object, items by output index, finished items."""

    response: dict[str, Any] = field(default_factory=dict)
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: dict[int, dict[str, Any]] = field(default_factory=dict)
    event_types: list[str] = field(default_factory=list)
    terminal: str = ""
    held: list[Any] | None = None
    """The deltas kept back while it is not known whether the server used the stored context (None:
    published as they arrive); :meth:`release` publishes them, a forgotten answer's are dropped."""

    def release(self) -> None:
        """Publish the deltas held back, in order, and publish later ones as they arrive."""
        held, self.held = self.held, None
        for event in held or ():
            publish(event)

    text_deltas: list[dict[str, Any]] = field(default_factory=list)
    """The text delta events published (their data), so a response read back after a broken stream
    publishes only the rest of its text."""

    def published_texts(self) -> dict[tuple[int, int], str]:
        """The text published per (output index, content index)."""
        texts: dict[tuple[int, int], list[str]] = {}
        for data in self.text_deltas:
            at = (int(data.get("output_index") or 0), int(data.get("content_index") or 0))
            texts.setdefault(at, []).append(str(data.get("delta") or ""))
        return {at: "".join(parts) for at, parts in texts.items()}

    def received(self) -> str:
        """A short account of the stream so far, for error messages."""
        kinds = [str(self.done[i].get("type")) for i in sorted(self.done)]
        tail = ", ".join(self.event_types[-3:])
        return f"{len(self.event_types)} events (last: {tail or 'none'}); finished items: {kinds or 'none'}"

    def output_items(self) -> list[dict[str, Any]]:
        """The finished response's output items (its final ``output`` when present)."""
        output = self.response.get("output")
        items = output if isinstance(output, list) and output else [self.done[i] for i in sorted(self.done)]
        return [it for it in items if isinstance(it, dict)]

    def blocks(self) -> list[Block]:
        """Blocks of the finished response in output order (see ``mark_standalone``)."""
        return mark_standalone(self.output_items(), [item_to_block(it) for it in self.output_items()])

    def finished_text_blocks(self) -> list[Block]:
        """Finished assistant messages only: what is safe to keep from a broken stream."""
        out = []
        for i in sorted(self.done):
            if self.done[i].get("type") == "message":
                block = item_to_block(self.done[i])
                if block is not None and block.text:
                    out.append(block)
        return out


def _fail(state: StreamState, message: str, **kw: Any) -> StreamError:
    return StreamError(message, received=state.received(), provider="openai", **kw)


def _stream_error(state: StreamState, data: dict[str, Any]) -> Exception:
    """The error an ``error`` event reports: OpenAI's (``type: "error"`` with ``message``, ``code``) or the
    untyped ``{"error": {"message": ...}}`` other servers send. Before any response arrived, a code of
    ``previous_response_not_found``, or a message saying a response was not found (the only response a
    create request names is its parent), is ``PreviousResponseNotFoundError``, recovered like the HTTP 400."""
    nested = data.get("error")
    err = nested if isinstance(nested, dict) else data
    message = str(err.get("message") or (nested if isinstance(nested, str) else "") or "no message")
    code, param = err.get("code"), err.get("param")
    code = str(code) if code not in (None, "") else None
    param = str(param) if param not in (None, "") else None
    if not state.response and (code == "previous_response_not_found" or (not code and names_missing_response(message))):
        return PreviousResponseNotFoundError(
            f"stream error: {message}", provider="openai", code="previous_response_not_found", param=param, body=data
        )
    return _fail(state, f"stream error: {message}", code=code, param=param)


def _handle(state: StreamState, etype: str, data: dict[str, Any], meta: EventMetadata) -> None:
    if etype in ("response.output_text.delta", "response.refusal.delta"):
        text = EventTextDelta(meta, str(data.get("delta") or ""))
        if state.held is None:
            publish(text)
        else:
            state.held.append(text)
        if etype == "response.output_text.delta":
            state.text_deltas.append(data)
    elif etype in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        thought = EventReasoningDelta(meta, str(data.get("delta") or ""))
        if state.held is None:
            publish(thought)
        else:
            state.held.append(thought)
    elif etype == "response.output_item.added" and isinstance(data.get("item"), dict):
        state.items[int(data.get("output_index") or 0)] = data["item"]
    elif etype == "response.output_item.done" and isinstance(data.get("item"), dict):
        state.done[int(data.get("output_index") or 0)] = data["item"]
    elif etype == "response.failed":
        err = (data.get("response") or {}).get("error") or {}
        raise _fail(state, f"the response failed: {err.get('message') or 'no message'}", code=err.get("code"))
    elif etype == "error" or (not data.get("type") and data.get("error")):
        raise _stream_error(state, data)


async def consume_stream(
    events: AsyncIterator[SSEEvent],
    state: StreamState,
    meta: EventMetadata,
    *,
    on_created: Callable[[dict[str, Any]], None] | None = None,
) -> StreamState:
    """Read the whole stream into ``state``; raise ``StreamError`` unless it ends with completed/incomplete."""
    async for event in events:
        if event.data.strip() == "[DONE]":  # some servers' end marker (after the terminal event, when there is one)
            break
        try:
            data = event.json()
        except ValueError as exc:
            raise _fail(state, malformed("event data", event.data, exc)) from exc
        if not isinstance(data, dict):
            raise _fail(state, f"malformed event data {event.data[:200]!r}")
        etype = str(data.get("type") or event.event)
        etype = _ALIASES.get(etype, etype)
        state.event_types.append(etype)
        if isinstance(data.get("response"), dict):
            first = not state.response
            state.response = data["response"]
            if first and on_created is not None:
                on_created(state.response)
        _handle(state, etype, data, meta)
        if etype in _TERMINAL:
            state.terminal = etype
            return state
    raise _fail(state, "the stream ended without response.completed")


# -- record --------------------------------------------------------------------------------------------------
# Recording a response: its blocks appended, tagged for anchoring, its reasoning stamped, the state kept.


def record(
    self: Any,
    turn: Turn,
    start: int,
    plan: Plan,
    stream: StreamState,
    mode: str,
    prior: ConversationState | None,
) -> None:
    """Append the response's blocks to ``turn``, tag them for anchoring, stamp its reasoning for the prefix
    guard, record the state and publish the final events."""
    response = stream.response
    blocks = stream.blocks()
    others = len(turn.blocks) - start  # blocks another run appended to this Turn while this one ran
    start = len(turn.blocks)
    for block in blocks:
        BLOCK_META_PROVIDER.set(block.metadata, self.provider)
        turn.append(block)
    settle_output(turn, blocks, self._output_of(turn))
    # the reasoning's prefix for the guard: the plan's digest covers the Turn unless another run added blocks
    stamp_response(turn, start, None if others else plan.prefix, include_system=not self.instructions_mode)
    response_id = str(response.get("id") or "")
    _anchor(self, turn, start, stream, plan, response_id=response_id, others=others, mode=mode, prior=prior)
    _finish(self, turn, response, blocks, plan)


def _anchor(
    self: Any,
    turn: Turn,
    start: int,
    stream: StreamState,
    plan: Plan,
    *,
    response_id: str,
    others: int,
    mode: str,
    prior: ConversationState | None,
) -> None:
    """Tag the response's blocks (from ``start``) for anchoring a later request and keep the Turn's state,
    unless the response cannot anchor: no id, blocks added meanwhile by another run, or not finished."""
    refused = unreplayed_items(stream.output_items())
    unfinished = not_an_anchor(stream.response, plan.previous_response_id, plan.conversation_id, echo=not plan.evidence)
    if not response_id:
        log.warning(
            "responses: the response carried no id; its blocks cannot anchor a later request (%s)", turn_ids(turn)
        )
    elif others:
        # One inference per Turn at a time (docs/responses.md): this answer was asked for on a Turn
        # that no longer ends where the request ended, so the server's context behind it is not the
        # Turn's. Its blocks keep their response id but never anchor; the state is left as it was.
        log.warning(
            "responses: %d block(s) were added to the Turn while response %s was running (two inferences "
            "at once on one Turn?); its %d block(s) will not anchor a later request, which sends them "
            "as new input instead (%s). Run one inference per Turn at a time: await each run, or give "
            "each concurrent run its own turn.clone()",
            others,
            response_id,
            len(turn.blocks) - start,
            turn_ids(turn),
        )
        tag_blocks(turn, start, response_id, refused="concurrent inference on the same Turn", stored=self.store)
    elif unfinished:
        log.warning("responses: response %s cannot anchor a later request: %s", response_id, unfinished)
    else:
        if refused and self.store:
            log.warning("responses: response %s cannot anchor a later request: %s", response_id, refused)
        tag_blocks(
            turn,
            start,
            response_id,
            include_system=not self.instructions_mode,
            seed=plan.seed(),
            prefix=plan.prefix,
            refused=refused,
            stored=self.store or self._socket is not None,  # store=False over a socket: held by the connection
        )
        if self._socket is not None:
            self._socket.stamp(turn.blocks[start:])
        if self.store:
            # the mode asked for is kept (the kill switch may have sent this request stateless); so is
            # the conversation a stateless request left alone
            if plan.mode == "conversation":
                cid = plan.conversation_id
            else:
                cid = prior.conversation_id if prior is not None and mode == "conversation" else None
            set_state(turn, ConversationState(mode, cid, response_id, plan.base))


def _finish(self: Any, turn: Turn, response: dict[str, Any], blocks: list[Any], plan: Plan) -> None:
    usage = usage_of(response)
    stop = stop_reason_of(response, blocks)
    TURN_META_PROVIDER.set(turn.metadata, self.provider)
    model = str(response.get("model") or self.model)
    TURN_META_MODEL.set(turn.metadata, model)
    TURN_META_STOP_REASON.set(turn.metadata, stop)
    meta = metadata_for(turn, self.provider, self.model)
    record_usage(turn, blocks, meta, provider=self.provider, model=model, usage=usage)
    publish_parts(meta, blocks)
    meta.stop_reason = stop
    meta.extra["response_id"] = str(response.get("id") or "")
    meta.extra.update(
        chain_extra(
            mode=plan.mode,
            anchor=plan.previous_response_id or plan.conversation_id or "",
            items=len(plan.items),
            full=plan.full,
            fallback=plan.fallback,
            detail=plan.detail,
            sent=plan.blocks,
            why=plan.why,
        )
    )
    if plan.evidence:  # an answer without an exact echo: what showed the server kept (or ignored) the state
        meta.extra["responses.evidence"] = plan.evidence
    if plan.repair:  # a conversation repaired in place: the anchor it was cut back to, the items deleted
        meta.extra["responses.repair"] = {"after": plan.repair, "deleted": plan.deleted}
    if plan.created:  # how a new conversation is reported: here, in the log (INFO) and in the Turn's state
        meta.extra["responses.conversation_created"] = plan.conversation_id
        if plan.replaced:
            meta.extra["responses.conversation_replaced"] = plan.replaced
    text = "".join(b.text for b in blocks if b.kind is BlockKind.LLM_TEXT)
    publish(EventFinal(meta, text))


_ANCHORS = frozenset({"completed", "incomplete"})
"""The statuses of a response that may anchor a later request (one still running or failed may not)."""


def not_an_anchor(
    response: dict[str, Any], previous_response_id: str | None, conversation_id: str | None, *, echo: bool = True
) -> str | None:
    """Why ``response`` may not anchor a later request (None when it may): it has not finished, or it
    answered another request than the one planned (a background response picked up in another process
    after its first request fell back to another shape). ``echo=False``: the server does not echo the
    state and other evidence showed the answer used it, so only the status counts."""
    status = response.get("status")
    if status is not None and status not in _ANCHORS:
        return f"its status is {status!r}, not completed"
    if not echo:
        return None
    if (response.get("previous_response_id") or None) != (previous_response_id or None):
        return f"it follows {response.get('previous_response_id')!r}, the Turn planned {previous_response_id!r}"
    conv = response.get("conversation")
    conv_id = conv.get("id") if isinstance(conv, dict) else conv
    if conversation_id and conv_id != conversation_id:
        return f"it is in conversation {conv_id!r}, the Turn planned {conversation_id!r}"
    return None


# -- tagging and stamping -------------------------------------------------------------------------------------
# The response's blocks carry what later requests check: the anchor proof's tags (response id, block
# count, fingerprint) and, on reasoning blocks, the prefix they were produced after (the prefix guard).


def tag_blocks(
    turn: Turn,
    start: int,
    response_id: str,
    *,
    include_system: bool = True,
    seed: str = "",
    prefix: Any = None,
    refused: str | None = None,
    stored: bool = True,
) -> None:
    """Stamp ``turn.blocks[start:]`` (one response's blocks) with ``response_id``, their count and the
    fingerprint at the end of the response (:func:`geppetto.providers._chain.tag_chain`).

    ``prefix`` is a ``prefix_hasher`` over ``turn.blocks[:start]`` when the caller has one (it is not
    changed). ``refused`` records why the response can never anchor (no fingerprint is written).
    ``stored=False`` (a response the server did not keep) writes the response id only.
    """
    tag_chain(
        turn,
        start,
        response_id,
        wire_for(include_system),
        seed=seed,
        prefix=prefix,
        refused=refused,
        stored=stored,
        log=log,
        label="responses",
    )


def stamp_response(turn: Turn, start: int, prefix: Any, *, include_system: bool) -> None:
    """Stamp the reasoning blocks of the response at ``turn.blocks[start:]`` with the prefix they follow.
    ``prefix``: the anchor proof's running digest over ``turn.blocks[:start]``, if the caller has it."""
    new = turn.blocks[start:]
    if not any(b.kind is BlockKind.REASONING for b in new):
        return
    head = prefix_header(turn, include_system)
    if head:  # the anchor proof's digest starts from nothing, so it serves only without a header
        prefix = None
    if prefix is None:
        prefix = start_digest(head)
        for block in turn.blocks[:start]:
            prefix.update(block_wire(block, wire_for(include_system)) or b"")
    units = [Unit(block_wire(b, wire_for(include_system)) or b"", b, b.kind is BlockKind.REASONING) for b in new]
    stamp(units, head, new, start=prefix)
