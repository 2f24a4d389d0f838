"""GeminiEngine: the Gemini API's ``streamGenerateContent`` endpoint."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from ..._json import dumps
from ...output import READ_FROM_TURN, STRUCTURED_OUTPUT
from ...turns import Block, Turn
from .._engine_base import StreamingEngine
from .._http import HttpTransport
from .._http_errors import gemini_error_info
from .._prefix_guard import asked_policy
from .._retry import RetryPolicy
from .._sse import SSEEvent
from .._stream_loop import StreamReducer
from .._streaming import ToolSpec, budget_for_effort
from ..settings import GeminiSettings
from ._binding import record_response
from ._dialect import build_contents, build_request, model_path, needs_signed_calls
from ._parts import PROVIDER
from ._stream import GeminiStreamReducer

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "GeminiEngine"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"


class GeminiEngine(StreamingEngine):
    """Streams one ``streamGenerateContent?alt=sse`` request per ``run_inference`` and appends the answer.

    ``base_url`` is the bare host like the google-genai SDK's (default
    ``https://generativelanguage.googleapis.com``, or ``GOOGLE_GEMINI_BASE_URL``); the engine posts to
    ``{base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse``. The key comes from ``api_key``,
    ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``. ``thinking_budget`` (-1: the model decides, 0: off) and
    ``include_thoughts`` fill ``thinkingConfig``; thought parts become reasoning blocks and every thought
    signature is kept on its block and replayed exactly. ``reasoning_effort`` (``minimal``/``low``/
    ``medium``/``high``) picks a budget when ``thinking_budget`` is not given. ``tools``, ``tool_choice``, ``http`` and
    ``retry`` work as in :class:`~geppetto.providers.openai_chat.ChatEngine`. ``builtin_tools`` enables
    Gemini's own tools, each as Gemini's tool entry (``{"googleSearch": {}}``, ``{"codeExecution": {}}``,
    ``{"urlContext": {}}``); their calls and results come back as ``other`` blocks typed under
    ``payload["builtin"]`` and go back as they came. ``stream=False`` posts to ``:generateContent`` and
    reads the whole answer (the same blocks and events come of it). ``prefix_policy`` (``"drop"``,
    default; ``"rewrite"``; ``"error"``) is what happens to a thought signature replayed after a prefix
    (system instruction, tools, earlier parts) that changed since Gemini made it (see
    :mod:`geppetto.providers._prefix_guard`; ``rewrite`` drops too, and says so).
    """

    settings: GeminiSettings
    provider = PROVIDER
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    key_owner = "Gemini"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    default_base_url = DEFAULT_BASE_URL
    error_parser = staticmethod(gemini_error_info)

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
        timeout: float | httpx.Timeout | None = None,
        stream: bool = True,
        builtin_tools: Iterable[dict[str, Any]] | None = None,
        prefix_policy: str = "drop",
    ) -> None:
        settings = GeminiSettings(
            tool_choice=tool_choice,
            temperature=temperature,
            max_tokens=max_tokens,
            headers=headers,
            stream=stream,
            thinking_budget=thinking_budget,
            reasoning_effort=reasoning_effort,
            include_thoughts=include_thoughts,
            builtin_tools=tuple(builtin_tools or ()),
            prefix_policy=prefix_policy,
        )
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
        self.include_thoughts = include_thoughts
        self.prefix_policy = prefix_policy
        self.settings = settings

    def request_body(
        self, turn: Turn, tools: list[ToolSpec], tool_choice: str | None, output: Any = READ_FROM_TURN
    ) -> dict[str, Any]:
        s = self.settings
        return build_request(
            turn,
            output=output,
            tools=tools,
            tool_choice=tool_choice,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            thinking_budget=self.thinking_budget,  # derived from reasoning_effort when not given
            include_thoughts=s.include_thoughts,
            sign_calls=needs_signed_calls(self.model, self.thinking_budget),
            model=self.model,
            builtin_tools=list(s.builtin_tools),
            prefix_policy=asked_policy(turn, s.prefix_policy),
        )

    def endpoint(self) -> tuple[str, dict[str, str] | None]:
        if not self.stream:
            return f"{API_VERSION}/{model_path(self.model)}:generateContent", None
        return f"{API_VERSION}/{model_path(self.model)}:streamGenerateContent", {"alt": "sse"}

    def whole_events(self, answer: Any) -> list[SSEEvent]:
        return [SSEEvent("", dumps(answer))]  # a whole answer is one chunk of a stream

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": str(self.api_key)}

    count_is_estimate = False

    async def count_tokens(self, turn: Turn) -> int:
        """The input tokens of the request for ``turn``, counted by ``models/{model}:countTokens`` (sent as a
        whole ``generateContentRequest``, so the system instruction and tools count too)."""
        body = self.build_request(turn, STRUCTURED_OUTPUT.get(turn.data))
        request = {"model": model_path(self.model), **body}
        answer = await self.count_request(
            f"{API_VERSION}/{model_path(self.model)}:countTokens", {"generateContentRequest": request}
        )
        return int(answer.get("totalTokens") or 0)

    def reducer(self) -> StreamReducer:
        return GeminiStreamReducer()

    def after_response(self, turn: Turn, body: dict[str, Any], new: list[Block], reducer: StreamReducer) -> None:
        origin: dict[int, Block] = {}
        _, contents = build_contents(turn, origin=origin)
        record_response(turn, body, new, contents, origin)
