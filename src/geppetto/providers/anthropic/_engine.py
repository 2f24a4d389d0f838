"""ClaudeEngine: the Anthropic Messages endpoint."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from ...output import READ_FROM_TURN, StructuredOutputConfig
from ...turns import Turn
from .._engine_base import StreamingEngine
from .._files import claude_files_beta
from .._http import HttpTransport, RetryPolicy, SSEEvent, anthropic_error_info
from .._streaming import StreamReducer, ToolSpec, budget_for_effort
from ._blocks import message_events
from ._dialect import ANTHROPIC_VERSION, PROVIDER, answer_tool, build_request
from ._stream import ClaudeStreamReducer

__all__ = ["DEFAULT_BASE_URL", "ClaudeEngine"]

DEFAULT_BASE_URL = "https://api.anthropic.com"


class ClaudeEngine(StreamingEngine):
    """Streams one Messages request per ``run_inference`` and appends the answer to the turn.

    ``base_url`` is the bare host like the Anthropic SDK's (default ``https://api.anthropic.com``, or
    ``ANTHROPIC_BASE_URL``); the engine posts to ``{base_url}/v1/messages``. The key comes from ``api_key``
    or ``ANTHROPIC_API_KEY``. ``thinking_budget`` turns extended thinking on with that many budget tokens;
    thinking blocks come back as reasoning blocks with their signature and are replayed unmodified.
    ``reasoning_effort`` (``minimal``/``low``/``medium``/``high``) picks a budget when ``thinking_budget`` is not given.
    ``tools``, ``tool_choice``, ``http``, ``retry`` and ``timeout`` work as in :class:`~geppetto.providers.openai_chat.ChatEngine`.
    ``builtin_tools`` enables Claude's server tools, each as Claude's own tool definition
    (``{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}``, ``code_execution_20250825``,
    ``web_fetch_20250910``...); their calls and results come back as ``other`` blocks typed under
    ``payload["builtin"]`` and are sent back as they came. ``stream=False`` asks for the whole Message in
    one JSON answer instead of an event stream (the same blocks and events come of it).
    """

    provider = PROVIDER
    key_env = ("ANTHROPIC_API_KEY",)
    key_owner = "Anthropic"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = DEFAULT_BASE_URL
    error_parser = staticmethod(anthropic_error_info)

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        tools: Iterable[Any] | None = None,
        tool_choice: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        reasoning_effort: str | None = None,
        headers: dict[str, str] | None = None,
        http: HttpTransport | httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        stream: bool = True,
        builtin_tools: Iterable[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key,
            base_url,
            tools=tools,
            tool_choice=tool_choice,
            temperature=temperature,
            max_tokens=max_tokens,
            headers=headers,
            http=http,
            retry=retry,
            timeout=timeout,
            stream=stream,
        )
        self.builtin_tools = [dict(t) for t in builtin_tools or ()]
        self.thinking_budget = budget_for_effort(thinking_budget, reasoning_effort)
        if thinking_budget is not None and tool_choice not in (None, "auto", "none"):
            # raises the ConfigurationError that names the fix, at construction (the tool may be a Session's)
            build_request(Turn(), model=model, tools=[], tool_choice=tool_choice, thinking_budget=thinking_budget)

    def request_body(
        self, turn: Turn, tools: list[ToolSpec], tool_choice: str | None, output: Any = READ_FROM_TURN
    ) -> dict[str, Any]:
        return build_request(
            turn,
            output=output,
            model=self.model,
            tools=tools,
            tool_choice=tool_choice,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            builtin_tools=self.builtin_tools,
            stream=self.stream,
        )

    def endpoint(self) -> tuple[str, dict[str, str] | None]:
        return "v1/messages", None

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": str(self.api_key), "anthropic-version": ANTHROPIC_VERSION}

    def body_headers(self, body: dict[str, Any]) -> dict[str, str]:
        return claude_files_beta(body, self.headers)

    def reducer(self) -> StreamReducer:
        return ClaudeStreamReducer()

    def whole_events(self, answer: Any) -> list[SSEEvent]:
        return message_events(answer if isinstance(answer, dict) else {})

    def answer_tool(self, output: StructuredOutputConfig | None) -> str | None:
        return answer_tool(output, self.model)
