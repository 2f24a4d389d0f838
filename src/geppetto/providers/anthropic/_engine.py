"""ClaudeEngine: the Anthropic Messages endpoint."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from ...output import READ_FROM_TURN, STRUCTURED_OUTPUT, StructuredOutputConfig
from ...turns import Block, Turn
from .._engine_base import StreamingEngine
from .._files import claude_files_beta
from .._http import HttpTransport
from .._http_errors import anthropic_error_info
from .._retry import RetryPolicy
from .._sse import SSEEvent
from .._stream_loop import StreamReducer
from .._streaming import ToolSpec, budget_for_effort
from ..settings import ClaudeSettings
from ._binding import BINDING_BETA, record_response, report_transformations, with_beta
from ._blocks import PROVIDER, message_events
from ._cache import add_cache_breakpoints
from ._container import keep_container, name_container
from ._diagnostics import ask_diagnostics, check_diagnostics
from ._dialect import ANTHROPIC_VERSION, answer_tool, build_messages, build_request
from ._stream import ClaudeStreamReducer

__all__ = ["DEFAULT_BASE_URL", "ClaudeEngine"]

DEFAULT_BASE_URL = "https://api.anthropic.com"

_COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config"})
"""The fields ``count_tokens`` takes of a Messages request (it refuses ``stream``, ``max_tokens`` and sampling)."""


class ClaudeEngine(StreamingEngine):
    """Streams one Messages request per ``run_inference`` and appends the answer to the turn.

    ``base_url`` is the bare host like the Anthropic SDK's (default ``https://api.anthropic.com``, or
    ``ANTHROPIC_BASE_URL``); the engine posts to ``{base_url}/v1/messages``. The key comes from ``api_key``
    or ``ANTHROPIC_API_KEY``. ``thinking_budget`` turns extended thinking on with that many budget tokens;
    thinking blocks come back as reasoning blocks with their signature and are replayed unmodified.
    ``prompt_cache``: ``cache_control`` breakpoints on the system prompt and tools and on the end of the
    prefix (see :mod:`geppetto.providers.anthropic._cache`): ``"auto"`` (default) once the prompt is long
    enough to be cached, ``True`` always, ``False`` never.
    ``reasoning_effort`` (``minimal``/``low``/``medium``/``high``) picks a budget when ``thinking_budget`` is not given.
    ``tools``, ``tool_choice``, ``http``, ``retry`` and ``timeout`` work as in :class:`~geppetto.providers.openai_chat.ChatEngine`.
    ``builtin_tools`` enables Claude's server tools, each as Claude's own tool definition
    (``{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}``, ``code_execution_20250825``,
    ``web_fetch_20250910``...); their calls and results come back as ``other`` blocks typed under
    ``payload["builtin"]`` and are sent back as they came. ``stream=False`` asks for the whole Message in
    one JSON answer instead of an event stream (the same blocks and events come of it).
    ``prefix_policy`` (``"drop"``, default; ``"rewrite"``; ``"append"``; ``"error"``) is what happens to
    replayed thinking whose prefix (system, tools, earlier messages) changed since Claude made it (see
    :mod:`geppetto.providers._prefix_guard`): left out with a warning, kept by sending the change
    append-only where it can be, or a :class:`~geppetto.PrefixChangedError`. ``"append"`` sends a changed
    system prompt as an appended system message on a model that takes one
    (:func:`._binding.takes_system_messages`) and drops, saying so, on any other.
    ``cache_diagnostics=True`` asks Claude on every request where it diverged from the previous answer's
    request (``diagnostics.previous_message_id``) and checks that against what geppetto changed itself:
    the answer and the verdict are kept on the answer's blocks (``geppetto.cache_diagnostics@v1``), a
    disagreement is logged and counted (:mod:`geppetto.providers._disagreements`).
    """

    settings: ClaudeSettings
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
        prompt_cache: bool | str = "auto",
        headers: dict[str, str] | None = None,
        http: HttpTransport | httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        stream: bool = True,
        builtin_tools: Iterable[dict[str, Any]] | None = None,
        prefix_policy: str = "drop",
        cache_diagnostics: bool = False,
    ) -> None:
        settings = ClaudeSettings(
            tool_choice=tool_choice,
            temperature=temperature,
            max_tokens=max_tokens,
            headers=headers,
            stream=stream,
            thinking_budget=thinking_budget,
            reasoning_effort=reasoning_effort,
            prompt_cache=prompt_cache,
            builtin_tools=tuple(builtin_tools or ()),
            prefix_policy=prefix_policy,
            cache_diagnostics=cache_diagnostics,
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
        self.cache_diagnostics = bool(cache_diagnostics)
        self.prefix_policy = prefix_policy
        self.thinking_budget = budget_for_effort(thinking_budget, reasoning_effort)
        self.prompt_cache = prompt_cache
        if thinking_budget is not None and tool_choice not in (None, "auto", "none"):
            # raises the ConfigurationError that names the fix, at construction (the tool may be a Session's)
            build_request(Turn(), model=model, tools=[], tool_choice=tool_choice, thinking_budget=thinking_budget)
        self.settings = settings

    def request_body(
        self, turn: Turn, tools: list[ToolSpec], tool_choice: str | None, output: Any = READ_FROM_TURN
    ) -> dict[str, Any]:
        s = self.settings
        body = build_request(
            turn,
            output=output,
            model=self.model,
            tools=tools,
            tool_choice=tool_choice,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            thinking_budget=self.thinking_budget,  # derived from reasoning_effort when not given
            builtin_tools=list(s.builtin_tools),
            stream=s.stream,
            prefix_policy=s.prefix_policy,
        )
        body = add_cache_breakpoints(body, s.prompt_cache)
        name_container(turn, body)
        if s.cache_diagnostics:
            ask_diagnostics(turn, body)
        return body

    def endpoint(self) -> tuple[str, dict[str, str] | None]:
        return "v1/messages", None

    count_is_estimate = False

    async def count_tokens(self, turn: Turn) -> int:
        """The input tokens of the request for ``turn``, counted by ``POST /v1/messages/count_tokens``."""
        body = self.build_request(turn, STRUCTURED_OUTPUT.get(turn.data))
        counted = {k: v for k, v in body.items() if k in _COUNT_FIELDS}
        if isinstance(counted.get("thinking"), dict):  # a beta field a count does not need (nor its header)
            counted["thinking"] = {k: v for k, v in counted["thinking"].items() if k != "block_binding"}
        answer = await self.count_request("v1/messages/count_tokens", counted)
        return int(answer["input_tokens"])

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": str(self.api_key), "anthropic-version": ANTHROPIC_VERSION}

    def body_headers(self, body: dict[str, Any]) -> dict[str, str]:
        headers = claude_files_beta(body, self.headers)
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and "block_binding" in thinking:
            headers = with_beta(headers or self.headers, BINDING_BETA)
        return headers

    def after_response(self, turn: Turn, body: dict[str, Any], new: list[Block], reducer: StreamReducer) -> None:
        origin: dict[int, Block] = {}
        built = build_messages(turn, origin)
        record_response(turn, body, new, built, origin, policy=self.prefix_policy)
        if isinstance(reducer, ClaudeStreamReducer):
            report_transformations(turn, reducer.input_transformations, self.model)
            keep_container(new, reducer.container)
            if self.cache_diagnostics:
                check_diagnostics(
                    turn, body, new, reducer.response_id, reducer.diagnostics, reducer.diagnosed, self.model
                )

    def reducer(self) -> StreamReducer:
        return ClaudeStreamReducer()

    def whole_events(self, answer: Any) -> list[SSEEvent]:
        return message_events(answer if isinstance(answer, dict) else {})

    def answer_tool(self, output: StructuredOutputConfig | None) -> str | None:
        return answer_tool(output, self.model)
