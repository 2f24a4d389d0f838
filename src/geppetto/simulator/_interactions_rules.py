"""What the Interactions API refuses in a create request: unknown fields, wrong JSON types, input that is
neither contents nor steps, thought signatures that are not the service's, function results without their
call. Every refusal is a 400 in the Interactions API's envelope; texts the documentation does not give are
the simulator's (marked ``unverified``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ._errors import SimError
from ._gemini_rules import PLACEHOLDER_SIGNATURES
from ._interactions_files import check_media_content
from ._interactions_steps import context_digest
from ._state import SimState

__all__ = ["check_request", "check_results", "check_signatures", "input_steps", "invalid", "stale_signatures"]

_NUMBER = (int, float)
_TOP: dict[str, Any] = {
    "model": str,
    "agent": str,
    "agent_config": dict,
    "background": bool,
    "cached_content": str,
    "continuation_token": str,
    "environment": (str, dict),
    "generation_config": dict,
    "input": (str, dict, list),
    "labels": dict,
    "previous_interaction_id": str,
    "response_format": (dict, list),
    "response_mime_type": str,
    "response_modalities": list,
    "safety_settings": list,
    "service_tier": str,
    "store": bool,
    "stream": bool,
    "system_instruction": str,
    "tools": list,
    "webhook_config": dict,
}
_GENERATION: dict[str, Any] = {
    "tool_choice": (str, dict),
    "thinking_level": str,
    "thinking_summaries": str,
    "max_output_tokens": int,
    "seed": int,
    "stop_sequences": list,
    "temperature": _NUMBER,
    "top_p": _NUMBER,
}
_FUNCTION: dict[str, Any] = {"type": str, "name": str, "description": str, "parameters": dict}
_FORMAT: dict[str, Any] = {"type": str, "mime_type": str, "schema": dict}
_STEPS: dict[str, dict[str, Any]] = {
    "user_input": {"content": list},
    "model_output": {"content": list},
    "function_call": {"id": str, "name": str, "arguments": dict},
    "function_result": {"call_id": str, "name": str, "is_error": bool, "result": (str, list, dict)},
    "thought": {"signature": str, "summary": list},
}
_REQUIRED = {"function_call": ("id", "name", "arguments"), "function_result": ("call_id", "result")}
_CONTENT_TYPES = frozenset({"text", "image", "audio", "document", "video"})


def invalid(message: str, code: str = "invalid_request") -> SimError:
    """A 400 in the Interactions API's terms."""
    return SimError(400, message, code=code)


def _name(kinds: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", dict: "an object"}
    names[list] = "a list"
    return " or ".join(names[k] for k in (kinds if isinstance(kinds, tuple) else (kinds,)))


def _typed(obj: dict[str, Any], spec: dict[str, Any], where: str) -> None:
    """Each field of ``obj`` that ``spec`` names has one of its JSON types (a boolean is no number)."""
    for key, kinds in spec.items():
        value = obj.get(key)
        if key not in obj or value is None:
            continue
        wanted = kinds if isinstance(kinds, tuple) else (kinds,)
        if (isinstance(value, bool) and bool not in wanted) or not isinstance(value, wanted):
            raise invalid(f"Invalid value at '{where}{key}': expected {_name(kinds)}.")  # unverified text


def _objects(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise invalid(f"Invalid value at '{where}': expected a list of objects.")  # unverified text
    return value


def check_request(body: dict[str, Any]) -> None:
    """The service's checks of a create request's fields and their JSON types; raises its 400."""
    unknown = sorted(set(body) - set(_TOP))
    if unknown:
        raise invalid(f"Unknown parameter: '{unknown[0]}'.", "parameter_unknown")  # unverified text
    if "agent" in body:
        raise invalid("The simulator serves model interactions only: give 'model' instead of 'agent'.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise invalid("'model' is required: name the model to interact with.")  # unverified text
    if body.get("input") is None:
        raise invalid("'input' is required.")  # unverified text
    _typed(body, _TOP, "")
    config = body.get("generation_config") or {}
    _typed(config, _GENERATION, "generation_config.")
    choice = config.get("tool_choice")
    if isinstance(choice, dict):
        allowed = choice.get("allowed_tools")
        if not isinstance(allowed, dict) or not isinstance(allowed.get("tools", []), list):
            raise invalid("Invalid value at 'generation_config.tool_choice.allowed_tools': expected an object.")
        _typed(allowed, {"mode": str}, "generation_config.tool_choice.allowed_tools.")
    for index, tool in enumerate(_objects(body.get("tools") or [], "tools")):
        _typed(tool, _FUNCTION if tool.get("type") == "function" else {"type": str}, f"tools[{index}].")
    formats = body.get("response_format")
    if isinstance(formats, list):
        for index, fmt in enumerate(_objects(formats, "response_format")):
            _typed(fmt, _FORMAT, f"response_format[{index}].")
    elif isinstance(formats, dict) and formats.get("type") == "text":
        _typed(formats, _FORMAT, "response_format.")


def input_steps(value: Any) -> list[dict[str, Any]]:
    """The request's ``input`` as steps: a string or content(s) become one ``user_input`` step; a list of
    steps is kept as given (after its checks)."""
    if isinstance(value, str):
        return [{"type": "user_input", "content": [{"type": "text", "text": value}]}]
    if isinstance(value, dict):
        value = [value]
    if not value or not all(isinstance(item, dict) for item in value):
        raise invalid("'input' must be a string, a content, or a non-empty list of contents or of steps.")
    kinds = [item.get("type") if isinstance(item.get("type"), str) else None for item in value]
    if all(kind in _STEPS for kind in kinds):
        for index, step in enumerate(value):
            _check_step(step, f"input[{index}]")
        return copy.deepcopy(value)
    if all(kind in _CONTENT_TYPES for kind in kinds):
        _check_contents(value, "input")
        return [{"type": "user_input", "content": copy.deepcopy(value)}]
    bad = next(i for i, kind in enumerate(kinds) if kind not in _STEPS and kind not in _CONTENT_TYPES)
    raise invalid(  # unverified text
        f"input[{bad}]: unknown type {kinds[bad]!r}; give steps ({', '.join(sorted(_STEPS))}) or contents "
        f"({', '.join(sorted(_CONTENT_TYPES))}), not a mix."
    )


def _check_step(step: dict[str, Any], where: str) -> None:
    kind = step["type"]
    for name in _REQUIRED.get(kind, ()):
        if step.get(name) is None:
            raise invalid(f"{where}: a {kind} step needs '{name}'.")  # unverified text
    _typed(step, _STEPS[kind], where + ".")
    for name in ("content", "summary"):
        if step.get(name) is not None:
            _check_contents(step[name], f"{where}.{name}")
    if kind == "function_result" and isinstance(step["result"], list):
        _objects(step["result"], where + ".result")


def _check_contents(contents: list[Any], where: str) -> None:
    for index, content in enumerate(_objects(contents, where)):
        kind = content.get("type")
        if not isinstance(kind, str) or kind not in _CONTENT_TYPES:
            raise invalid(f"{where}[{index}]: unknown content type {kind!r}.")  # unverified text
        _typed(content, {"text": str, "data": str, "uri": str, "mime_type": str}, f"{where}[{index}].")
        check_media_content(content, f"{where}[{index}]")


def check_signatures(state: SimState, steps: list[dict[str, Any]], reasoning: bool) -> None:
    """Thought signatures sent back must be the simulator's (or a documented placeholder); when the model
    thinks, each model run of the current turn that calls a function must carry its signed thought."""
    for step in steps:
        signature = step.get("signature") if step.get("type") == "thought" else None
        known = signature is None or signature in PLACEHOLDER_SIGNATURES
        if not known and state.unseal("gemini", str(signature)) is None:
            raise invalid("Corrupted thought signature.")  # generateContent's text; unverified here
    if not reasoning:
        return
    last_user = max((i for i, s in enumerate(steps) if s.get("type") == "user_input"), default=-1)
    signed = False
    for step in steps[last_user + 1 :]:
        kind = step.get("type")
        if kind == "function_result":
            signed = False  # the next model run starts
        elif kind == "thought" and step.get("signature"):
            signed = True
        elif kind == "function_call" and not signed:
            raise invalid(  # unverified text, after generateContent's
                f"Function call `{step.get('name')}` is missing its thought signature: send back the thought "
                "step (with its signature) that preceded it. See https://ai.google.dev/gemini-api/docs/thought-signatures."
            )


def stale_signatures(state: SimState, history: list[dict[str, Any]], own: list[dict[str, Any]]) -> list[int]:
    """The indexes in ``own`` of thoughts whose signature was made after other steps than now precede them.

    Google documents no binding of a signature to the steps before it (only that it goes back exactly as
    received, and that a current-turn call needs one), so the request is not refused; the request log's
    ``effects["stale_signatures"]`` shows them, for tests to see what a binding service would refuse."""
    stale: list[int] = []
    for index, step in enumerate(own):
        signature = step.get("signature") if step.get("type") == "thought" else None
        payload = state.unseal("gemini", str(signature)) if signature else None
        try:
            after = json.loads(str(payload["t"])).get("after") if payload else None
        except (ValueError, AttributeError):
            after = None  # a generateContent signature: it records no steps
        if isinstance(after, str) and after != context_digest(history + own[:index]):
            stale.append(index)
    return stale


def check_results(context: list[dict[str, Any]]) -> None:
    """Each function result must answer a function call earlier in the context (held or sent)."""
    calls: set[str] = set()
    for step in context:
        if step.get("type") == "function_call":
            calls.add(str(step.get("id")))
        elif step.get("type") == "function_result" and str(step.get("call_id")) not in calls:
            raise invalid(  # unverified text
                f"No function call found for the function_result with call_id '{step.get('call_id')}': send it "
                "after its function_call, or continue the interaction that made the call."
            )
