"""ChatEngine: the Chat Completions endpoint (OpenAI, or any compatible server through ``base_url``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import httpx

from ...output import READ_FROM_TURN
from ...turns import BLOCK_META_PROVIDER, BlockKind, Turn
from .._engine_base import StreamingEngine
from .._http import HttpTransport
from .._http_errors import openai_error_info
from .._retry import RetryPolicy
from .._sse import SSEEvent
from .._stream_loop import StreamReducer
from .._streaming import ToolSpec
from ..settings import ChatSettings
from ._dialect import PROVIDER, build_request
from ._stream import ChatStreamReducer, completion_events

__all__ = ["DEFAULT_BASE_URL", "ChatEngine"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_THINKING_NAMES = ("reason", "deepseek-r1", "deepseek-v4")


class ChatEngine(StreamingEngine):
    """Streams one Chat Completions request per ``run_inference`` and appends the answer to the turn.

    ``base_url`` ends in ``/v1`` like the OpenAI SDK's (default ``https://api.openai.com/v1``, or
    ``OPENAI_BASE_URL``); point it at Ollama, vLLM, LM Studio, OpenRouter or the simulator. The key comes
    from ``api_key`` or ``OPENAI_API_KEY``; it is required for OpenAI itself and optional elsewhere.
    ``tools`` are dicts ``{name, description, parameters}`` or objects with those attributes;
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or a tool name. ``reasoning_effort`` is
    passed as is (``"low"``, ``"medium"``, ``"high"``). ``http`` is an ``httpx.AsyncClient`` to share, or
    a ready :class:`~geppetto.providers._http.HttpTransport`; ``retry`` tunes retries; ``timeout`` (seconds, or an
    ``httpx.Timeout``; default 600 s) bounds each request and each wait for stream data. ``thinking`` says
    whether a compatible server runs in DeepSeek-style thinking mode, where assistant messages of exchanges
    with tool calls must carry ``reasoning_content`` (sent empty when the Turn has none from this server);
    None guesses it from the model name (``reason``, ``deepseek-r1``, ``deepseek-v4``) or from reasoning
    the server already sent.

    Example::

        engine = ChatEngine("llama3.2", base_url="http://localhost:11434/v1")
        turn = await engine.run_inference(turn)
    """

    settings: ChatSettings
    provider = PROVIDER
    key_env = ("OPENAI_API_KEY",)
    key_owner = "OpenAI"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = DEFAULT_BASE_URL
    error_parser = staticmethod(openai_error_info)

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
        reasoning_effort: str | None = None,
        system_role: str = "system",
        stream_usage: bool = True,
        headers: dict[str, str] | None = None,
        http: HttpTransport | httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        thinking: bool | None = None,
        stream: bool = True,
    ) -> None:
        settings = ChatSettings(
            tool_choice=tool_choice,
            temperature=temperature,
            max_tokens=max_tokens,
            headers=headers,
            stream=stream,
            reasoning_effort=reasoning_effort,
            system_role=system_role,
            stream_usage=stream_usage,
            thinking=thinking,
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
        official = self.base_url == DEFAULT_BASE_URL
        self.max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        self.reasoning_effort = reasoning_effort
        self.system_role = system_role
        self.stream_usage = stream_usage
        self.thinking = thinking
        self.settings = settings

    def resolve_key(self, api_key: str | None) -> str | None:
        """OpenAI itself needs a key; local compatible servers (Ollama, vLLM) need none."""
        if self.base_url == DEFAULT_BASE_URL:
            return super().resolve_key(api_key)
        return api_key or os.environ.get("OPENAI_API_KEY")

    def request_body(
        self, turn: Turn, tools: list[ToolSpec], tool_choice: str | None, output: Any = READ_FROM_TURN
    ) -> dict[str, Any]:
        s = self.settings
        return build_request(
            turn,
            output=output,
            model=self.model,
            tools=tools,
            tool_choice=tool_choice,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            max_tokens_field=self.max_tokens_field,
            reasoning_effort=s.reasoning_effort,
            system_role=s.system_role,
            stream_usage=s.stream_usage,
            reasoning_content=self.base_url != DEFAULT_BASE_URL,  # a compatible server's extension
            thinking=self._thinking(turn),
            stream=s.stream,
            server=self.base_url,
        )

    def _thinking(self, turn: Turn) -> bool:
        """Whether the server is in DeepSeek-style thinking mode: as told, else guessed from the model name
        (reasoner, R1 and V4 names) or from reasoning this server already produced in the Turn."""
        if self.base_url == DEFAULT_BASE_URL:
            return False
        if self.settings.thinking is not None:
            return self.settings.thinking
        name = self.model.lower()
        if any(mark in name for mark in _THINKING_NAMES):
            return True
        return any(
            b.kind is BlockKind.REASONING and BLOCK_META_PROVIDER.get(b.metadata) == PROVIDER for b in turn.blocks
        )

    def endpoint(self) -> tuple[str, dict[str, str] | None]:
        return "chat/completions", None

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def reducer(self) -> StreamReducer:
        return ChatStreamReducer(server=self.base_url)

    def whole_events(self, answer: Any) -> list[SSEEvent]:
        return completion_events(answer if isinstance(answer, dict) else {})
