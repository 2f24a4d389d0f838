"""OpenAI Responses output: output items, usage, the response object and its SSE event sequence."""

from __future__ import annotations

import copy
import re
import secrets
from typing import Any

from ._builtin import results
from ._faults import sse
from ._model import BuiltinCall, Reply
from ._openai_items import arguments_json
from ._quirks import DONE_FRAME, keeps_event
from ._state import SimState, new_id
from ._tokens import ITEM_OVERHEAD, count_items, count_text

REASONING_OVERHEAD = 8


def chunks(text: str) -> list[str]:
    """`text` split into streaming deltas (one word with its trailing space each)."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _builtin_item(call: BuiltinCall, include: frozenset[str]) -> dict[str, Any]:
    """A hosted-tool call item; its results only when `include` asks for them, as the service does."""
    if call.kind == "code_execution":
        logs = [{"type": "logs", "logs": call.output}] if isinstance(call.output, str) else []
        return {
            "id": new_id("ci_"),
            "type": "code_interpreter_call",
            "status": "completed",
            "code": call.query,
            "container_id": new_id("cntr_"),
            "outputs": logs if "code_interpreter_call.outputs" in include else None,
        }
    if call.kind == "file_search":
        hits = [
            {"file_id": r["url"], "filename": r["title"], "score": 0.9, "text": r["text"], "attributes": {}}
            for r in results(call)
        ]
        return {
            "id": new_id("fs_"),
            "type": "file_search_call",
            "status": "completed",
            "queries": [call.query],
            "results": hits if "file_search_call.results" in include else None,
        }
    action: dict[str, Any] = {"type": "search", "query": call.query}
    if "web_search_call.action.sources" in include:
        action["sources"] = [{"type": "url", "url": r["url"]} for r in results(call)]
    return {"id": new_id("ws_"), "type": "web_search_call", "status": "completed", "action": action}


def _annotations(reply: Reply, text: str) -> list[dict[str, Any]]:
    """Citations of what the built-in tools found, spanning the whole text."""
    out: list[dict[str, Any]] = []
    for call in reply.builtin:
        for r in results(call):
            if call.kind == "file_search":
                out.append({"type": "file_citation", "file_id": r["url"], "filename": r["title"], "index": len(text)})
            else:
                span = {"start_index": 0, "end_index": len(text)}
                out.append({"type": "url_citation", **span, "url": r["url"], "title": r["title"]})
    return out


def token_logprobs(text: str, top: int) -> list[dict[str, Any]]:
    """Scripted per-token log probabilities for `text` (its streaming deltas are its tokens): the chosen token
    certain (0.0), with `top` alternatives led by the chosen one and then less likely made-up tokens."""

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"bytes": list(token.encode()), "logprob": logprob, "token": token}

    out = []
    for token in chunks(text):
        alternatives = [entry(token, 0.0)] + [entry(f"{token.strip()}~{k}", -2.0 * k) for k in range(1, top)]
        out.append({**entry(token, 0.0), "top_logprobs": alternatives[:top]})
    return out


def output_items(
    state: SimState,
    reply: Reply,
    reasoning: bool,
    include: frozenset[str] = frozenset(),
    top_logprobs: int = 0,
) -> list[dict[str, Any]]:
    """The output items for `reply`; records which reasoning item produced each output item.

    Reasoning with neither text nor tool calls (a queued `Reply(reasoning=...)`, or a reasoning model
    answering `Reply()`) also yields an empty-text message, so the output can be chained and replayed.
    """
    items: list[dict[str, Any]] = []
    rs_id: str | None = None
    if reasoning or reply.reasoning is not None:
        rs_id = new_id("rs_")
        text = reply.reasoning or ""
        summary = [{"type": "summary_text", "text": text}] if text else []
        items.append(
            {
                "id": rs_id,
                "type": "reasoning",
                "summary": summary,
                "encrypted_content": state.seal("openai", rs_id, text),
            }
        )
    items += [_builtin_item(call, include) for call in reply.builtin]
    # A reasoning item must be followed by the item it produced, so reasoning alone comes with an empty message.
    message_text = "" if rs_id is not None and reply.text is None and not reply.tool_calls else reply.text
    if message_text is not None:
        annotations = _annotations(reply, message_text)
        logprobs = token_logprobs(message_text, top_logprobs) if "message.output_text.logprobs" in include else []
        part = {"type": "output_text", "text": message_text, "annotations": annotations, "logprobs": logprobs}
        items.append(
            {"id": new_id("msg_"), "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        )
    for call in reply.tool_calls:
        items.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "arguments": arguments_json(call.args),
                "call_id": call.call_id or new_id("call_"),
                "name": call.name,
            }
        )
    if rs_id is not None:
        with state.lock:
            for item in items[1:]:
                state.produced_by[item["id"]] = rs_id
    return items


def with_phases(model: str, output: list[dict[str, Any]]) -> None:
    """gpt-5.x messages carry a ``phase`` (recorded traffic): ``commentary`` when a tool call follows them in
    the output, else ``final_answer``."""
    if not model.lower().rsplit("/", 1)[-1].startswith("gpt-5"):
        return
    for i, item in enumerate(output):
        if item.get("type") == "message":
            calls = any(later.get("type") == "function_call" for later in output[i + 1 :])
            item["phase"] = "commentary" if calls else "final_answer"


def usage(input_tokens: int, output: list[dict[str, Any]], *, cached: int = 0) -> dict[str, Any]:
    """Responses usage: input over the effective context (``cached`` of it read from the prompt cache), output
    over the output items, reasoning separately."""
    reasoning = sum(
        REASONING_OVERHEAD + sum(count_text(s.get("text", "")) for s in i.get("summary", []))
        for i in output
        if i.get("type") == "reasoning"
    )
    visible = count_items([i for i in output if i.get("type") != "reasoning"])
    out = visible + reasoning
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + out,
    }


def input_tokens(context: list[dict[str, Any]], instructions: str | None) -> int:
    """Tokens the model reads: instructions plus every item of the effective context."""
    extra = ITEM_OVERHEAD + count_text(instructions) if instructions else 0
    return extra + count_items(context)


def response_object(
    body: dict[str, Any],
    *,
    response_id: str,
    created_at: int,
    output: list[dict[str, Any]],
    usage_: dict[str, Any] | None,
    previous_response_id: str | None,
    conversation: str | None,
    store: bool,
    reply: Reply,
    status: str = "completed",
) -> dict[str, Any]:
    """The full `Response` object echoing the request's settings."""
    incomplete = reply.stop == "max_tokens" and status == "completed"
    raw_reasoning = body.get("reasoning")
    reasoning: dict[str, Any] = raw_reasoning if isinstance(raw_reasoning, dict) else {}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": "incomplete" if incomplete else status,
        "background": False,
        "billing": {"payer": "developer"},
        "completed_at": created_at if status == "completed" else None,
        "conversation": {"id": conversation} if conversation else None,
        "error": None,
        "frequency_penalty": body.get("frequency_penalty", 0.0),
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "metadata": body.get("metadata") or {},
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "presence_penalty": body.get("presence_penalty", 0.0),
        "previous_response_id": previous_response_id,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": body.get("safety_identifier"),
        "service_tier": "default",
        "store": store,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": echoed_tools(body.get("tools")),
        "top_logprobs": body.get("top_logprobs", 0),
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation") or "disabled",
        "usage": usage_,
        "user": body.get("user"),
    }


def echoed_tools(tools: Any) -> list[Any]:
    """The request's tools as a response shows them: a function tool always says ``strict`` (the
    Responses API's default, ``true``, when the request left it out), as the spec requires of a response."""
    out = []
    for tool in tools or []:
        if isinstance(tool, dict) and tool.get("type") == "function" and "strict" not in tool:
            tool = {**tool, "strict": True}
        out.append(tool)
    return out


_EMPTY_TEXT = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}


class _Seq:
    def __init__(self, obfuscate: bool = True, quirks: frozenset[str] = frozenset()) -> None:
        self.frames: list[bytes] = []
        self.obfuscate = obfuscate
        self.quirks = quirks

    def padding(self, delta: str) -> dict[str, str]:
        """The `obfuscation` field the service adds to text deltas (random characters that even out the sizes
        of the events, so their lengths do not reveal the text), unless the request turned it off."""
        if not self.obfuscate:
            return {}
        return {"obfuscation": secrets.token_urlsafe(12)[: max(1, 16 - len(delta))]}

    def emit(self, kind: str, **fields: Any) -> None:
        if not keeps_event(self.quirks, kind):
            return
        self.frames.append(sse(kind, {"type": kind, "sequence_number": len(self.frames), **fields}))


def _stream_item(seq: _Seq, index: int, item: dict[str, Any]) -> None:
    kind = item["type"]
    item_id = item["id"]
    if kind == "reasoning":
        added = {
            **copy.deepcopy(item),
            "summary": [],
            "encrypted_content": item["encrypted_content"][: len(item["encrypted_content"]) // 2],
        }
        seq.emit("response.output_item.added", output_index=index, item=added)
        for si, part in enumerate(item["summary"]):
            ids = {"item_id": item_id, "output_index": index, "summary_index": si}
            seq.emit("response.reasoning_summary_part.added", **ids, part={"type": "summary_text", "text": ""})
            for delta in chunks(part["text"]):
                seq.emit("response.reasoning_summary_text.delta", **ids, delta=delta)
            seq.emit("response.reasoning_summary_text.done", **ids, text=part["text"])
            seq.emit("response.reasoning_summary_part.done", **ids, part=part)
    elif kind == "message":
        seq.emit(
            "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
        )
        for ci, part in enumerate(item["content"]):
            ids = {"item_id": item_id, "output_index": index, "content_index": ci}
            seq.emit("response.content_part.added", **ids, part={**_EMPTY_TEXT})
            for di, delta in enumerate(chunks(part["text"])):
                logprobs = part["logprobs"][di : di + 1]
                seq.emit("response.output_text.delta", **ids, delta=delta, logprobs=logprobs, **seq.padding(delta))
            for ai, annotation in enumerate(part.get("annotations") or []):
                seq.emit("response.output_text.annotation.added", **ids, annotation_index=ai, annotation=annotation)
            seq.emit("response.output_text.done", **ids, text=part["text"], logprobs=part["logprobs"])
            seq.emit("response.content_part.done", **ids, part=part)
    elif kind == "function_call":
        seq.emit(
            "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "arguments": ""}
        )
        for delta in chunks(item["arguments"]):
            seq.emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=delta)
        seq.emit(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            name=item["name"],
            arguments=item["arguments"],
        )
    elif kind in _HOSTED_EVENTS:
        _stream_hosted(seq, index, item)
    else:  # an item with no deltas (a compaction): added and done carry it whole
        seq.emit("response.output_item.added", output_index=index, item=item)
    seq.emit("response.output_item.done", output_index=index, item=item)


_HOSTED_EVENTS = {
    "web_search_call": ("in_progress", "searching", "completed"),
    "file_search_call": ("in_progress", "searching", "completed"),
    "code_interpreter_call": ("in_progress", "interpreting", "completed"),
}


def _stream_hosted(seq: _Seq, index: int, item: dict[str, Any]) -> None:
    """A hosted-tool call's progress events (the code streams in deltas before it is interpreted)."""
    kind = item["type"]
    ids = {"item_id": item["id"], "output_index": index}
    opening = {**item, "status": "in_progress"}
    if kind == "code_interpreter_call":
        opening.update(code="", outputs=None)
    seq.emit("response.output_item.added", output_index=index, item=opening)
    for stage in _HOSTED_EVENTS[kind]:
        if stage == "interpreting":
            for delta in chunks(item["code"]):
                seq.emit("response.code_interpreter_call_code.delta", **ids, delta=delta)
            seq.emit("response.code_interpreter_call_code.done", **ids, code=item["code"])
        seq.emit(f"response.{kind}.{stage}", **ids)


def stream_frames(final: dict[str, Any], obfuscate: bool = True, quirks: frozenset[str] = frozenset()) -> list[bytes]:
    """The SSE frames for a finished response: created, in_progress, each item, then the terminal event
    (`obfuscate`: text deltas carry `obfuscation`, as `stream_options.include_obfuscation` defaults;
    `quirks`: the stream quirks in force, see docs/simulator.md)."""
    seq = _Seq(obfuscate, quirks)
    start = {
        **final,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "completed_at": None,
        "incomplete_details": None,
    }
    if "usage" not in final:  # a server that never reports usage
        del start["usage"]
    seq.emit("response.created", response=start)
    seq.emit("response.in_progress", response=start)
    for index, item in enumerate(final["output"]):
        _stream_item(seq, index, item)
    terminal = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    seq.emit(terminal, response=final)
    if "done-marker" in quirks:
        seq.frames.append(DONE_FRAME)
    return seq.frames
