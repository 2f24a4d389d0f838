"""What the Chat Completions, Claude and Gemini engines share: keys, tool specs, images and the stream loop.

Each engine is a dialect (blocks -> request body, SSE events -> blocks, in its own package) plus an
endpoint (URL, key, headers). The loop that runs one streamed request through a dialect's reducer is in
``_stream_loop``, the hints added to provider errors in ``_hints``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Self, cast

import httpx

from geppetto._json import parse_json

from .._exceptions import ConfigurationError, UsageError
from .._json import dumps
from ..tools import TOOL_CONFIG, current_tools
from ..turns import (
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    Block,
    BlockKind,
    Turn,
    parse_data_url,
    result_text,
)
from ._http import HttpTransport
from ._http_errors import ErrorParser
from ._retry import RetryPolicy
from ._sse import SSEEvent

__all__ = [
    "ToolSpec",
    "TransportOwner",
    "budget_for_effort",
    "builtin_specs",
    "call_names",
    "check_tool_choice",
    "engine_transport",
    "image_parts",
    "is_openai_reasoning_model",
    "new_call_id",
    "normalize_tool_choice",
    "normalize_tools",
    "parse_args",
    "request_tools",
    "resolve_api_key",
    "sse_events",
    "tool_result_text",
]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as every provider needs it: a name, a description and a JSON Schema for its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


def normalize_tools(tools: Iterable[Any] | None) -> list[ToolSpec]:
    """Tool specs from dicts ``{name, description, parameters}`` or objects with those attributes
    (e.g. geppetto tool definitions)."""
    specs: list[ToolSpec] = []
    for tool in tools or ():
        if isinstance(tool, ToolSpec):
            specs.append(tool)
            continue
        get = tool.get if isinstance(tool, dict) else lambda k, t=tool: getattr(t, k, None)
        name = get("name")
        if not isinstance(name, str) or not name:
            raise UsageError(
                f"tool {tool!r} has no name; pass dicts {{'name', 'description', 'parameters'}} or tool definitions"
            )
        params = get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise UsageError(f"tool {name!r}: parameters must be a JSON Schema dict, got {type(params).__name__}")
        specs.append(ToolSpec(name, str(get("description") or ""), params))
    return specs


def check_tool_choice(choice: str | None) -> str | None:
    """Refuse a ``tool_choice`` that cannot be a mode or a tool name (the name is checked per request)."""
    if choice is None or (isinstance(choice, str) and choice.strip()):
        return choice
    raise UsageError(f"tool_choice {choice!r} is not 'auto', 'none', 'required' or the name of a tool")


def normalize_tool_choice(choice: str | None, tools: list[ToolSpec]) -> str | None:
    """Check ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or the name of one of the tools."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if choice not in {t.name for t in tools}:
        offered = ", ".join(sorted(t.name for t in tools))
        raise UsageError(
            f"tool_choice {choice!r} is not 'auto', 'none', 'required' or the name of a tool offered "
            f"(the engine's and the Session's tools: {offered})"
        )
    return choice


EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
"""Thinking-token budgets standing in for OpenAI-style ``reasoning_effort`` on Claude and Gemini."""


def budget_for_effort(thinking_budget: int | None, reasoning_effort: str | None) -> int | None:
    """``thinking_budget`` when given, else the budget for ``reasoning_effort`` (None when neither is set)."""
    if thinking_budget is not None or reasoning_effort is None:
        return thinking_budget
    if reasoning_effort not in EFFORT_BUDGETS:
        raise UsageError(
            f"reasoning_effort {reasoning_effort!r} is not one of {', '.join(EFFORT_BUDGETS)}; "
            "or pass thinking_budget=<tokens>"
        )
    return EFFORT_BUDGETS[reasoning_effort]


def request_tools(tools: list[ToolSpec], tool_choice: str | None, turn: Turn) -> tuple[list[ToolSpec], str | None]:
    """The tools and tool choice for one request: the engine's own tools plus those a tool loop offers
    (:func:`geppetto.tools.current_tools`), and the engine's ``tool_choice``, else the turn's
    :class:`~geppetto.tools.ToolConfig` choice."""
    names = {t.name for t in tools}
    specs = list(tools) + [t for t in normalize_tools(current_tools()) if t.name not in names]
    if tool_choice is None:
        config = TOOL_CONFIG.get(turn.data)
        if config is not None and config.tool_choice != "auto":
            tool_choice = config.tool_choice
    return specs, normalize_tool_choice(tool_choice, specs) if specs else None


def builtin_specs(
    tools: list[dict[str, Any]], provider: str, example: str, valid: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """A provider's built-in tool definitions, each checked by ``valid`` to be in that provider's own form
    (a refusal shows ``example``)."""
    for tool in tools:
        if not isinstance(tool, dict) or not valid(tool):
            raise UsageError(
                f"builtin_tools takes {provider}'s own tool definitions (dicts such as {example}), got {tool!r}"
            )
    return [dict(t) for t in tools]


REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def is_openai_reasoning_model(model: str) -> bool:
    """True for OpenAI's reasoning models (o1, o3, o4, gpt-5 families, also behind a ``vendor/`` prefix), which
    refuse sampling settings such as ``temperature``."""
    return model.rsplit("/", 1)[-1].startswith(REASONING_PREFIXES)


def resolve_api_key(api_key: str | None, env_names: tuple[str, ...], provider: str) -> str:
    """The key passed in, else the first environment variable set; a missing key names the fix."""
    if api_key:
        return api_key
    for name in env_names:
        value = os.environ.get(name)
        if value:
            return value
    names = " or ".join(env_names)
    raise ConfigurationError(f"No API key for {provider}: pass api_key=... or set the {names} environment variable")


def engine_transport(
    http: HttpTransport | httpx.AsyncClient | None,
    base_url: str,
    *,
    provider: str,
    error_parser: ErrorParser,
    retry: RetryPolicy | None,
    timeout: float | httpx.Timeout | None = None,
) -> HttpTransport:
    """An engine's one transport: a given ``HttpTransport`` as is, else one over the given ``httpx.AsyncClient``
    or over a client of its own (made on first use, reused by every request, closed by the engine's ``aclose``)
    with ``timeout`` (seconds, or an ``httpx.Timeout``; default 600 s) when given.
    Keys and the error parser go with each request (:func:`sse_events`), so engines can share a transport."""
    if isinstance(http, HttpTransport):
        return http
    if timeout is None:
        return HttpTransport(base_url, provider=provider, error_parser=error_parser, retry=retry, client=http)
    return HttpTransport(
        base_url, provider=provider, error_parser=error_parser, retry=retry, client=http, timeout=timeout
    )


class TransportOwner:
    """``aclose()`` and ``async with`` for an engine holding ``_transport`` (closed only when the engine made it)."""

    _transport: HttpTransport
    _owns_transport: bool

    async def aclose(self) -> None:
        """Close the HTTP client this engine made (a given client or transport stays open), and its WebSocket
        connection when it has one (``transport="websocket"``)."""
        socket = getattr(self, "_socket", None)
        if socket is not None:
            await socket.aclose()
        if self._owns_transport:
            await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def sse_events(
    transport: HttpTransport,
    path: str,
    body: Any,
    *,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    error_parser: ErrorParser | None = None,
) -> AsyncGenerator[SSEEvent, None]:
    """The SSE events of one streamed POST with this request's ``headers`` (its key) and ``error_parser``."""
    stream = transport.stream_sse(path, body, params=params, headers=headers, error_parser=error_parser)
    async with aclosing(cast(AsyncGenerator[SSEEvent, None], stream)) as events:
        async for event in events:
            yield event


def new_call_id() -> str:
    """A tool call id for providers that sent none."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_args(raw: str) -> Any:
    """Tool-call arguments: a dict when ``raw`` is a JSON object (``{}`` when empty), else the raw text (not
    JSON, or nested too deeply: the tool executor then answers the call with an error the model can read)."""
    if not raw.strip():
        return {}
    try:
        value = parse_json(raw)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


def tool_result_text(block: Block) -> str:
    """A tool_use block as the text a model reads; an error is shown as ``{"error": ..., "result": ...}``."""
    result = block.payload.get(PAYLOAD_RESULT)
    error = block.payload.get(PAYLOAD_ERROR)
    if error is None:
        return result_text(result if result is not None else "")
    shown: dict[str, Any] = {"error": error}
    if result not in (None, ""):
        shown["result"] = result
    return dumps(shown, ensure_ascii=False)


def call_names(turn: Turn) -> dict[str, str]:
    """Tool call id -> tool name, over every tool_call block of the turn."""
    return {
        str(b.payload.get(PAYLOAD_ID, "")): str(b.payload.get(PAYLOAD_NAME, ""))
        for b in turn.blocks
        if b.kind is BlockKind.TOOL_CALL
    }


def image_parts(block: Block) -> list[tuple[str, str, str]]:
    """A user block's images as ``(kind, value, media_type)``: kind ``"url"`` (http(s) or data URL) or
    ``"base64"``. Images are dicts ``{"url": ...}`` or ``{"data": <base64>, "media_type": "image/png"}``."""
    out: list[tuple[str, str, str]] = []
    for image in block.payload.get("images") or []:
        if not isinstance(image, dict):
            raise UsageError(f"image {image!r} must be a dict with 'url', or 'data' and 'media_type'")
        if image.get("url"):
            url = str(image["url"])
            if url[:5].lower() == "data:":
                parsed = parse_data_url(url, where="an image of the user block")
                out.append(("base64", parsed.base64, parsed.media_type))
            else:
                out.append(("url", url, str(image.get("media_type") or "")))
        elif image.get("data"):
            out.append(("base64", str(image["data"]), str(image.get("media_type") or "image/png")))
        else:
            raise UsageError(f"image {image!r} has neither 'url' nor 'data'")
    return out
