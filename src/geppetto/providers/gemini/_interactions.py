"""``InteractionsEngine``: Gemini's Interactions API (``POST /v1beta/interactions``), chained or stateless.

Chained mode keeps the conversation on the server and proves, before every request, that what the
server holds still equals the Turn: the shared anchor proof (:mod:`geppetto.providers._chain`, the one
the Responses engine uses) picks the latest interaction whose recorded prefix fingerprint matches, and
only the blocks after it are sent, with ``previous_interaction_id``. Whenever the proof fails, the
interaction is gone (an expired or unknown id: recovered once, by sending the whole Turn), or ``store`` is
off, the whole Turn goes, with a reason code in the log, the metrics and the final event.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ..._exceptions import NotFoundError, ProviderError, StreamError
from ..._json import dumps
from ...events import EventLog, EventMetadata, publish
from ...output import STRUCTURED_OUTPUT, wire_schema
from ...turns import BlockKind, Turn
from .._chain import chain_extra, tag_chain
from .._hints import key_hint
from .._http import HttpTransport
from .._http_errors import gemini_error_info
from .._landed import SAFE_TO_RESEND
from .._prefix_guard import asked_policy
from .._retry import RetryPolicy
from .._sse import SSEEvent
from .._stream_loop import StreamResult, run_stream
from .._streaming import TransportOwner, engine_transport, normalize_tools, request_tools, resolve_api_key
from ..settings import InteractionsSettings, SettingsOwner
from ._engine import API_VERSION, DEFAULT_BASE_URL
from ._interactions_background import open_interaction
from ._interactions_guard import guard_plan, stamp_interaction
from ._interactions_plan import InteractionPlan, plan_interaction, thinking_level_for
from ._interactions_steps import (
    PROVIDER,
    WIRE,
    InteractionsState,
    chain_seed,
    get_interactions_state,
    set_interactions_state,
)
from ._interactions_stream import ANCHORING_STATUSES, InteractionsReducer

if TYPE_CHECKING:
    from .._stateful import Validation

__all__ = ["InteractionsEngine"]

log = logging.getLogger("geppetto.providers.gemini.interactions")

_KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_CHOICES = {"auto": "auto", "none": "none", "required": "any"}
_COUNTED = frozenset({"input", "system_instruction", "tools", "response_format"})
"""The request fields a prompt's tokens come from (the rest are settings)."""


def _gone(exc: ProviderError, anchor: str) -> bool:
    """True for the service's answer that the interaction ``anchor`` is unknown or expired (a 404, or an
    error saying so, that names it or an interaction: another missing thing, a model say, is not this)."""
    text = str(exc.message or "").lower()  # the service's own words, not the URL the error names
    named = anchor.lower() in text or "interaction" in text
    return named and (isinstance(exc, NotFoundError) or "not found" in text or "expired" in text)


@dataclass
class _Call:
    """One ``run_inference``: its plan (replaced when the anchor turned out to be gone), its reducer."""

    plan: InteractionPlan
    reducer: InteractionsReducer
    requested: str
    start: int = 0
    """How many blocks the Turn had when the request was planned."""
    recovered: bool = False


class InteractionsEngine(SettingsOwner, TransportOwner):
    """An engine for Gemini's Interactions API, same shape as the other engines (``run_inference``).

    ``mode``: ``chained`` (the default with ``store``) or ``stateless`` (the whole Turn each request).
    ``store=False`` asks the server to keep nothing: every request sends the whole Turn (a chained Turn
    counts it as a ``store_off`` fallback). ``tools`` / ``tool_choice`` work as for the other engines;
    ``builtin_tools`` are Interactions tool entries sent as given (``{"type": "google_search"}``), their
    steps kept as ``other`` blocks and sent back unchanged. ``thinking_level`` (``minimal`` ... ``xhigh``)
    and ``thinking_summaries`` (``auto``/``none``) fill ``generation_config`` (``reasoning_effort``, as the
    other engines take it, picks the level when ``thinking_level`` is not given); thoughts become reasoning
    blocks whose ``signature`` is kept and replayed exactly. A Turn's structured-output config becomes
    ``response_format``. ``on_previous_not_found="raise"`` turns the automatic whole-Turn resend after an
    expired interaction into the service's error.

    ``background=True`` creates the interaction with ``background`` (``store`` must be on): a broken stream
    is resumed with ``GET /interactions/{id}?stream=true&last_event_id=...`` (at most ``max_resumes`` in a
    row that bring nothing new, then it is polled every ``poll_interval`` seconds until it stops running and
    read whole), cancelling the caller cancels the interaction (``POST
    /interactions/{id}/cancel``), and an interaction that did not complete never anchors a later request.

    ``prefix_policy`` (``"drop"``, ``"rewrite"``, ``"error"``) says what a request does with a replayed
    thought (or signed server-side tool step) whose prefix changed since the model made it (see
    :mod:`._interactions_guard`; ``rewrite`` drops too, and says so).

    ``metrics`` defaults to the process-wide chain metrics the Responses engine records into
    (:data:`geppetto.providers.openai_responses.metrics`): one set of counters for every stateful engine.
    """

    settings: InteractionsSettings
    provider = PROVIDER

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        mode: str | None = None,
        store: bool = True,
        tools: Iterable[Any] | None = None,
        tool_choice: str | None = None,
        builtin_tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_output_tokens: int | None = None,
        thinking_level: str | None = None,
        thinking_summaries: str | None = None,
        reasoning_effort: str | None = None,
        on_previous_not_found: str = "resend",
        background: bool = False,
        max_resumes: int = 5,
        poll_interval: float = 1.0,
        stream: bool = True,
        headers: dict[str, str] | None = None,
        http: HttpTransport | httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        metrics: Any = None,
        prefix_policy: str = "drop",
    ) -> None:
        settings = InteractionsSettings(
            mode=mode,
            store=store,
            tool_choice=tool_choice,
            builtin_tools=tuple(builtin_tools or ()),
            temperature=temperature,
            top_p=top_p,
            max_output_tokens=max_output_tokens,
            thinking_level=thinking_level,
            thinking_summaries=thinking_summaries,
            reasoning_effort=reasoning_effort,
            on_previous_not_found=on_previous_not_found,
            background=background,
            max_resumes=max_resumes,
            poll_interval=poll_interval,
            stream=stream,
            headers=headers,
            prefix_policy=prefix_policy,
        )
        self.model = model
        self.base_url = (base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = resolve_api_key(api_key, _KEY_ENV, "Gemini")
        self.mode, self.store = mode, store
        self.tools = normalize_tools(tools)
        self.tool_choice = tool_choice
        self.builtin_tools = [dict(t) for t in builtin_tools or ()]
        self.temperature, self.top_p, self.max_output_tokens = temperature, top_p, max_output_tokens
        self.thinking_level = thinking_level if thinking_level is not None else thinking_level_for(reasoning_effort)
        self.thinking_summaries = thinking_summaries
        self.on_previous_not_found = on_previous_not_found
        self.background, self.max_resumes, self.stream = background, max_resumes, stream
        self.poll_interval = poll_interval
        self.prefix_policy = prefix_policy
        self.headers = dict(headers or {})
        if metrics is None:
            from .._stateful import metrics as shared

            metrics = shared
        self.metrics = metrics
        self._transport = engine_transport(
            http, self.base_url, provider=self.provider, error_parser=gemini_error_info, retry=retry, timeout=timeout
        )
        self._owns_transport = not isinstance(http, HttpTransport)
        self.settings = settings

    # -- planning and the request body ----------------------------------------------------------------
    def _mode_for(self, state: InteractionsState | None) -> str:
        """The mode asked for: the engine's, else the Turn's, else chained (stateless with ``store=False``)."""
        return self.mode or (state.mode if state is not None else None) or ("chained" if self.store else "stateless")

    @staticmethod
    def _sent_mode(mode: str) -> str:
        """``mode``, or stateless while the kill switch ``GEPPETTO_CHAINING=off`` is set (as for the Responses
        engine; the Turn keeps the mode asked for)."""
        from .._stateful import CHAINING_ENV, chaining_enabled

        if mode == "chained" and not chaining_enabled():
            log.info(
                "interactions: chaining is off (%s=off): a stateless request instead of a chained one", CHAINING_ENV
            )
            return "stateless"
        return mode

    def plan(self, turn: Turn) -> InteractionPlan:
        """What :meth:`run_inference` would send for ``turn`` now, recording nothing (for inspection)."""
        state = get_interactions_state(turn)
        return plan_interaction(turn, self._sent_mode(self._mode_for(state)), state, store=self.store, metrics=None)

    def build_body(self, turn: Turn, plan: InteractionPlan) -> dict[str, Any]:
        """The JSON body of ``interactions.create`` for ``plan`` (public so tests and benchmarks can read it)."""
        body: dict[str, Any] = {"model": self.model, "input": plan.steps}
        if plan.previous_interaction_id:
            body["previous_interaction_id"] = plan.previous_interaction_id
        system = [b.text for b in turn.blocks if b.kind is BlockKind.SYSTEM and b.text]
        if system:  # interaction-scoped: sent with every request, never part of the stored history
            body["system_instruction"] = "\n\n".join(system)
        specs, choice = request_tools(self.tools, self.tool_choice, turn)
        tools = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
            for t in specs
        ]
        s = self.settings
        if tools or s.builtin_tools:
            body["tools"] = tools + list(s.builtin_tools)
        config = self._generation_config(choice)
        if config:
            body["generation_config"] = config
        output = STRUCTURED_OUTPUT.get(turn.data)
        if output is not None:
            fmt = {"type": "text", "mime_type": "application/json", "schema": wire_schema(output, "gemini")}
            body.update(response_format=fmt, response_mime_type="application/json")
        if not s.store:
            body["store"] = False
        if s.background:
            body["background"] = True
        body["stream"] = s.stream
        return body

    count_is_estimate = True
    """The Interactions API has no counting endpoint: :meth:`count_tokens` estimates."""

    async def count_tokens(self, turn: Turn) -> int:
        """An estimate of the input tokens of the request for ``turn`` (the Interactions API has no counting
        endpoint; :attr:`count_is_estimate` is True): about four characters a token of the whole Turn's
        steps, system instruction, tools and response format as a stateless request would send them. A
        chained request sends fewer, but the model reads the held history too, so the whole Turn is what
        it costs. Nothing is sent."""
        plan = plan_interaction(turn, "stateless", None, store=self.store, metrics=None)
        body = self.build_body(turn, plan)
        counted = {k: v for k, v in body.items() if k in _COUNTED}
        return len(dumps(counted)) // 4

    def _generation_config(self, choice: str | None) -> dict[str, Any]:
        s = self.settings
        config: dict[str, Any] = {
            k: v
            for k, v in (
                ("temperature", s.temperature),
                ("top_p", s.top_p),
                ("max_output_tokens", s.max_output_tokens),
                ("thinking_level", self.thinking_level),  # derived from reasoning_effort when not given
                ("thinking_summaries", s.thinking_summaries),
            )
            if v is not None
        }
        if choice is not None:
            config["tool_choice"] = _CHOICES.get(choice) or {"allowed_tools": {"mode": "any", "tools": [choice]}}
        return config

    def _auth(self) -> dict[str, str]:
        return {**self.headers, "x-goog-api-key": str(self.api_key)}

    # -- the Engine protocol ------------------------------------------------------------------------
    async def run_inference(self, turn: Turn) -> Turn:
        """Send the Turn (or the steps after its anchor), append the interaction's blocks, tag them, return it."""
        state = get_interactions_state(turn)
        requested = self._mode_for(state)
        plan = plan_interaction(turn, self._sent_mode(requested), state, store=self.store, metrics=self.metrics)
        guard_plan(turn, plan, policy=asked_policy(turn, self.prefix_policy), model=self.model)
        call = _Call(plan, InteractionsReducer(), requested, len(turn.blocks))
        return await run_stream(
            turn,
            provider=self.provider,
            model=self.model,
            open_stream=lambda: self._events(turn, call),
            reducer=call.reducer,
            key=key_hint(_KEY_ENV, sent=bool(self.api_key)),
            output=STRUCTURED_OUTPUT.get(turn.data),
            on_result=lambda result, meta: self._record(turn, call, result, meta),
        )

    def _count(self, plan: InteractionPlan) -> None:
        self.metrics.request(plan.mode, len(plan.steps), full=plan.full)
        if plan.fallback:
            self.metrics.fallback(plan.fallback)
            log.info("interactions: sending the whole Turn (%s): %s", plan.fallback, plan.detail)

    async def _events(self, turn: Turn, call: _Call) -> AsyncGenerator[SSEEvent, None]:
        """The interaction's events; an expired or unknown anchor is answered once with the whole Turn."""
        self._count(call.plan)
        try:
            async with aclosing(open_interaction(self, self.build_body(turn, call.plan), call.reducer, turn)) as events:
                async for event in events:
                    yield event
            return
        except ProviderError as exc:
            anchor = call.plan.previous_interaction_id
            if isinstance(exc, StreamError) or call.reducer.last_event_id or not anchor or not _gone(exc, anchor):
                raise
            if self.on_previous_not_found == "raise":
                raise
            detail = f"interaction {anchor} is gone ({exc})"
        log.warning("interactions: %s; sending the whole Turn once", detail)
        publish(
            EventLog(EventMetadata(), level="warning", message=detail, fields={"fallback": "interaction_not_found"})
        )
        call.plan.base = None  # what the Turn continued is gone with it
        call.plan = call.plan.whole(turn, "interaction_not_found", detail)
        guard_plan(turn, call.plan, policy=asked_policy(turn, self.prefix_policy), model=self.model)
        call.recovered = True
        self._count(call.plan)
        async with aclosing(open_interaction(self, self.build_body(turn, call.plan), call.reducer, turn)) as events:
            async for event in events:
                yield event

    def _record(self, turn: Turn, call: _Call, result: StreamResult, meta: EventMetadata) -> None:
        """Tag the interaction's blocks (the proof's fingerprint at their end), keep the state, and say in the
        final event how the request carried the context."""
        plan, iid, status = call.plan, result.response_id, call.reducer.status
        start = len(turn.blocks) - len(result.blocks)
        stamp_interaction(turn, start, plan.prefix if start == call.start else None)
        if not iid:
            log.warning("interactions: the interaction carried no id; its blocks cannot anchor a later request")
        else:
            refused = None if status in ANCHORING_STATUSES or not status else f"the interaction ended {status}"
            if start != call.start:  # another run appended to this Turn meanwhile: the server's context is not it
                log.warning(
                    "interactions: %d block(s) were added to the Turn while interaction %s ran; its blocks will "
                    "not anchor a later request. Run one inference per Turn at a time (or give each its own "
                    "turn.clone())",
                    start - call.start,
                    iid,
                )
                refused = "concurrent inference on the same Turn"
            seed = chain_seed(InteractionsState(base=plan.base))
            tag_chain(
                turn,
                start,
                iid,
                WIRE,
                seed=seed,
                prefix=plan.prefix,
                refused=refused,
                stored=self.store,
                log=log,
                label="interactions",
            )
            if self.store and start == call.start:
                set_interactions_state(turn, InteractionsState(call.requested, iid, plan.base))
        meta.extra["interaction_id"] = iid
        meta.extra.update(
            chain_extra(
                mode=plan.mode,
                anchor=plan.previous_interaction_id or "",
                items=len(plan.steps),
                full=plan.full,
                fallback=plan.fallback,
                detail=plan.detail,
                sent=plan.blocks,
            )
        )

    async def validate(self, turn: Turn) -> Validation:
        """Read the history the server holds behind the Turn's anchor and compare it with the Turn (see
        ``_interactions_validate``); on a mismatch the next request sends the whole Turn."""
        from ._interactions_validate import validate_interactions  # the Responses engine's result type

        return await validate_interactions(self, turn)

    # -- the interaction resource ---------------------------------------------------------------------
    async def get(self, interaction_id: str) -> dict[str, Any]:
        """``GET /interactions/{id}``: the stored interaction."""
        answer: dict[str, Any] = await self._transport.request_json(
            "GET", f"{API_VERSION}/interactions/{interaction_id}", headers=self._auth(), error_parser=gemini_error_info
        )
        return answer

    async def cancel(self, interaction_id: str) -> dict[str, Any]:
        """``POST /interactions/{id}/cancel``: stop a background interaction."""
        answer: dict[str, Any] = await self._transport.request_json(
            "POST",
            f"{API_VERSION}/interactions/{interaction_id}/cancel",
            {},
            headers=self._auth(),
            error_parser=gemini_error_info,
            landed=SAFE_TO_RESEND,  # a second cancel changes nothing
        )
        return answer

    async def delete(self, interaction_id: str) -> None:
        """``DELETE /interactions/{id}``: forget a stored interaction (a later request chained on it then
        sends the whole Turn)."""
        await self._transport.request_json(
            "DELETE",
            f"{API_VERSION}/interactions/{interaction_id}",
            headers=self._auth(),
            error_parser=gemini_error_info,
        )
