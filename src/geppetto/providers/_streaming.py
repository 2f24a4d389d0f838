"""What the Chat Completions, Claude and Gemini engines share: keys, tool specs, images and the stream loop.

Each engine is a dialect (blocks -> request body, SSE events -> blocks, in its own package) plus an
endpoint (URL, key, headers). The loop here runs one streamed request through a dialect's reducer,
publishes events as the stream arrives and appends the finished blocks to the turn.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Self, cast

import httpx

from .._exceptions import AuthenticationError, ConfigurationError, NotFoundError, ProviderError, UsageError
from .._json import dumps
from ..events import (
    STOP_END,
    STOP_TOOL_CALLS,
    EventBuiltinTool,
    EventError,
    EventFinal,
    EventMetadata,
    EventReasoningDelta,
    EventStart,
    EventTextDelta,
    EventToolCallRequested,
    Usage,
    metadata_for,
    publish,
)
from ..output import READ_FROM_TURN, settle_output
from ..pricing import record_usage
from ..tools import TOOL_CONFIG, current_tools
from ..turns import (
    BLOCK_META_PROVIDER,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_STOP_REASON,
    Block,
    BlockKind,
    Turn,
    builtin_of,
    result_text,
)
from ._citations import publish_citations
from ._http import ErrorParser, HttpTransport, RetryPolicy, SSEEvent, parse_json

__all__ = [
    "Delta",
    "StreamReducer",
    "StreamResult",
    "ToolSpec",
    "TransportOwner",
    "budget_for_effort",
    "builtin_specs",
    "call_names",
    "check_tool_choice",
    "engine_transport",
    "image_parts",
    "is_openai_reasoning_model",
    "key_hint",
    "new_call_id",
    "normalize_tool_choice",
    "normalize_tools",
    "parse_args",
    "publish_builtin",
    "request_tools",
    "resolve_api_key",
    "run_stream",
    "sse_events",
    "too_large_hint",
    "tool_result_text",
    "with_hint",
]

Delta = tuple[Literal["text", "reasoning"], str]
"""A piece of streamed output: ("text", "Hel") or ("reasoning", "Let me think")."""


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
        """Close the HTTP client this engine made (a given client or transport stays open)."""
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
            if url.startswith("data:") and ";base64," in url:
                head, _, data = url.partition(";base64,")
                out.append(("base64", data, head.removeprefix("data:")))
            else:
                out.append(("url", url, str(image.get("media_type") or "")))
        elif image.get("data"):
            out.append(("base64", str(image["data"]), str(image.get("media_type") or "image/png")))
        else:
            raise UsageError(f"image {image!r} has neither 'url' nor 'data'")
    return out


@dataclass
class StreamResult:
    """A finished stream: the blocks in output order, usage, the normalized stop reason, the response id."""

    blocks: list[Block]
    usage: Usage | None
    """None when the stream reported none (the request is then unpriced)."""
    stop_reason: str
    response_id: str = ""


class StreamReducer(Protocol):
    """Turns one provider's SSE events into deltas and, at the end, blocks."""

    finished: bool
    """True once the terminal event arrived (the loop stops reading)."""
    response_id: str

    def feed(self, event: SSEEvent) -> list[Delta]:
        """Take one event; return the text and reasoning deltas it carried. Raises ProviderError for an
        error event and StreamError for a malformed one."""
        ...

    def result(self) -> StreamResult:
        """The finished output; raises StreamError when the stream ended early."""
        ...

    def completed_blocks(self) -> list[Block]:
        """Blocks complete so far (never tool calls): what a broken stream leaves in the turn."""
        ...


def key_hint(env_names: tuple[str, ...], *, sent: bool) -> str:
    """What to do about a refused key: which argument or environment variable to set."""
    names = " or ".join(env_names)
    if not sent:
        return f"no API key was sent: pass api_key=... or set the {names} environment variable"
    return f"check the key passed as api_key= or set in {names}"


def _with_hint(exc: ProviderError, model: str, key: str) -> ProviderError:
    """Name the fix: a 404 on a generation call almost always means a wrong model name (or base URL); a refused
    key means the key to set."""
    if isinstance(exc, NotFoundError):
        return with_hint(exc, f"check the model name {model!r} and the base URL")
    if isinstance(exc, AuthenticationError) and key:
        return with_hint(exc, key)
    return too_large_hint(exc)


TOO_LARGE = (
    "the request is larger than the server takes: shorten the Turn, or bound tool results with "
    "tool_loop(max_result_chars=...) (Session(..., tool_loop_options={'max_result_chars': ...}))"
)


def too_large_hint(exc: ProviderError) -> ProviderError:
    """A 413 (request too large) with the fix named; any other error as it is."""
    return with_hint(exc, TOO_LARGE) if exc.status == 413 else exc


def with_hint(exc: ProviderError, hint: str) -> ProviderError:
    """``exc`` with ``hint`` (the fix, e.g. from :func:`key_hint`) after its message."""
    return type(exc)(
        f"{exc.message} ({hint})",
        status=exc.status,
        provider=exc.provider,
        code=exc.code,
        error_type=exc.error_type,
        param=exc.param,
        request_id=exc.request_id,
        body=exc.body,
    )


def _stamp(blocks: list[Block], provider: str, response_id: str) -> list[Block]:
    for block in blocks:
        BLOCK_META_PROVIDER.set(block.metadata, provider)
        if response_id:
            BLOCK_META_RESPONSE_ID.set(block.metadata, response_id)
    return blocks


def publish_builtin(meta: EventMetadata, blocks: list[Block]) -> None:
    """An :class:`~geppetto.events.EventBuiltinTool` for each built-in tool call or result among ``blocks``."""
    for block in blocks:
        info = builtin_of(block)
        if info is None:
            continue
        publish(
            EventBuiltinTool(
                meta,
                call_id=str(info.get("call_id") or ""),
                tool=str(info.get("tool") or ""),
                phase=str(info.get("phase") or "call"),
                name=str(info.get("name") or ""),
                input=info.get("input"),
                output=info.get("output"),
                error=bool(info.get("error")),
                sources=list(info.get("sources") or []),
            )
        )


def _calls(block: Block, name: str) -> bool:
    return block.kind is BlockKind.TOOL_CALL and block.payload.get(PAYLOAD_NAME) == name


def _as_answer(call: Block) -> Block:
    args = call.payload.get(PAYLOAD_ARGS)
    return Block.llm_text(args if isinstance(args, str) else dumps(args))


async def run_stream(
    turn: Turn,
    *,
    provider: str,
    model: str,
    open_stream: Callable[[], AsyncGenerator[SSEEvent, None]],
    reducer: StreamReducer,
    key: str = "",
    answer_tool: str | None = None,
    output: Any = READ_FROM_TURN,
    on_result: Callable[[StreamResult, EventMetadata], None] | None = None,
) -> Turn:
    """Run one streamed request into ``turn``: publish start, deltas, tool calls and final (or error);
    append the finished blocks; record usage and stop reason. A failed stream appends only the blocks
    that completed (never a tool call) and re-raises; ``key`` (see :func:`key_hint`) is added to an
    authentication error's message. A call of ``answer_tool`` is the structured answer given as a tool
    call (Claude's tool mode): it becomes a text block holding its arguments as JSON. ``on_result`` is
    called with the result and the final event's metadata once the blocks are in the Turn, before the final
    event goes out (a stateful engine tags its answer's blocks there and adds what the request did)."""
    meta = metadata_for(turn, provider, model)
    publish(EventStart(meta))
    started = time.monotonic()
    try:
        async with aclosing(open_stream()) as events:
            async for event in events:
                for kind, text in reducer.feed(event):
                    publish(EventTextDelta(meta, text) if kind == "text" else EventReasoningDelta(meta, text))
                if reducer.finished:
                    break
        result = reducer.result()
    except ProviderError as exc:
        turn.extend(_stamp(reducer.completed_blocks(), provider, reducer.response_id))
        failed = metadata_for(turn, provider, model)
        failed.duration_s = time.monotonic() - started
        error = _with_hint(exc, model, key)
        publish(EventError(failed, str(error), error_type=type(error).__name__))
        if error is exc:
            raise
        raise error from exc
    if answer_tool is not None:
        result.blocks = [_as_answer(b) if _calls(b, answer_tool) else b for b in result.blocks]
        if result.stop_reason == STOP_TOOL_CALLS and not any(b.kind is BlockKind.TOOL_CALL for b in result.blocks):
            result.stop_reason = STOP_END
    turn.extend(_stamp(result.blocks, provider, result.response_id))
    settle_output(turn, result.blocks, output)
    TURN_META_PROVIDER.set(turn.metadata, provider)
    TURN_META_MODEL.set(turn.metadata, model)
    TURN_META_STOP_REASON.set(turn.metadata, result.stop_reason)
    publish_citations(meta, result.blocks)
    publish_builtin(meta, result.blocks)
    for block in result.blocks:
        if block.kind is BlockKind.TOOL_CALL:
            publish(
                EventToolCallRequested(
                    meta, block.payload[PAYLOAD_ID], block.payload[PAYLOAD_NAME], block.payload[PAYLOAD_ARGS]
                )
            )
    final = metadata_for(turn, provider, model)
    record_usage(turn, result.blocks, final, provider=provider, model=model, usage=result.usage)
    final.stop_reason = result.stop_reason
    final.duration_s = time.monotonic() - started
    if result.response_id:
        final.extra["response_id"] = result.response_id
    if on_result is not None:
        on_result(result, final)
    text = "".join(b.text for b in result.blocks if b.kind is BlockKind.LLM_TEXT)
    publish(EventFinal(final, text))
    return turn
