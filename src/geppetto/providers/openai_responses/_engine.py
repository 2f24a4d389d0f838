"""``ResponsesEngine``: OpenAI Responses over the shared transport, in stateless, chained or conversation mode.
Its options are one checked value, ``ResponsesSettings`` (``providers/settings.py``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import httpx

from geppetto._exceptions import AuthenticationError, ConfigurationError, GeppettoError, ProviderError, StreamError
from geppetto.events import EventError, EventStart, metadata_for, publish
from geppetto.output import STRUCTURED_OUTPUT, StructuredOutputConfig
from geppetto.providers._hints import key_hint, too_large_hint, with_hint
from geppetto.providers._http import HttpTransport
from geppetto.providers._http_errors import openai_error_info
from geppetto.providers._retry import RetryPolicy
from geppetto.providers._streaming import TransportOwner, engine_transport, is_openai_reasoning_model, resolve_api_key
from geppetto.providers._websocket import CONNECTION_STATE_LOST, make_socket
from geppetto.providers.settings import ResponsesSettings, SettingsOwner
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    Block,
    Turn,
)

from .._prefix_guard import asked_policy
from .._stateful import CHAINING_ENV, ResponsesMetrics, Validation, chaining_enabled
from .._stateful import metrics as shared_metrics
from ._answer import StreamState, record
from ._context import ValidatedLinks, append_system_changes, compact_blocks, count_turn_tokens, validate_server_context
from ._evidence import Endpoint, Verdict, VerdictStore
from ._request import Plan, PromptCacheKey, build_body, guard_plan, plan_full, plan_request
from ._send import Api, send_with_fallbacks
from ._state import ConversationState, get_state, turn_ids
from ._tools import EngineTools

__all__ = ["ResponsesEngine"]

log = logging.getLogger("geppetto.providers.openai_responses")


DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ResponsesEngine(SettingsOwner, TransportOwner):
    """An engine for ``POST /v1/responses`` that always streams.

    Mode comes from the engine's ``mode``, else the Turn's ``ConversationState``, else ``chained``
    (``stateless`` when ``store=False``). Chained sends ``previous_response_id`` = the anchor and only
    the blocks after it; conversation sends the conversation id and the same delta; stateless sends
    the whole Turn. Whenever server state cannot be proven to equal the Turn, the whole Turn is sent
    (logged, counted in ``metrics``). ``instructions_mode=True`` sends system blocks as ``instructions``
    on every request instead of as stored input messages. ``on_previous_not_found="raise"`` turns the
    automatic full resend on an expired parent into an error.

    ``tools``: ``@geppetto.tool`` functions, ``ToolDefinition`` objects, dicts ``{name, description,
    parameters, strict?}`` or hosted tools ``{"type": "web_search", ...}``; inside a tool loop the
    tools it offers are added. ``tool_choice``: ``"auto"``, ``"none"``, ``"required"``, a tool name or
    a Responses ``tool_choice`` dict; None takes the turn's ``ToolConfig`` choice. ``reasoning_effort``
    is one of ``none, minimal, low, medium, high, xhigh, max``. ``metrics`` defaults to the process-wide
    :data:`~geppetto.providers.openai_responses.metrics`. ``validate_every=N`` compares the server's
    stored context with the Turn after every N stateful requests (:meth:`validate`; opt-in, it reads the
    chain's new links or the conversation's items). ``stream=False`` asks for the whole Response in one
    JSON answer instead of an event stream (the same blocks and events come of it, without deltas).
    ``compact_threshold=N`` (at least 1000 tokens) sends
    ``context_management`` so the server compacts its copy of the context inside a request that passes
    ``N`` tokens; its ``compaction`` item becomes a block of that response (the next request chains on
    it as on any other) and a whole-Turn request replays from the latest one (docs/responses.md).
    ``prompt_cache_key``: True (the default) sends one key per session, derived from the Turn's session
    id; a string sends that key; a callable ``(turn) -> str | None`` chooses; None or False sends none.
    ``prompt_cache_retention`` (``in_memory`` or ``24h``) is passed through.
    ``delete_replaced_conversations=True`` deletes a conversation the engine replaced with a new one
    (it no longer matched the Turn); by default it is left on the server (``docs/decisions.md``).

    Whether the endpoint keeps state is judged from evidence (docs/responses.md, "Servers other than
    OpenAI"): an exact echo of ``previous_response_id`` proves it; without one, the answer's usage and at
    most one extra request per endpoint decide, and the verdict is remembered per base URL and model
    (:attr:`endpoint_verdict`; in ``verdict_store`` too, a session store, which ``Session`` attaches).
    ``endpoint_verdict=`` seeds a known verdict (``geppetto probe``'s). A server found to ignore the stored
    context is caught before its answer is recorded: the whole Turn is sent again (fallback
    ``server_ignores_state``) and the engine stays stateless.

    ``background=True`` sends ``background``, ``store`` and ``stream`` (docs/responses.md, "Background responses"):
    a broken stream is resumed by ``sequence_number`` (``max_resumes`` resumes in a row that bring nothing new, then
    the response is polled every ``poll_interval`` seconds), cancelling the caller cancels the response, and a
    response that did not finish never anchors a later request.

    ``prefix_policy`` is what happens to a replayed reasoning item whose prefix changed since the model made
    it (OpenAI would drop it silently; see :mod:`geppetto.providers._prefix_guard`): ``"drop"`` (default)
    leaves it out with a warning naming the middleware and counts it, ``"error"`` raises
    :class:`~geppetto.PrefixChangedError`, ``"rewrite"`` drops too (this API has no append-only form of a
    changed prefix) and says so. ``"append"`` (or ``system_prompt(text, policy="append")``) sends a system
    prompt changed after a response as an appended developer message (the system block keeps the text the
    server holds), so the request still chains and its reasoning stays valid; what else changed is dropped,
    and so is everything under ``instructions_mode``, and the report says so.

    One HTTP transport serves every request of the engine (one connection pool, made on first use):
    ``http`` is an ``httpx.AsyncClient`` to share or a ready
    :class:`~geppetto.providers._http.HttpTransport` (which other engines may share: the key goes with
    each request, never onto the transport); ``retry`` tunes retries; ``timeout`` (seconds, or an
    ``httpx.Timeout``; default 600 s) bounds each request and each wait for stream data (a given client
    or transport keeps its own). ``await engine.aclose()`` or ``async with engine:`` closes the client the engine made; a given client or transport stays open.

    ``transport="websocket"`` sends each create request as ``response.create`` over one WebSocket connection
    (``geppetto.providers._websocket``; docs/engines.md); ``store=False`` then chains on the connection's state,
    and an anchor whose connection ended is resent whole (fallback ``connection_state_lost``).
    """

    settings: ResponsesSettings
    provider = "openai"
    server_ignores_state: bool = False
    """Set when the endpoint was found not to keep state (``endpoint_verdict``); the engine then stays
    stateless."""
    _output: tuple[Turn, StructuredOutputConfig | None] | None = None
    _since_validation: int = 0

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        mode: str | None = None,
        store: bool = True,
        instructions_mode: bool = False,
        tools: Sequence[Any] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        text_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_output_tokens: int | None = None,
        include: Sequence[str] | None = None,
        on_previous_not_found: str = "resend",
        http: HttpTransport | httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        metrics: ResponsesMetrics | None = None,
        validate_every: int | None = None,
        delete_replaced_conversations: bool = False,
        compact_threshold: int | None = None,
        prompt_cache_key: PromptCacheKey = True,
        prompt_cache_retention: str | None = None,
        background: bool = False,
        poll_interval: float = 1.0,
        max_resumes: int = 5,
        stream: bool = True,
        prefix_policy: str = "drop",
        endpoint_verdict: Verdict | None = None,
        verdict_store: VerdictStore | None = None,
        transport: Any = "http",
    ) -> None:
        # the one checked value of every option (a profile's and -o's too); the attributes below mirror it
        settings = ResponsesSettings(
            mode=mode,
            store=store,
            instructions_mode=instructions_mode,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            reasoning_effort=reasoning_effort,
            reasoning_summary=reasoning_summary,
            text_format=text_format,
            temperature=temperature,
            top_p=top_p,
            max_output_tokens=max_output_tokens,
            include=tuple(include or ()),
            on_previous_not_found=on_previous_not_found,
            validate_every=validate_every,
            delete_replaced_conversations=delete_replaced_conversations,
            compact_threshold=compact_threshold,
            prompt_cache_key=prompt_cache_key,
            prompt_cache_retention=prompt_cache_retention,
            background=background,
            poll_interval=poll_interval,
            max_resumes=max_resumes,
            stream=stream,
            prefix_policy=prefix_policy,
            transport=transport,
        )
        self.model = model
        self._connect(api_key, base_url, http, retry, timeout)
        self._socket = make_socket(transport, self.base_url, self._headers)
        self.mode, self.store, self.instructions_mode = mode, store, instructions_mode
        self._tools = EngineTools(tools)
        self.tool_choice, self.parallel_tool_calls = tool_choice, parallel_tool_calls
        self.reasoning_effort, self.reasoning_summary = reasoning_effort, reasoning_summary
        self.text_format, self.temperature, self.top_p = text_format, temperature, top_p
        self.max_output_tokens, self.include = max_output_tokens, list(include or [])
        self.on_previous_not_found = on_previous_not_found
        self.metrics = metrics if metrics is not None else shared_metrics
        self.validate_every = validate_every
        self.delete_replaced_conversations = delete_replaced_conversations
        self.compact_threshold = compact_threshold
        self.prompt_cache_key, self.prompt_cache_retention = prompt_cache_key, prompt_cache_retention
        self.background, self.poll_interval, self.max_resumes = background, poll_interval, max_resumes
        self.stream = stream
        self.prefix_policy = prefix_policy
        self._validated = ValidatedLinks()
        if endpoint_verdict is not None and not isinstance(endpoint_verdict, Verdict):
            raise ConfigurationError(
                "endpoint_verdict= takes a geppetto.providers.openai_responses.Verdict (e.g. "
                f"Verdict.from_dict(probe_json)), got {type(endpoint_verdict).__name__}"
            )
        self._endpoint = Endpoint(self.base_url, model, seed=endpoint_verdict, store=verdict_store)
        self._sync_verdict()
        self.settings = settings

    @property
    def endpoint_verdict(self) -> Verdict | None:
        """What this engine's endpoint (base URL and model) is known to do with ``previous_response_id``
        (None: nothing learned yet). Set it to seed a verdict (``geppetto probe``'s); see docs/responses.md."""
        return self._endpoint.current()

    @endpoint_verdict.setter
    def endpoint_verdict(self, verdict: Verdict | None) -> None:
        if verdict is None:
            self._endpoint.memory.forget(self._endpoint.base_url, self.model)
            self.server_ignores_state = False
            return
        self._endpoint.memory.put(self._endpoint.base_url, self.model, verdict)
        self._sync_verdict()

    def use_verdict_store(self, store: VerdictStore) -> None:
        """Remember endpoint verdicts in ``store`` (a ``Session`` with such a store calls this): a new
        process reads the verdict there instead of learning it again."""
        self._endpoint.attach(store)

    def _sync_verdict(self) -> None:
        verdict = self._endpoint.current()
        if verdict is not None and verdict.ignored:
            self.server_ignores_state = True

    def _connect(
        self,
        api_key: str | None,
        base_url: str | None,
        http: HttpTransport | httpx.AsyncClient | None,
        retry: RetryPolicy | None,
        timeout: float | httpx.Timeout | None,
    ) -> None:
        """The base URL, the key's header and the one transport of every request (made here unless ``http`` is
        a transport)."""
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url == DEFAULT_BASE_URL and not isinstance(http, HttpTransport):
            # OpenAI itself needs a key; compatible servers and a given transport may not
            key = resolve_api_key(api_key, ("OPENAI_API_KEY",), "OpenAI")
        self._headers = {"authorization": f"Bearer {key}"} if key else {}
        self._transport = engine_transport(
            http, self.base_url, provider=self.provider, error_parser=openai_error_info, retry=retry, timeout=timeout
        )
        self._owns_transport = not isinstance(http, HttpTransport)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The engine's own tools as sent on the wire (a tool loop's tools are added per request)."""
        return self._tools.definitions()

    def _api(self) -> Api:
        """This engine's view of its transport: its key on every request, OpenAI's error parser."""
        return Api(self._transport, self._headers, whole=not self.stream, socket=self._socket)

    async def compact(self, blocks: list[Block], turn: Turn | None = None) -> list[Block]:
        """``POST /responses/compact`` over ``blocks``: what replaces them, as blocks (the user messages
        the API keeps, and its opaque ``compaction`` item as an ``other`` block that this engine replays
        as it came). A compactor for :func:`geppetto.middleware.compaction.compaction`; other engines
        cannot read the ``compaction`` item, so use it on Responses sessions only.

        By reference when it can: if ``blocks`` are the ``turn``'s first blocks and a stored response of
        the Turn provably holds them (the anchor proof), the request names it as ``previous_response_id``
        and sends only the blocks after it (none when it ends where they end); else the blocks are sent.
        The ``response.compaction`` id it answers with is never chained on."""
        return await compact_blocks(self, blocks, turn)

    async def count_tokens(self, turn: Turn) -> int:
        """The input tokens the next request for ``turn`` would read, from ``POST /responses/input_tokens``.

        The Turn is planned as a request would be: when it is chained (or in a conversation) the count
        names the anchor (or the conversation) and sends only the blocks after it, so the server counts
        the prefix it holds without it being sent again; a server that no longer holds the anchor gets
        the whole Turn."""
        return await count_turn_tokens(self, turn)

    # -- request body -----------------------------------------------------------------------------
    def is_reasoning_model(self) -> bool:
        """True for o1/o3/o4/gpt-5 families or when a reasoning effort is set (no temperature/top_p)."""
        return is_openai_reasoning_model(self.model) or self.reasoning_effort is not None

    def build_body(self, turn: Turn, plan: Plan) -> dict[str, Any]:
        """The JSON body for ``plan`` (public so tests and benchmarks can inspect it)."""
        return build_body(self, turn, plan, self._output_of(turn))

    def _output_of(self, turn: Turn) -> StructuredOutputConfig | None:
        """The turn's structured-output config, read once per request (a fallback builds the body again)."""
        kept = self._output
        if kept is not None and kept[0] is turn:
            return kept[1]
        output = STRUCTURED_OUTPUT.get(turn.data)
        self._output = (turn, output)
        return output

    def guard_plan(self, turn: Turn, plan: Plan) -> None:
        """The prefix guard (``prefix_policy``): leave reasoning whose prefix changed out of ``plan``."""
        policy = asked_policy(turn, self.prefix_policy)
        guard_plan(turn, plan, include_system=not self.instructions_mode, policy=policy, model=self.model)
        if plan.stale:
            self.metrics.reasoning_dropped(len(plan.stale), policy)

    # -- planning ---------------------------------------------------------------------------------
    def _mode_for(self, state: ConversationState | None) -> str:
        chains = self.store or self._socket is not None  # over a socket, store=False chains on the connection
        mode = self.mode or (state.mode if state else None) or ("chained" if chains else "stateless")
        if not self.store and mode != "stateless" and not (self._socket is not None and mode == "chained"):
            raise ConfigurationError(
                f"the Turn asks for mode {mode!r} but the engine has store=False; "
                "pass store=True or set the Turn's ConversationState(mode='stateless')"
            )
        return mode

    def _sent_mode(self, turn: Turn, mode: str, state: ConversationState | None) -> str:
        """``mode``, or ``stateless`` while the kill switch ``GEPPETTO_CHAINING=off`` is set (logged)."""
        if mode == "stateless" or chaining_enabled():
            return mode
        lost = ""
        if state is not None and state.base:
            lost = f"; the context before this Turn (base {state.base}) is not carried over"
        log.info(
            "responses: chaining is off (%s=off): a stateless request instead of a %s one (%s)%s",
            CHAINING_ENV,
            mode,
            turn_ids(turn),
            lost,
        )
        return "stateless"

    def _on_socket(self, turn: Turn, plan: Plan) -> Plan:
        """``store=False`` over a WebSocket: an anchor whose connection ended is gone with it (the whole Turn)."""
        lost = None if self.store or self._socket is None else self._socket.lost(turn, plan.previous_response_id)
        if not lost:
            return plan
        include = not self.instructions_mode
        return plan_full(turn, include_system=include, fallback=CONNECTION_STATE_LOST, detail=lost, prefix=plan.prefix)

    def plan(self, turn: Turn) -> Plan:
        """What :meth:`run_inference` would send for ``turn`` now (mode, anchor, blocks), by the code it plans
        with, recording nothing: ``geppetto inspect`` and the web inspector show this."""
        state = get_state(turn)
        plan = plan_request(
            turn,
            self._sent_mode(turn, self._mode_for(state), state),
            state,
            include_system=not self.instructions_mode,
            store=self.store,
            ignores_state=self.server_ignores_state,
            metrics=None,
        )
        return self._on_socket(turn, plan)

    # -- the Engine protocol ----------------------------------------------------------------------
    async def run_inference(self, turn: Turn) -> Turn:
        """Send the Turn (or its delta), append the response's blocks in output order, tag them, return the Turn."""
        self._output = None  # the config is read afresh for every request
        state = get_state(turn)
        requested = self._mode_for(state)
        mode = self._sent_mode(turn, requested, state)
        if not self.instructions_mode and asked_policy(turn, self.prefix_policy) == "append":
            append_system_changes(turn)  # a changed system prompt goes appended: anchor and reasoning hold
        meta = metadata_for(turn, self.provider, self.model)
        publish(EventStart(meta))
        start = len(turn.blocks)
        streams: list[StreamState] = []
        try:
            if self._endpoint.pending and mode != "stateless":
                # a verdict store is read here, not in __init__: reading it is async, and a stateless
                # request never needs what it says
                await self._endpoint.load()
                self._sync_verdict()
            plan = plan_request(
                turn,
                mode,
                state,
                include_system=not self.instructions_mode,
                store=self.store,
                ignores_state=self.server_ignores_state,
                metrics=self.metrics,
            )
            plan = self._on_socket(turn, plan)
            plan = await send_with_fallbacks(self, self._api(), turn, plan, streams)
        except StreamError as exc:
            for block in (
                streams[-1].finished_text_blocks() if streams else []
            ):  # only finished messages; never a tool call
                BLOCK_META_PROVIDER.set(block.metadata, self.provider)
                turn.append(block)
            publish(EventError(meta, str(exc), type(exc).__name__))
            raise
        except AuthenticationError as exc:
            hinted = with_hint(exc, key_hint(("OPENAI_API_KEY",), sent=bool(self._headers)))
            publish(EventError(meta, str(hinted), type(hinted).__name__))
            raise hinted from exc
        except ProviderError as exc:
            hinted = too_large_hint(exc)
            publish(EventError(meta, str(hinted), type(hinted).__name__))
            if hinted is exc:
                raise
            raise hinted from exc
        except GeppettoError as exc:
            publish(EventError(meta, str(exc), type(exc).__name__))
            raise
        # the state records the mode asked for, not the one sent: once GEPPETTO_CHAINING is on again, the
        # next request chains as the Turn asked
        record(self, turn, start, plan, streams[-1], requested, state)
        if plan.replaced and self.delete_replaced_conversations:
            await self._delete_replaced(turn, plan)
        if self.validate_every and mode != "stateless":
            self._since_validation += 1
            if self._since_validation >= self.validate_every:
                self._since_validation = 0
                try:
                    await self.validate(turn, reread=False)
                except (ProviderError, httpx.HTTPError) as exc:  # the answer stands; the next check tries again
                    log.warning("responses: validation with the server failed: %s", exc)
                    self.metrics.validation("error")
        return turn

    async def _delete_replaced(self, turn: Turn, plan: Plan) -> None:
        """``delete_replaced_conversations=True``: delete the conversation a new one replaced (after the
        answer was recorded: a failure is logged and the answer stands)."""
        try:
            await self._api().delete(f"conversations/{plan.replaced}")
        except (ProviderError, httpx.HTTPError) as exc:
            log.warning(
                "responses: could not delete conversation %s, replaced by %s: %s (%s)",
                plan.replaced,
                plan.conversation_id,
                exc,
                turn_ids(turn),
            )
            return
        log.info("responses: deleted conversation %s, replaced by %s", plan.replaced, plan.conversation_id)

    async def validate(self, turn: Turn, *, reread: bool = True) -> Validation:
        """Read the context the server holds at the Turn's anchor and compare it with the Turn (see
        ``validate_server_context``); on a mismatch the next request sends the whole Turn. ``validate_every=N`` runs
        it after every N chained or conversation requests with ``reread=False``: links of a chain that an earlier
        check matched are not read again. Called on demand it reads the whole chain."""
        state = get_state(turn)
        return await validate_server_context(
            self._api(),
            turn,
            state,
            self._mode_for(state),
            include_system=not self.instructions_mode,
            metrics=self.metrics,
            links=self._validated,
            reread=reread,
        )
