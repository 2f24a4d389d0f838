"""GeminiEngine: the Gemini API's ``streamGenerateContent`` endpoint."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import httpx

from ...turns import Turn
from .._http import HttpTransport, RetryPolicy, gemini_error_info
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
from ._dialect import PROVIDER, build_request, model_path, needs_signed_calls
from ._stream import GeminiStreamReducer

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "GeminiEngine"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"


class GeminiEngine(TransportOwner):
    """Streams one ``streamGenerateContent?alt=sse`` request per ``run_inference`` and appends the answer.

    ``base_url`` is the bare host like the google-genai SDK's (default
    ``https://generativelanguage.googleapis.com``, or ``GOOGLE_GEMINI_BASE_URL``); the engine posts to
    ``{base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse``. The key comes from ``api_key``,
    ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``. ``thinking_budget`` (-1: the model decides, 0: off) and
    ``include_thoughts`` fill ``thinkingConfig``; thought parts become reasoning blocks and every thought
    signature is kept on its block and replayed exactly. ``reasoning_effort`` (``minimal``/``low``/
    ``medium``/``high``) picks a budget when ``thinking_budget`` is not given. ``tools``, ``tool_choice``, ``http`` and
    ``retry`` work as in :class:`~geppetto.providers.openai_chat.ChatEngine`.
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
        include_thoughts: bool | None = None,
        headers: dict[str, str] | None = None,
        http: HttpTransport | httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.api_key = resolve_api_key(api_key, ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "Gemini")
        self.base_url = (base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.tools = normalize_tools(tools)
        self.tool_choice = normalize_tool_choice(tool_choice, self.tools)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.thinking_budget = budget_for_effort(thinking_budget, reasoning_effort)
        self.include_thoughts = include_thoughts
        self.headers = dict(headers or {})
        self.http = http
        self.retry = retry
        self._transport = engine_transport(
            http, self.base_url, provider=PROVIDER, error_parser=gemini_error_info, retry=retry
        )
        self._owns_transport = not isinstance(http, HttpTransport)

    def build_request(self, turn: Turn) -> dict[str, Any]:
        """The request body this engine would send for ``turn`` (inside a tool loop, with its tools)."""
        tools, tool_choice = request_tools(self.tools, self.tool_choice, turn)
        return build_request(
            turn,
            tools=tools,
            tool_choice=tool_choice,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            include_thoughts=self.include_thoughts,
            sign_calls=needs_signed_calls(self.model, self.thinking_budget),
        )

    async def run_inference(self, turn: Turn) -> Turn:
        """Send ``turn``, stream the answer into it and return it."""
        body = self.build_request(turn)
        headers = {**self.headers, "x-goog-api-key": self.api_key}
        path = f"{API_VERSION}/{model_path(self.model)}:streamGenerateContent"
        return await run_stream(
            turn,
            provider=PROVIDER,
            model=self.model,
            open_stream=lambda: sse_events(
                self._transport, path, body, params={"alt": "sse"}, headers=headers, error_parser=gemini_error_info
            ),
            reducer=GeminiStreamReducer(),
            key=key_hint(("GEMINI_API_KEY", "GOOGLE_API_KEY"), sent=bool(self.api_key)),
        )
