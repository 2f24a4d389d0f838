"""The endpoint half that the Chat Completions, Claude and Gemini engines share.

Each of those engines is a dialect (its own ``build_request`` and stream reducer) on one endpoint
skeleton: a model, a key from an argument or the environment, a base URL, the engine's tools, sampling
settings, extra headers, one transport, and one streamed POST per ``run_inference``. That skeleton is
:class:`StreamingEngine`; a subclass names its provider, key variables and default base URL, and fills
in the request body, the path and the auth headers.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterable
from typing import Any, ClassVar

import httpx

from .._json import dumps
from ..output import READ_FROM_TURN, STRUCTURED_OUTPUT, StructuredOutputConfig
from ..turns import Block, Turn
from ._hints import key_hint
from ._http import HttpTransport
from ._http_errors import ErrorInfo
from ._retry import RetryPolicy
from ._sse import SSEEvent
from ._stream_loop import StreamReducer, run_stream
from ._streaming import (
    ToolSpec,
    TransportOwner,
    check_tool_choice,
    engine_transport,
    normalize_tools,
    request_tools,
    resolve_api_key,
    sse_events,
)
from .settings import SettingsOwner

__all__ = ["StreamingEngine"]

_COUNTED = frozenset({"messages", "system", "tools", "contents", "systemInstruction", "input", "instructions"})
"""The request fields a prompt's tokens come from (the rest are settings)."""


class StreamingEngine(SettingsOwner, TransportOwner):
    """One streamed request per ``run_inference``, its answer appended to the turn.

    Subclasses set the class attributes and implement :meth:`request_body`, :meth:`endpoint`,
    :meth:`auth_headers` and :meth:`reducer`; the constructor arguments here are the ones every such
    engine takes (see :class:`~geppetto.providers.openai_chat.ChatEngine` for their meaning). A subclass
    sets ``settings`` (its family's :mod:`~geppetto.providers.settings` value) last in its constructor.
    """

    provider: ClassVar[str]
    key_env: ClassVar[tuple[str, ...]]
    """Environment variables read for the key, first set wins."""
    key_owner: ClassVar[str]
    """Who issues the key, as error messages name it ("Anthropic")."""
    base_url_env: ClassVar[str]
    default_base_url: ClassVar[str]

    def __init__(
        self,
        model: str,
        api_key: str | None,
        base_url: str | None,
        *,
        tools: Iterable[Any] | None,
        tool_choice: str | None,
        temperature: float | None,
        max_tokens: int | None,
        headers: dict[str, str] | None,
        http: HttpTransport | httpx.AsyncClient | None,
        retry: RetryPolicy | None,
        timeout: float | httpx.Timeout | None = None,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.stream = stream
        self.base_url = (base_url or os.environ.get(self.base_url_env) or self.default_base_url).rstrip("/")
        self.api_key = self.resolve_key(api_key)
        self.tools: list[ToolSpec] = normalize_tools(tools)
        # A name may be one of the engine's tools or one a Session's tool loop offers: names are checked per
        # request, against the tools offered then (as the Responses engine does).
        self.tool_choice = check_tool_choice(tool_choice)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.headers = dict(headers or {})
        self.http = http
        self.retry = retry
        self._transport = engine_transport(
            http, self.base_url, provider=self.provider, error_parser=self.error_parser, retry=retry, timeout=timeout
        )
        self._owns_transport = not isinstance(http, HttpTransport)

    @staticmethod
    def error_parser(body: Any) -> ErrorInfo | None:
        """The provider's error body as an :class:`~geppetto.providers._http.ErrorInfo` (its dialect's parser)."""
        raise NotImplementedError

    def resolve_key(self, api_key: str | None) -> str | None:
        """The key to send: ``api_key``, else the first of :attr:`key_env` set; none is a
        :class:`~geppetto.ConfigurationError` naming them (an engine whose server needs no key overrides this)."""
        return resolve_api_key(api_key, self.key_env, self.key_owner)

    def build_request(self, turn: Turn, output: Any = READ_FROM_TURN) -> dict[str, Any]:
        """The request body this engine would send for ``turn`` (inside a tool loop, with its tools);
        ``output``: the turn's structured-output config when the caller read it already."""
        tools, tool_choice = request_tools(self.tools, self.tool_choice, turn)
        return self.request_body(turn, tools, tool_choice, output)

    def request_body(
        self, turn: Turn, tools: list[ToolSpec], tool_choice: str | None, output: Any = READ_FROM_TURN
    ) -> dict[str, Any]:
        """The dialect's body for ``turn`` with the tools of this request."""
        raise NotImplementedError

    def endpoint(self) -> tuple[str, dict[str, str] | None]:
        """The path under the base URL to post to, and its query parameters."""
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        """The headers that carry the key (and any version the API requires)."""
        raise NotImplementedError

    def body_headers(self, body: dict[str, Any]) -> dict[str, str]:
        """Headers this request's body needs (a beta it uses); they override the engine's headers."""
        return {}

    def reducer(self) -> StreamReducer:
        """A fresh reducer for one stream of this dialect."""
        raise NotImplementedError

    def whole_events(self, answer: Any) -> list[SSEEvent]:
        """The events a stream of the whole (non-streamed) answer ``answer`` would carry (``stream=False``)."""
        raise NotImplementedError

    async def _whole(
        self, path: str, body: Any, params: dict[str, str] | None, headers: dict[str, str]
    ) -> AsyncGenerator[SSEEvent, None]:
        answer = await self._transport.request_json(
            "POST", path, body, params=params, headers=headers, error_parser=self.error_parser
        )
        for event in self.whole_events(answer):
            yield event

    def answer_tool(self, output: StructuredOutputConfig | None) -> str | None:
        """The tool whose call is the structured answer for the turn's structured-output config ``output``
        (a dialect that asks for it through a forced tool overrides this); ``None`` otherwise."""
        return None

    count_is_estimate: ClassVar[bool] = True
    """Whether :meth:`count_tokens` estimates (no counting endpoint) rather than asks the provider."""

    async def count_tokens(self, turn: Turn) -> int:
        """The input tokens a request for ``turn`` would have. This default is an estimate (about four
        characters of the request's messages, system prompt and tools a token, :attr:`count_is_estimate`);
        an engine whose provider counts overrides it with :meth:`count_request`."""
        body = self.build_request(turn, STRUCTURED_OUTPUT.get(turn.data))
        counted = {k: v for k, v in body.items() if k in _COUNTED}
        return len(dumps(counted)) // 4

    async def count_request(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to the provider's counting endpoint ``path`` with this engine's headers and key."""
        headers = {**self.headers, **self.auth_headers()}
        return await self._transport.request_json("POST", path, body, headers=headers, error_parser=self.error_parser)

    async def run_inference(self, turn: Turn) -> Turn:
        """Send ``turn``, stream the answer into it and return it (see
        :func:`~geppetto.providers._streaming.run_stream` for the events)."""
        output = STRUCTURED_OUTPUT.get(turn.data)
        body = self.build_request(turn, output)
        path, params = self.endpoint()
        headers = {**self.headers, **self.auth_headers(), **self.body_headers(body)}
        start = len(turn.blocks)
        reducer = self.reducer()
        await run_stream(
            turn,
            provider=self.provider,
            model=self.model,
            open_stream=lambda: (
                sse_events(self._transport, path, body, params=params, headers=headers, error_parser=self.error_parser)
                if self.stream
                else self._whole(path, body, params, headers)
            ),
            reducer=reducer,
            key=key_hint(self.key_env, sent=bool(self.api_key)),
            answer_tool=self.answer_tool(output) if output is not None else None,
            output=output,
        )
        self.after_response(turn, body, turn.blocks[start:], reducer)
        return turn

    def after_response(self, turn: Turn, body: dict[str, Any], new: list[Block], reducer: StreamReducer) -> None:
        """Called once a response's blocks ``new`` are in ``turn`` (``body`` is what was sent): a dialect
        that records something about them (the prefix its reasoning was made after) overrides this."""
