"""OpenAI Responses API: create (stream and not), retrieve, delete, input items, compact."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._attachments import check_responses_files
from ._background import check_background, start_background
from ._builtin import decide_builtin, forced, offered
from ._call import Call
from ._errors import SimError
from ._faults import SSEStream
from ._model import decide, is_reasoning_model, reasoning_summary
from ._openai_compaction import compact_in_request, compaction_threshold, prune
from ._openai_items import check_context, normalize_input, to_msgs, tool_choice, tool_specs
from ._openai_out import input_tokens, output_items, response_object, stream_frames, usage, with_phases
from ._openai_reasoning import bind_reasoning, drop_stale_reasoning, redo_cost
from ._output_rules import check_openai_format
from ._prompt_cache import Segment, cache_use
from ._quirks import shape_response, untyped_error_frame
from ._state import Conversation, SimState, StoredResponse, new_id, stored_or_404
from ._tokens import ITEM_OVERHEAD, count_text, count_value
from ._validate import bound_error, enum_error, validate

_ID = re.compile(r"[A-Za-z0-9_-]+")


def _conversation_id(value: Any) -> str | None:
    if isinstance(value, dict):
        return str(value.get("id")) if value.get("id") else None
    return str(value) if value else None


def chain_items(state: SimState, response_id: str) -> list[dict[str, Any]]:
    """The effective context a chained request inherits: inputs and outputs back through the chain."""
    stored = state.responses.get(response_id)
    if stored is None:
        raise SimError(
            400,
            f"Previous response with id '{response_id}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    items: list[dict[str, Any]] = []
    while stored is not None:
        items = stored.input + stored.output + items
        parent = stored.previous_response_id
        stored = state.responses.get(parent) if parent else None
    return copy.deepcopy(items)


def conversation_or_404(state: SimState, conv_id: str, param: str | None = "conversation") -> Conversation:
    """The live conversation `conv_id`, else the service's 404."""
    conv = state.conversations.get(conv_id)
    if conv is None or conv.deleted:
        raise SimError(404, f"Conversation with id '{conv_id}' not found.", param=param)
    return conv


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        check_openai_format(fmt, "text.format")
        return dict(fmt["schema"])
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {"type": "object", "properties": {"answer": {"type": "string"}}}
    return None


def _obfuscate(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return not (isinstance(options, dict) and options.get("include_obfuscation") is False)


def _reasoning_on(body: dict[str, Any]) -> bool:
    setting = body.get("reasoning")
    if isinstance(setting, dict) and setting.get("effort") not in (None, "none"):
        return True
    return is_reasoning_model(str(body.get("model") or ""))


def _summary_wanted(body: dict[str, Any]) -> bool:
    """Whether a reasoning item carries a summary: asked for (``reasoning.summary``), as the API does, or
    always for the simulator's own reasoning models (``sim-reasoner``...), so reasoning can be seen offline."""
    setting = body.get("reasoning")
    asked = isinstance(setting, dict) and setting.get("summary") in ("auto", "concise", "detailed")
    return asked or str(body.get("model") or "").startswith("sim-")


def _selectors(call: Call, body: dict[str, Any]) -> tuple[str | None, bool, str | None]:
    """(previous_response_id, store, conversation id) after compat mode and the selector checks."""
    compat = call.state.compat_mode or (call.fault is not None and call.fault.compat)
    raw_prev = None if compat else body.get("previous_response_id")
    prev = str(raw_prev) if raw_prev else None
    if prev and not _ID.fullmatch(prev):
        raise SimError(
            400,
            f"Invalid 'previous_response_id': '{prev}'. Expected an ID that contains letters, numbers, underscores, or "
            "dashes, but this value contained additional characters.",
            param="previous_response_id",
            code="invalid_value",  # the message is OpenAI's; its code is not on record, this is the usual one
        )
    store = False if compat else body.get("store") is not False
    conv_id = _conversation_id(body.get("conversation"))
    if prev and conv_id:
        raise SimError(
            400,
            "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.",
            code="mutually_exclusive_parameters",
        )
    if not body.get("model"):
        raise SimError(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    return prev, store, conv_id


def _context(
    state: SimState,
    body: dict[str, Any],
    prev: str | None,
    conv_id: str | None,
    lookup: Callable[[SimState, str], list[dict[str, Any]]] = chain_items,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(effective context, normalized new input) after the state checks; marks the conversation busy.
    ``lookup`` finds the context ``prev`` holds (a WebSocket connection looks in its own cache first)."""
    with state.lock:
        prefix = lookup(state, prev) if prev else []
        if conv_id:
            conv = conversation_or_404(state, conv_id)
            if conv_id in state.busy_conversations:
                raise SimError(
                    400,
                    "Another process is currently operating on this conversation. Please retry in a few seconds.",
                    param="conversation",
                    code="conversation_locked",
                )
            prefix = copy.deepcopy(conv.items)
        new_input = normalize_input(state, body.get("input"))
        if not new_input and state.reject_empty_input:
            # Whether OpenAI refuses an empty input after an anchor is unverified; this is the strict switch.
            raise SimError(400, "Invalid 'input': provide at least one input item.", param="input", code="empty_input")
        context = prefix + new_input
        check_context(state, context)
        context = prune(state, context)
        if conv_id:
            state.busy_conversations.add(conv_id)
    return context, new_input


def _cached(state: SimState, body: dict[str, Any], context: list[dict[str, Any]], instructions: str | None) -> int:
    """OpenAI's automatic prompt cache: the longest prefix of 1,024 tokens or more that an earlier request of
    the same model and ``prompt_cache_key`` read, counted as cached (every prompt is cached as it is read)."""
    head = ITEM_OVERHEAD + count_text(instructions) if instructions else 0
    route = f"{body.get('model')}|{body.get('prompt_cache_key') or ''}"
    segments = [Segment([instructions, body.get("tools")], head)]
    segments += [Segment(item, ITEM_OVERHEAD + count_value(item)) for item in context]
    return cache_use(state, route, segments, implicit=True).read


def _respond(
    state: SimState,
    body: dict[str, Any],
    context: list[dict[str, Any]],
    selectors: tuple[str | None, bool, str | None],
    effects: dict[str, Any],
    sent: str | None = None,
) -> dict[str, Any]:
    """The response object the scripted model produces for `context` (recording the context it saw), shaped
    by the quirks in force (``sent``: the previous_response_id the request carried)."""
    prev, store, conv_id = selectors
    instructions = body.get("instructions") if isinstance(body.get("instructions"), str) else None
    context, dropped = drop_stale_reasoning(state, context, instructions)
    if dropped:
        effects["dropped_reasoning"] = [str(i.get("id")) for i in dropped]
    rendered = input_tokens(context, instructions)
    seen, compacted = compact_in_request(state, context, compaction_threshold(body), instructions)
    msgs = to_msgs(seen, instructions)
    reply = (
        state.next_reply()
        or decide_builtin(msgs, offered("responses", body), forced(body))
        or decide(msgs, tool_specs(body.get("tools")), tool_choice(body.get("tool_choice")), _schema(body))
    )
    if reply.reasoning is None and _reasoning_on(body) and _summary_wanted(body):
        reply = replace(reply, reasoning=reasoning_summary(to_msgs(context, instructions), reply))
    raw_include = body.get("include")
    include = frozenset(str(i) for i in raw_include) if isinstance(raw_include, list) else frozenset()
    top = body.get("top_logprobs")
    output = output_items(state, reply, _reasoning_on(body), include, top if isinstance(top, int) else 0)
    with_phases(str(body.get("model") or ""), output)
    if compacted is not None:  # the compaction comes first: the model answers from it
        output.insert(0, compacted)
    bind_reasoning(state, context, output, instructions)
    spent = usage(rendered, output, cached=_cached(state, body, context, instructions))
    if dropped:  # the model reasons again over what it could not use
        again = redo_cost(dropped)
        spent["output_tokens"] += again
        spent["output_tokens_details"]["reasoning_tokens"] += again
        spent["total_tokens"] += again
    response_id = new_id("resp_")
    obj = response_object(
        body,
        response_id=response_id,
        created_at=state.now(),
        output=output,
        usage_=spent,
        previous_response_id=prev,
        conversation=conv_id,
        store=store,
        reply=reply,
    )
    shape_response(state.quirks, obj, sent)
    with state.lock:
        state.contexts[response_id] = copy.deepcopy(context)
    return obj


def _commit(
    state: SimState, obj: dict[str, Any], new_input: list[dict[str, Any]], conv_id: str | None, prev: str | None
) -> None:
    """Store the completed response (chained on ``prev``) and append its items to its conversation; release
    the conversation."""
    with state.lock:
        if obj["store"]:
            state.responses[obj["id"]] = StoredResponse(obj["id"], new_input, obj["output"], prev, obj)
            for item in new_input + obj["output"]:
                state.items[item["id"]] = item
        if conv_id and conv_id in state.conversations:
            conv = state.conversations[conv_id]
            for item in new_input + obj["output"]:
                stored = {**copy.deepcopy(item), "status": "completed"}
                conv.items.append(stored)
                state.items[stored["id"]] = stored
        state.busy_conversations.discard(conv_id or "")


def _hold_in_progress(state: SimState, obj: dict[str, Any], new_input: list[dict[str, Any]], prev: str | None) -> None:
    """A stream cut while the server goes on (``finish_after_cut``): the response reads back as
    ``in_progress``, with no output yet, until it is committed."""
    if not obj["store"]:
        return
    running = {**copy.deepcopy(obj), "status": "in_progress", "output": [], "usage": None}
    with state.lock:
        state.responses[obj["id"]] = StoredResponse(obj["id"], new_input, [], prev, running)


async def create_response(call: Call) -> ASGIApp:
    """POST /v1/responses."""
    try:
        return await _create(call)
    except SimError as err:
        # Such servers open the stream first and report what went wrong inside it.
        if "untyped-stream-errors" in call.state.quirks and call.obj().get("stream") is True:
            return SSEStream([untyped_error_frame(err.message)], None, lambda: call.state.closing)
        raise


async def _create(call: Call) -> ASGIApp:
    body = call.obj()
    validate("CreateResponse", body)
    check_responses_files(body.get("input"))
    check_background(body)
    state = call.state
    selectors = _selectors(call, body)
    sent, store, conv_id = selectors
    prev = sent
    if sent and "forgets" in state.quirks:
        # Accepted, never looked up: the model answers from the new input alone.
        call.effects["forgot_previous_response"] = sent
        prev = None
        selectors = (None, store, conv_id)
    context, new_input = _context(state, body, prev, conv_id)

    def abort() -> None:
        with state.lock:
            state.busy_conversations.discard(conv_id or "")

    def commit() -> None:
        _commit(state, obj, new_input, conv_id, prev)

    try:
        obj = _respond(state, body, context, selectors, call.effects, sent)
        if body.get("background"):
            return start_background(call, obj, commit, abort)
        if body.get("stream"):
            frames = stream_frames(obj, _obfuscate(body), state.quirks)
            error_frame = untyped_error_frame(_MID_STREAM_ERROR) if "untyped-stream-errors" in state.quirks else None
            return SSEStream(
                frames,
                call.fault,
                lambda: state.closing,
                commit,
                abort,
                error_frame=error_frame,
                on_detach=lambda: _hold_in_progress(state, obj, new_input, prev),
            )
        response = JSONResponse(obj)
    except BaseException:
        abort()  # a failure before the answer leaves no conversation locked
        raise
    commit()
    return response


_MID_STREAM_ERROR = "The server had an error while processing your request. Sorry about that!"


async def delete_response(call: Call) -> ASGIApp:
    """DELETE /v1/responses/{id}."""
    response_id = call.request.path_params["response_id"]
    with call.state.lock:
        stored_or_404(call.state, response_id)
        del call.state.responses[response_id]
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


def paginate(call: Call, items: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI list page over `items` (oldest first) honouring `limit`, `order` (default desc), `after`."""
    query = call.request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise enum_error(order, ["asc", "desc"], "order")
    raw_limit = query.get("limit", "20")
    if not re.fullmatch(r"-?[0-9]{1,18}", raw_limit):
        raise SimError(
            400,
            "Invalid type for 'limit': expected an integer, but got a string instead.",
            param="limit",
            code="invalid_type",
        )
    limit = int(raw_limit)
    if not 1 <= limit <= 100:
        raise bound_error("limit", limit, 1, ">=") if limit < 1 else bound_error("limit", limit, 100, "<=")
    ordered = items if order == "asc" else list(reversed(items))
    after = query.get("after")
    if after:
        ids = [i.get("id") for i in ordered]
        ordered = ordered[ids.index(after) + 1 :] if after in ids else []
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(ordered) > len(page),
    }


async def list_input_items(call: Call) -> ASGIApp:
    """GET /v1/responses/{id}/input_items: the response's own input items."""
    with call.state.lock:
        stored = stored_or_404(call.state, call.request.path_params["response_id"])
        return JSONResponse(paginate(call, copy.deepcopy(stored.input)))


async def compact_response(call: Call) -> ASGIApp:
    """POST /v1/responses/compact: the context (``input``, after ``previous_response_id`` when given)
    compacted into the spec's ``response.compaction`` object: the user messages as they were, then one
    ``compaction`` item whose ``encrypted_content`` holds the rest (sealed: the simulator reads it back
    when a later request replays the item, and the scripted model sees it as a summary message)."""
    body = call.obj()
    validate("CompactResponseMethodPublicBody", body)
    state = call.state
    prev, _, _ = _selectors(call, body)
    with state.lock:
        context = (chain_items(state, prev) if prev else []) + normalize_input(state, body.get("input"))
        check_context(state, context)
        context = prune(state, context)
    kept = [copy.deepcopy(i) for i in context if i.get("type") == "message" and i.get("role") == "user"]
    folded = [i for i in context if not (i.get("type") == "message" and i.get("role") == "user")]
    summary = " ".join(f"{m.role}: {m.text}" for m in to_msgs(folded) if m.text)
    item_id = new_id("cmp_")
    blob = state.seal("openai", item_id, f"Summary of {len(folded)} earlier items. {summary}"[:4000])
    output = [*kept, {"type": "compaction", "id": item_id, "encrypted_content": blob}]
    with state.lock:
        state.items[item_id] = output[-1]
    instructions = body.get("instructions") if isinstance(body.get("instructions"), str) else None
    return JSONResponse(
        {
            "id": new_id("resp_"),
            "object": "response.compaction",
            "output": output,
            "created_at": state.now(),
            "usage": usage(input_tokens(context, instructions), output),
        }
    )
