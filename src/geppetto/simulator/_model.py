"""The deterministic scripted model shared by every simulated API.

Each API translates its request into neutral messages (`Msg`) and offered tools (`ToolSpec`); `decide`
returns the `Reply` to send: the next queued reply, else a tool call when the user's text asks for a
tool, else an answer using fresh tool results, else a deterministic echo.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """A tool call the simulated model makes: `name`, JSON `args`, and an optional fixed `call_id`."""

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class BuiltinCall:
    """A call of one of the service's own tools, run by the service within the answer, with its result.

    `kind` is "web_search", "code_execution", "file_search" or "web_fetch"; `query` is what was searched,
    the code run or the URL fetched; `output` the scripted result (search results as `title`/`url`/`text`
    dicts, or the program's printed output). Each API renders it in its own item, block or part kinds.
    """

    kind: str
    query: str
    output: str | list[dict[str, str]] = ""


@dataclass(frozen=True)
class Reply:
    """What the simulated model answers next: text, tool calls and/or reasoning text.

    `reasoning` makes every API emit its reasoning form (a reasoning item, a thinking block, a thought
    part) even for a non-reasoning model. `stop` overrides the stop reason ("max_tokens" makes the
    response incomplete / truncated in each API's terms; "pause_turn" is Claude's pause in a long server-tool
    turn, which the client continues by sending the answer back as the last assistant message). `builtin` are calls of the service's own tools
    (web search, code execution...) made before the text, shown as the API shows them.
    """

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    stop: str | None = None
    builtin: list[BuiltinCall] = field(default_factory=list)


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered in a request, normalized across APIs."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Msg:
    """One neutral context entry: role is user, assistant, system, call, result or file (an attachment of
    the user message before it, its text a description such as ``a.pdf (application/pdf, 13 bytes)``)."""

    role: str
    text: str = ""
    name: str = ""
    call_id: str = ""


REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "from",
        "by",
        "is",
        "are",
        "be",
        "this",
        "that",
        "what",
        "which",
        "who",
        "how",
        "when",
        "where",
        "get",
        "set",
        "list",
        "fetch",
        "find",
        "run",
        "do",
        "make",
        "use",
        "call",
        "tool",
        "function",
        "return",
        "returns",
        "given",
        "some",
        "any",
        "please",
        "can",
        "you",
        "me",
        "my",
        "your",
        "it",
        "its",
        "into",
        "about",
    ]
)
_WORD = re.compile(r"[a-z0-9]+")
_LOCATION_HINTS = ("city", "location", "place", "country", "where", "town", "region")


def is_reasoning_model(model: str) -> bool:
    """True for model names that reason: containing "reason" or starting with o1/o3/o4/gpt-5."""
    name = model.lower().rsplit("/", 1)[-1]
    return "reason" in name or name.startswith(REASONING_PREFIXES)


def _keywords(tool: ToolSpec) -> set[str]:
    words = set(_WORD.findall(tool.name.lower().replace("_", " "))) | set(_WORD.findall(tool.description.lower()))
    return {w for w in words if w not in _STOP and len(w) >= 3}


def pick_tool(tools: list[ToolSpec], text: str, choice: str = "auto") -> ToolSpec | None:
    """The tool `text` asks for (its name, or words of its name or description), honouring `choice`.

    `choice` is "auto", "none", "required", or a tool name that is forced.
    """
    if not tools or choice == "none":
        return None
    for tool in tools:
        if choice == tool.name:
            return tool
    lowered = text.lower()
    words = set(_WORD.findall(lowered))
    best: tuple[int, ToolSpec] | None = None
    for tool in tools:
        score = 100 if tool.name.lower() in lowered else len(_keywords(tool) & words)
        if score and (best is None or score > best[0]):
            best = (score, tool)
    if best is not None:
        return best[1]
    return tools[0] if choice == "required" else None


_PROSE = ("summary", "answer", "text", "description", "content", "result", "explanation", "reason")


def _string_for(name: str, schema: dict[str, Any], text: str, prose: bool = False) -> str:
    if prose and name.lower() in _PROSE:
        return text.strip()[:400] or name
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        for option in enum:
            if str(option).lower() in text.lower():
                return str(option)
        return str(enum[0])
    quoted = re.search(r"[\"“']([^\"”']+)[\"”']", text)
    if quoted:
        return quoted.group(1)
    if any(h in name.lower() for h in _LOCATION_HINTS):
        place = re.search(r"\b(?:in|for|at|of)\s+([A-Z][\w-]*(?:\s+[A-Z][\w-]*)*)", text)
        if place:
            return place.group(1)
    capital = re.findall(r"(?<!^)(?<![.!?]\s)\b([A-Z][a-z][\w-]*)", text)
    if capital:
        return str(capital[-1])
    return text.strip()[:80] or name


_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "12:00:00",
    "duration": "P1D",
    "email": "someone@example.com",
    "hostname": "example.com",
    "uri": "https://example.com/",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_MAX_DEPTH = 4


def _resolve(root: dict[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and str(schema.get("type", "")).lower() == "null"


def fill_value(
    schema: Any, text: str, name: str = "value", *, root: Any = None, depth: int = 0, prose: bool = False
) -> Any:
    """A deterministic JSON value matching `schema`, drawing strings and numbers from `text`.

    Follows local `$ref`s, picks the first non-null branch of `anyOf`/`oneOf` (null, an empty list or
    no optional property once nested deeper than a few levels, so recursive schemas end), and honours
    `const`, `enum`, string formats and numeric bounds. Both JSON-schema and Gemini's upper-case types.
    """
    if not isinstance(schema, dict):
        return text
    root = schema if root is None else root
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return fill_value(_resolve(root, ref), text, name, root=root, depth=depth + 1, prose=prose)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not all(isinstance(e, str) for e in enum):
        return enum[0]
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and branches:
        real = [b for b in branches if not _is_null(b)]
        if not real or (depth >= _MAX_DEPTH and len(real) < len(branches)):
            return None
        return fill_value(real[0], text, name, root=root, depth=depth + 1, prose=prose)
    if depth >= _MAX_DEPTH and schema.get("nullable"):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        if depth >= _MAX_DEPTH and "null" in kind:
            return None
        kind = next((k for k in kind if k != "null"), "string")
    kind = str(kind).lower() if kind else ("object" if "properties" in schema else "string")
    if kind == "object":
        raw_props = schema.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        required = schema.get("required")
        names = list(props) if not isinstance(required, list) or not required else [n for n in props if n in required]
        return {n: fill_value(props[n], text, n, root=root, depth=depth + 1, prose=prose) for n in names}
    if kind == "array":
        least = schema.get("minItems")
        count = int(least) if isinstance(least, int) and least > 0 else (0 if depth >= _MAX_DEPTH else 1)
        return [
            fill_value(schema.get("items") or {}, text, name, root=root, depth=depth + 1, prose=prose)
            for _ in range(count)
        ]
    if kind in ("integer", "number"):
        return _number_for(schema, text, integer=kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    return _string_for(name, schema, text, prose)


def _number_for(schema: dict[str, Any], text: str, *, integer: bool) -> int | float:
    """The first number in ``text`` (else 1), within the schema's ``minimum`` and ``maximum``."""
    found = re.search(r"-?\d+(?:\.\d+)?", text)
    number = float(found.group(0)) if found else 1.0
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(low, int | float) and number < low:
        number = float(low)
    if isinstance(high, int | float) and number > high:
        number = float(high)
    return int(number) if integer else number


def _answer_from_results(msgs: list[Msg]) -> str:
    names = {m.call_id: m.name for m in msgs if m.role == "call"}
    parts = [f"{names.get(m.call_id, 'tool')}: {m.text}" for m in msgs if m.role == "result"]
    return "Here is what the tools returned. " + "; ".join(parts) + "."


def _question(msgs: list[Msg]) -> str:
    """The user text a structured answer draws from: the latest user message that is not a correction
    about the JSON schema (after one, the scripted model answers the question before it again)."""
    users = [m.text for m in msgs if m.role == "user"]
    for text in reversed(users):
        if "JSON schema" not in text:
            return text
    return users[-1] if users else ""


def decide(msgs: list[Msg], tools: list[ToolSpec], choice: str = "auto", schema: dict[str, Any] | None = None) -> Reply:
    """The unscripted reply to a context (the queue is consulted by the caller first)."""
    last_user = max((i for i, m in enumerate(msgs) if m.role == "user"), default=-1)
    trailing = msgs[last_user + 1 :]
    if trailing and trailing[-1].role == "result":
        # Answer from the latest run of calls and results (after any assistant text in between).
        start = max((i + 1 for i, m in enumerate(trailing) if m.role not in ("call", "result")), default=0)
        answer = _answer_from_results(trailing[start:])
        if choice not in ("auto", "none"):  # a forced choice: the answer is a call (the last tool offered)
            forced = next((t for t in tools if t.name == choice), tools[-1] if tools else None)
            if forced is not None:
                return Reply(
                    tool_calls=[ToolCall(forced.name, fill_value(forced.parameters or {}, answer, prose=True))]
                )
        if schema is not None:
            return Reply(text=json.dumps(fill_value(schema, answer, prose=True), separators=(",", ":")))
        return Reply(text=answer)
    user_text = msgs[last_user].text if last_user >= 0 else ""
    if not any(m.role == "call" for m in trailing):
        tool = pick_tool(tools, user_text, choice)
        if tool is not None:
            return Reply(tool_calls=[ToolCall(tool.name, fill_value(tool.parameters or {"type": "object"}, user_text))])
    if schema is not None:
        return Reply(text=json.dumps(fill_value(schema, _question(msgs), prose=True), separators=(",", ":")))
    answer = f"You said: {user_text}" if user_text else "Hello from the geppetto simulator."
    files = _attached(msgs, last_user)
    return Reply(text=f"{answer} Attached: {'; '.join(files)}." if files else answer)


def _attached(msgs: list[Msg], last_user: int) -> list[str]:
    """Descriptions of the files that came with the latest user message (before or after its text)."""
    if last_user < 0:
        return [m.text for m in msgs if m.role == "file"]
    start, end = last_user, last_user + 1
    while start > 0 and msgs[start - 1].role in ("user", "file"):
        start -= 1
    while end < len(msgs) and msgs[end].role == "file":
        end += 1
    return [m.text for m in msgs[start:end] if m.role == "file"]


def reasoning_summary(msgs: list[Msg], reply: Reply) -> str:
    """A short Markdown summary of how the scripted model reached ``reply``, as a reasoning model's summary
    reads: a bold heading, then a sentence on the plan."""
    users = [m.text for m in msgs if m.role == "user"]
    asked = " ".join((users[-1] if users else "").split())
    asked = asked if len(asked) <= 60 else asked[:59] + "…"
    if reply.tool_calls:
        names = ", ".join(f"`{call.name}`" for call in reply.tool_calls)
        plan = f"The answer needs data I do not have, so I will call {names} first."
    elif msgs and msgs[-1].role == "result":
        plan = "The tools have answered; I will put their results into a reply."
    else:
        plan = "No tool is needed; I will answer directly."
    return f"**Considering the request**\n\nThe user wrote “{asked}”. {plan}"
