"""ClaudeEngine: the Anthropic Messages endpoint."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import httpx

from ...turns import Turn
from .._http import HttpTransport, RetryPolicy, anthropic_error_info
from .._streaming import (
    TransportOwner,
    budget_for_effort,
    engine_transport,
    key_hint,
    normalize_tool_choice,
    normalize_tools,
    request_tools,
    resolve_api_key,
    run_stream,
    sse_events,
)
from ._dialect import ANTHROPIC_VERSION, PROVIDER, build_request
from ._stream import ClaudeStreamReducer

__all__ = ["DEFAULT_BASE_URL", "ClaudeEngine"]

DEFAULT_BASE_URL = "https://api.anthropic.com"


class ClaudeEngine(TransportOwner):
    """Streams one Messages request per ``run_inference`` and appends the answer to the turn.

    ``base_url`` is the bare host like the Anthropic SDK's (default ``https://api.anthropic.com``, or
    ``ANTHROPIC_BASE_URL``); the engine posts to ``{base_url}/v1/messages``. The key comes from ``api_key``
    or ``ANTHROPIC_API_KEY``. ``thinking_budget`` turns extended thinking on with that many budget tokens;
    thinking blocks come back as reasoning blocks with their signature and are replayed unmodified.
    ``reasoning_effort`` (``minimal``/``low``/``medium``/``high``) picks a budget when ``thinking_budget`` is not given.
    ``tools``, ``tool_choice``, ``http`` and ``retry`` work as in :class:`~geppetto.providers.openai_chat.ChatEngine`.
    """

    provider = PROVIDER

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
    ) -> None:
        self.model = model
        self.api_key = resolve_api_key(api_key, ("ANTHROPIC_API_KEY",), "Anthropic")
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.tools = normalize_tools(tools)
        self.tool_choice = normalize_tool_choice(tool_choice, self.tools)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.thinking_budget = budget_for_effort(thinking_budget, reasoning_effort)
        self.headers = dict(headers or {})
        self.http = http
        self.retry = retry
        self._transport = engine_transport(
            http, self.base_url, provider=PROVIDER, error_parser=anthropic_error_info, retry=retry
        )
        self._owns_transport = not isinstance(http, HttpTransport)
        if thinking_budget is not None and tool_choice not in (None, "auto", "none"):
            self.build_request(Turn())  # raises the ConfigurationError that names the fix, at construction

    def build_request(self, turn: Turn) -> dict[str, Any]:
        """The request body this engine would send for ``turn`` (inside a tool loop, with its tools)."""
        tools, tool_choice = request_tools(self.tools, self.tool_choice, turn)
        return build_request(
            turn,
            model=self.model,
            tools=tools,
            tool_choice=tool_choice,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
        )

    async def run_inference(self, turn: Turn) -> Turn:
        """Send ``turn``, stream the answer into it and return it."""
        body = self.build_request(turn)
        headers = {**self.headers, "x-api-key": self.api_key, "anthropic-version": ANTHROPIC_VERSION}
        return await run_stream(
            turn,
            provider=PROVIDER,
            model=self.model,
            open_stream=lambda: sse_events(
                self._transport, "v1/messages", body, headers=headers, error_parser=anthropic_error_info
            ),
            reducer=ClaudeStreamReducer(),
            key=key_hint(("ANTHROPIC_API_KEY",), sent=bool(self.api_key)),
        )
