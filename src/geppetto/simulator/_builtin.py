"""The services' own tools (web search, code execution, file search, web fetch) with scripted results.

A request that offers one of them (Responses `web_search`/`code_interpreter`/`file_search`, Claude
`web_search_*`/`code_execution_*`/`web_fetch_*`, Gemini `googleSearch`/`codeExecution`/`urlContext`) and
whose latest user text asks for it gets an answer in which the service ran the tool: the call, its
deterministic result and a text answer drawing on it, in the API's own kinds. A queued `Reply(builtin=...)`
scripts the same explicitly. Nothing leaves the machine: search results point at example.com.
"""

from __future__ import annotations

import ast
import html
import math
import operator
import re
from typing import Any
from urllib.parse import quote_plus

from ._model import BuiltinCall, Msg, Reply

_TRIGGERS = {
    "web_search": ("search", "latest", "news", "look up", "today", "current", "web"),
    "code_execution": ("calculate", "compute", "run ", "python", "code", "execute"),
    "file_search": ("file", "document", "knowledge base", "our docs"),
    "web_fetch": ("http://", "https://", "fetch", "read the page"),
}
_ORDER = ("web_fetch", "code_execution", "file_search", "web_search")
_URL = re.compile(r"https?://[^\s\"'<>)]+")
_EXPRESSION = re.compile(r"[-(\d][-+*/().\d\s]*[\d)]")
_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def offered(api: str, body: dict[str, Any]) -> set[str]:
    """The built-in tool kinds a request enables."""
    kinds: set[str] = set()
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "gemini":
            names = {"googleSearch": "web_search", "codeExecution": "code_execution", "urlContext": "web_fetch"}
            kinds |= {kind for key, kind in names.items() if key in tool}
            continue
        kind = str(tool.get("type") or "")
        if kind.startswith("web_search"):
            kinds.add("web_search")
        elif kind.startswith(("code_interpreter", "code_execution")):
            kinds.add("code_execution")
        elif kind.startswith("file_search"):
            kinds.add("file_search")
        elif kind.startswith("web_fetch"):
            kinds.add("web_fetch")
    return kinds


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.operand)))
    raise ValueError("not arithmetic")


def _arithmetic(text: str) -> tuple[str, str] | None:
    """(expression, value) for the first arithmetic expression in `text`."""
    for found in _EXPRESSION.finditer(text):
        expression = found.group(0).strip()
        if not re.search(r"\d\s*[-+*/]", expression):
            continue  # a lone number, not a calculation
        try:
            value = _evaluate(ast.parse(expression, mode="eval"))
            if not math.isfinite(value):
                raise OverflowError(expression)
            return expression, str(int(value)) if float(value).is_integer() else str(value)
        except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
            continue  # not arithmetic after all, or beyond a float: try the next candidate
    return None


def scripted(kind: str, text: str) -> BuiltinCall:
    """The deterministic call of `kind` the user's `text` asks for, with its result."""
    question = " ".join(text.split())[:200]
    if kind == "code_execution":
        found = _arithmetic(text)
        expression, value = found if found else ("len(" + repr(question[:40]) + ")", str(len(question[:40])))
        return BuiltinCall(kind, f"print({expression})", value + "\n")
    if kind == "web_fetch":
        url = _URL.search(text)
        target = url.group(0) if url else "https://example.com/"
        return BuiltinCall(kind, target, f"Example Domain. This page at {target} is served by the geppetto simulator.")
    if kind == "file_search":
        hit = {"title": "notes.txt", "url": "file-sim0000000000000000000001", "text": f"Notes about: {question}"}
        return BuiltinCall(kind, question, [hit])
    results = [
        {
            "title": f"{question[:60]} - Example result {n}",
            "url": f"https://example.com/search/{n}?q={quote_plus(question[:60])}",
            "text": f"Example result {n} about {question[:80]}.",
        }
        for n in (1, 2)
    ]
    return BuiltinCall("web_search", question, results)


def answer_text(call: BuiltinCall) -> str:
    """The model's text after a built-in call: what the tool found."""
    if isinstance(call.output, list):
        first = call.output[0] if call.output else {"title": "nothing", "text": ""}
        return f"According to {first['title']}: {first['text']}"
    if call.kind == "code_execution":
        return f"The code printed {call.output.strip()}."
    return f"The page says: {call.output}"


def forced(body: dict[str, Any]) -> str | None:
    """The built-in tool kind a Responses `tool_choice` forces (`{"type": "file_search"}`, ...), if any."""
    choice = body.get("tool_choice")
    kind = str(choice.get("type") or "") if isinstance(choice, dict) else ""
    if kind.startswith("web_search"):
        return "web_search"
    if kind == "code_interpreter":
        return "code_execution"
    return "file_search" if kind == "file_search" else None


def decide_builtin(msgs: list[Msg], kinds: set[str], force: str | None = None) -> Reply | None:
    """A reply running a built-in tool when the latest user text (a fresh turn) asks for an enabled one, or
    when `force` (the kind a `tool_choice` names) is enabled, whatever the text."""
    if not kinds or not msgs or msgs[-1].role != "user":
        return None
    lowered = msgs[-1].text.lower()
    first = (force,) if force in kinds else ()
    for kind in first + _ORDER:
        if kind in kinds and (kind == force or any(word in lowered for word in _TRIGGERS[kind])):
            call = scripted(kind, msgs[-1].text)
            return Reply(text=answer_text(call), builtin=[call])
    return None


def results(call: BuiltinCall) -> list[dict[str, str]]:
    """A search call's results (empty for code and fetches)."""
    return list(call.output) if isinstance(call.output, list) else []


def anthropic_blocks(calls: list[BuiltinCall], new_id: Any) -> list[dict[str, Any]]:
    """Claude's `server_tool_use` and result blocks for the calls (`new_id` makes provider ids)."""
    blocks: list[dict[str, Any]] = []
    for call in calls:
        use_id = new_id("srvtoolu_")
        if call.kind == "code_execution":
            command = f"python3 -c {call.query!r}"
            result = {"type": "bash_code_execution_result", "stdout": call.output, "stderr": "", "return_code": 0}
            blocks += [
                {"type": "server_tool_use", "id": use_id, "name": "bash_code_execution", "input": {"command": command}},
                {
                    "type": "bash_code_execution_tool_result",
                    "tool_use_id": use_id,
                    "content": {**result, "content": []},
                },
            ]
        elif call.kind == "web_fetch":
            document = {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": call.output},
                "title": None,
            }
            fetched = {"type": "web_fetch_result", "url": call.query, "retrieved_at": None, "content": document}
            blocks += [
                {"type": "server_tool_use", "id": use_id, "name": "web_fetch", "input": {"url": call.query}},
                {"type": "web_fetch_tool_result", "tool_use_id": use_id, "content": fetched},
            ]
        else:
            found = [
                {
                    "type": "web_search_result",
                    "title": r["title"],
                    "url": r["url"],
                    "encrypted_content": "",
                    "page_age": None,
                }
                for r in results(call)
            ]
            blocks += [
                {"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {"query": call.query}},
                {"type": "web_search_tool_result", "tool_use_id": use_id, "content": found},
            ]
    return blocks


def anthropic_citations(calls: list[BuiltinCall]) -> list[dict[str, Any]]:
    """Citations of the search results on Claude's text."""
    return [
        {
            "type": "web_search_result_location",
            "cited_text": r["text"],
            "url": r["url"],
            "title": r["title"],
            "encrypted_index": "",
        }
        for call in calls
        if call.kind == "web_search"
        for r in results(call)
    ]


def anthropic_server_usage(calls: list[BuiltinCall]) -> dict[str, int]:
    """Claude's `usage.server_tool_use` counts."""
    return {
        "web_search_requests": sum(c.kind == "web_search" for c in calls),
        "web_fetch_requests": sum(c.kind == "web_fetch" for c in calls),
    }


_GEMINI_TOOL_TYPES = {"web_search": ("GOOGLE_SEARCH_WEB", "queries"), "web_fetch": ("URL_CONTEXT", "urls")}


def gemini_parts(calls: list[BuiltinCall], new_call_id: Any = None) -> list[dict[str, Any]]:
    """Gemini's `executableCode`/`codeExecutionResult` parts for code runs. Searches and fetches show as
    grounding, and also as `toolCall`/`toolResponse` parts when the request asks for server-side tool
    invocations (`new_call_id` then makes their ids)."""
    parts: list[dict[str, Any]] = []
    for call in calls:
        if call.kind == "code_execution":
            parts.append({"executableCode": {"language": "PYTHON", "code": call.query}})
            parts.append({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": call.output}})
        elif new_call_id is not None and call.kind in _GEMINI_TOOL_TYPES:
            tool_type, arg = _GEMINI_TOOL_TYPES[call.kind]
            ids = {"id": new_call_id(), "toolType": tool_type}
            found = results(call) or [{"url": call.query, "text": str(call.output)}]
            response = {"results": [{"uri": r["url"], "text": r["text"]} for r in found]}
            parts.append({"toolCall": {**ids, "args": {arg: [call.query]}}})
            parts.append({"toolResponse": {**ids, "response": response}})
    return parts


def gemini_grounding(calls: list[BuiltinCall], text: str) -> dict[str, Any] | None:
    """The candidate's `groundingMetadata` for searches and fetched pages, or None."""
    searches = [c for c in calls if c.kind == "web_search"]
    fetches = [c for c in calls if c.kind == "web_fetch"]
    chunks = [{"web": {"uri": r["url"], "title": r["title"]}} for c in searches for r in results(c)]
    chunks += [{"web": {"uri": c.query, "title": c.query}} for c in fetches]
    if not chunks:
        return None
    support = {"segment": {"startIndex": 0, "endIndex": len(text), "text": text}}
    grounding: dict[str, Any] = {
        "groundingChunks": chunks,
        "groundingSupports": [{**support, "groundingChunkIndices": list(range(len(chunks)))}],
    }
    if searches:
        grounding["webSearchQueries"] = [c.query for c in searches]
        chips = "".join(f'<a class="chip" href="https://example.com/">{html.escape(c.query)}</a>' for c in searches)
        grounding["searchEntryPoint"] = {"renderedContent": f'<div class="carousel">{chips}</div>'}
    return grounding
