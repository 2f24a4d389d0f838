"""Gemini `generateContent` and `streamGenerateContent` (SSE with `alt=sse`), with thought signatures."""

from __future__ import annotations

import copy
import json
import secrets
import string
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._attachments import check_gemini_files, gemini_files
from ._builtin import decide_builtin, gemini_grounding, gemini_parts, offered
from ._call import Call
from ._errors import SimError
from ._faults import SSEStream, sse
from ._gemini_rules import check_contents, check_shape
from ._model import Msg, Reply, ToolSpec, decide, is_reasoning_model
from ._openai_out import chunks
from ._output_rules import check_gemini_output
from ._prompt_cache import Segment, cache_use
from ._state import SimState, new_id
from ._tokens import count_items, count_text, count_value


def reasoning_on(model: str, body: dict[str, Any]) -> bool:
    """Thinking models (by name, Gemini 3, or a thinkingConfig that does not disable thinking) sign their calls."""
    config = (body.get("generationConfig") or {}).get("thinkingConfig")
    if isinstance(config, dict) and config.get("thinkingBudget") != 0:
        return True
    return is_reasoning_model(model) or model.startswith("gemini-3")


def thinks(model: str, body: dict[str, Any]) -> bool:
    """Whether the model thinks (and counts `thoughtsTokenCount`): as `reasoning_on`, and Gemini 2.5 models
    other than Flash-Lite by default (they think without signing their calls), unless the budget is 0."""
    config = (body.get("generationConfig") or {}).get("thinkingConfig")
    if isinstance(config, dict) and config.get("thinkingBudget") == 0:
        return False
    return reasoning_on(model, body) or (model.startswith("gemini-2.5") and "lite" not in model)


def to_msgs(body: dict[str, Any], contents: list[dict[str, Any]]) -> list[Msg]:
    """The neutral model view of a Gemini request (function ids fall back to names)."""
    system = body.get("systemInstruction") or {}
    text = "".join(str(p.get("text") or "") for p in system.get("parts") or [] if isinstance(p, dict))
    msgs = [Msg("system", text)] if text else []
    for content in contents:
        role = "assistant" if content.get("role") == "model" else "user"
        for part in content["parts"]:
            if not isinstance(part, dict) or part.get("thought"):
                continue
            if part.get("text") is not None:
                msgs.append(Msg(role, str(part["text"])))
            elif part.get("functionCall") is not None:
                fc = part["functionCall"]
                msgs.append(
                    Msg("call", json.dumps(fc.get("args")), str(fc.get("name")), str(fc.get("id") or fc.get("name")))
                )
            elif part.get("functionResponse") is not None:
                fr = part["functionResponse"]
                response = fr.get("response")
                output = response.get("output", response) if isinstance(response, dict) else response
                text_out = output if isinstance(output, str) else json.dumps(output)
                msgs.append(Msg("result", text_out, call_id=str(fr.get("id") or fr.get("name"))))
            elif role == "user":
                msgs.extend(gemini_files(part))
    return msgs


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    specs = []
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or [] if isinstance(tool, dict) else []:
            params = decl.get("parametersJsonSchema") or decl.get("parameters")
            schema = dict(params) if isinstance(params, dict) else {}
            specs.append(ToolSpec(str(decl.get("name")), str(decl.get("description") or ""), schema))
    return specs


def _choice(body: dict[str, Any]) -> str:
    config = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    mode = str(config.get("mode", "AUTO")).upper()
    allowed = config.get("allowedFunctionNames") or []
    if mode == "ANY":
        return str(allowed[0]) if len(allowed) == 1 else "required"
    return "none" if mode == "NONE" else "auto"


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if isinstance(schema, dict):
        return schema
    return (
        {"type": "object", "properties": {"answer": {"type": "string"}}}
        if config.get("responseMimeType") == "application/json"
        else None
    )


DEFAULT_THOUGHT = "Thinking about the request."


def _call_id() -> str:
    """A Gemini 3 function call id: eight lowercase letters and digits, like the service's."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def _parts(state: SimState, reply: Reply, reasoning: bool, body: dict[str, Any], model: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    if reply.reasoning is not None or (reasoning and thinking.get("includeThoughts")):
        parts.append({"text": reply.reasoning or DEFAULT_THOUGHT, "thought": True})
    invocations = (body.get("toolConfig") or {}).get("includeServerSideToolInvocations") is True
    parts += gemini_parts(reply.builtin, _call_id if invocations else None)
    if reply.text is not None:
        parts.append({"text": reply.text})
    for call in reply.tool_calls:
        fc: dict[str, Any] = {
            "name": call.name,
            "args": call.args if isinstance(call.args, dict) else {"input": call.args},
        }
        if call.call_id or model.startswith("gemini-3"):
            fc["id"] = call.call_id or _call_id()  # Gemini 3 ids every call; earlier models never do
        parts.append({"functionCall": fc})
    if reasoning:
        signed = next((p for p in parts if "functionCall" in p), parts[-1] if parts else None)
        # The service signs each of its own tool's call and response parts too.
        hosted = [p for p in parts if "toolCall" in p or "toolResponse" in p]
        for part in hosted + ([signed] if signed is not None and signed not in hosted else []):
            part["thoughtSignature"] = state.seal("gemini", "signature", json.dumps(part, sort_keys=True))
    return parts


def _segments(body: dict[str, Any], contents: list[Any]) -> list[Segment]:
    """The prompt as implicit-cache segments: tools and system instruction, then each content."""
    system = body.get("systemInstruction")
    head = [Segment([body.get("tools"), system], count_value(system) if system else 0)]
    return head + [Segment(c, count_items([c])) for c in contents]


def _count_tokens(call: Call) -> ASGIApp:
    """POST models/{model}:countTokens, given ``contents`` or a whole ``generateContentRequest``."""
    body = call.obj()
    request = body.get("generateContentRequest")
    if isinstance(request, dict):
        body = request
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise SimError(400, "Invalid JSON payload: give contents or generateContentRequest.contents")
    system = body.get("systemInstruction")
    return JSONResponse({"totalTokens": count_items(contents) + (count_value(system) if system else 0)})


async def generate(call: Call) -> ASGIApp:
    """POST /v1beta/models/{model}:generateContent and :streamGenerateContent."""
    target = call.request.path_params["target"]
    model, _, method = target.rpartition(":")
    if method == "countTokens" and model:
        return _count_tokens(call)
    if method not in ("generateContent", "streamGenerateContent") or not model:
        raise SimError(404, f"Method not found: {target}. Use {{model}}:generateContent or :streamGenerateContent.")
    body = call.obj()
    state = call.state
    body = check_shape(body)
    reasoning = reasoning_on(model, body)
    contents = check_contents(state, body, reasoning)
    check_gemini_files(contents)
    check_gemini_output(body, model)
    msgs = to_msgs(body, contents)
    reply = (
        state.next_reply()
        or decide_builtin(msgs, offered("gemini", body))
        or decide(msgs, _tools(body), _choice(body), _schema(body))
    )
    parts = _parts(state, reply, reasoning, body, model.removeprefix("models/"))
    response_id = new_id("")[:22]
    with state.lock:
        state.contexts[response_id] = copy.deepcopy(contents)
    system = body.get("systemInstruction")
    prompt = count_items(contents) + (count_value(system) if system else 0)
    shown = sum(count_text(p["text"]) for p in parts if p.get("thought"))
    # A thinking model thinks whether or not it shows its thoughts, and counts them either way.
    thoughts = shown or (count_text(reply.reasoning or DEFAULT_THOUGHT) if thinks(model, body) else 0)
    visible = sum(count_value(p) for p in parts if not p.get("thought"))
    cached = cache_use(state, model, _segments(body, contents), implicit=True)
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        "candidatesTokenCount": visible,
        "totalTokenCount": prompt + visible + thoughts,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    if cached.read:
        usage["cachedContentTokenCount"] = cached.read
    finish = "MAX_TOKENS" if reply.stop == "max_tokens" else "STOP"
    found = gemini_grounding(reply.builtin, reply.text or "")
    grounding = {"groundingMetadata": found} if found else {}
    head = {"modelVersion": model.removeprefix("models/"), "responseId": response_id}
    if method == "generateContent":
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0, **grounding}
        return JSONResponse({"candidates": [candidate], "usageMetadata": usage, **head})
    pieces = _stream_pieces(parts)
    responses = []
    for index, piece in enumerate(pieces):
        chunk: dict[str, Any] = {"content": {"role": "model", "parts": piece}, "index": 0}
        last = index == len(pieces) - 1
        if last:
            chunk.update(finishReason=finish, **grounding)
        responses.append({"candidates": [chunk], **({"usageMetadata": usage} if last else {}), **head})
    if call.request.query_params.get("alt") != "sse":
        return JSONResponse(responses)
    return SSEStream([sse(None, r) for r in responses], call.fault, lambda: state.closing, api="gemini")


def _stream_pieces(parts: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    pieces: list[list[dict[str, Any]]] = []
    for part in parts:
        if "text" in part and "thoughtSignature" not in part:
            pieces += [[{**part, "text": t}] for t in chunks(part["text"])] or [[part]]
        else:
            pieces.append([part])
    return pieces or [[{"text": ""}]]
