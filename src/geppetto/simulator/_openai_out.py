"""OpenAI Responses output: output items, usage, the response object and its SSE event sequence (§1.3, §4)."""

from __future__ import annotations

import copy
import re
from typing import Any

from ._faults import sse
from ._model import Reply
from ._openai_items import arguments_json
from ._state import SimState, new_id
from ._tokens import ITEM_OVERHEAD, count_items, count_text

REASONING_OVERHEAD = 8


def chunks(text: str) -> list[str]:
    """`text` split into streaming deltas (one word with its trailing space each)."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def output_items(state: SimState, reply: Reply, reasoning: bool) -> list[dict[str, Any]]:
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
    # A reasoning item must be followed by the item it produced, so reasoning alone comes with an empty message.
    message_text = "" if rs_id is not None and reply.text is None and not reply.tool_calls else reply.text
    if message_text is not None:
        part = {"type": "output_text", "text": message_text, "annotations": [], "logprobs": []}
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
        "input_tokens_details": {"cached_tokens": cached},
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
        "completed_at": created_at if status == "completed" else None,
        "conversation": {"id": conversation} if conversation else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "previous_response_id": previous_response_id,
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "service_tier": "default",
        "store": store,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation") or "disabled",
        "usage": usage_,
        "user": body.get("user"),
    }


class _Seq:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def emit(self, kind: str, **fields: Any) -> None:
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
            seq.emit("response.content_part.added", **ids, part={"type": "output_text", "text": "", "annotations": []})
            for delta in chunks(part["text"]):
                seq.emit("response.output_text.delta", **ids, delta=delta, logprobs=[])
            seq.emit("response.output_text.done", **ids, text=part["text"], logprobs=[])
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
    else:  # an item with no deltas (a compaction): added and done carry it whole
        seq.emit("response.output_item.added", output_index=index, item=item)
    seq.emit("response.output_item.done", output_index=index, item=item)


def stream_frames(final: dict[str, Any]) -> list[bytes]:
    """The SSE frames for a finished response: created, in_progress, each item, then the terminal event."""
    seq = _Seq()
    start = {
        **final,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "completed_at": None,
        "incomplete_details": None,
    }
    seq.emit("response.created", response=start)
    seq.emit("response.in_progress", response=start)
    for index, item in enumerate(final["output"]):
        _stream_item(seq, index, item)
    terminal = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    seq.emit(terminal, response=final)
    return seq.frames
