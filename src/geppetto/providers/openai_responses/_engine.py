"""``ResponsesEngine``: OpenAI Responses over the shared transport, in stateless, chained or conversation mode."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, cast

import httpx

from geppetto._exceptions import (
    AuthenticationError,
    ConfigurationError,
    GeppettoError,
    NotFoundError,
    PreviousResponseNotFoundError,
    StreamError,
)
from geppetto.events import EventError, EventFinal, EventStart, EventToolCallRequested, metadata_for, publish
from geppetto.providers._http import HttpTransport, SSEEvent, openai_error_info
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_STOP_REASON,
    TURN_META_USAGE,
    BlockKind,
    Turn,
)

from ._anchors import tag_blocks
from ._metrics import metrics
from ._plan import CONVERSATION_ITEMS_PER_CALL, Plan, plan_chained, plan_conversation, plan_full
from ._state import MODES, ConversationState, get_state, set_state
from ._stream import StreamState, consume_stream, stop_reason_of, usage_of

__all__ = ["ResponsesEngine"]

log = logging.getLogger("geppetto.providers.openai_responses")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


class _StateIgnored(GeppettoError):
    """The server answered without echoing previous_response_id / conversation: it ignores server state."""


def _tool_dict(tool: Any) -> dict[str, Any]:
    if isinstance(tool, dict):
        if tool.get("type", "function") != "function":
            return dict(tool)  # hosted tools pass through verbatim
        name, description, parameters = tool["name"], tool.get("description"), tool.get("parameters")
        strict = tool.get("strict", False)
    else:
        name, description = tool.name, getattr(tool, "description", None)
        parameters = getattr(tool, "parameters", None)
        parameters = parameters() if callable(parameters) else parameters
        strict = getattr(tool, "strict", False)
    out: dict[str, Any] = {"type": "function", "name": name}
    if description:
        out["description"] = description
    out["parameters"] = parameters or {"type": "object", "properties": {}}
    out["strict"] = bool(strict)
    return out


class ResponsesEngine:
    """An engine for ``POST /v1/responses`` that always streams.

    Mode comes from the engine's ``mode``, else the Turn's ``ConversationState``, else ``chained``
    (``stateless`` when ``store=False``). Chained sends ``previous_response_id`` = the anchor and only
    the blocks after it; conversation sends the conversation id and the same delta; stateless sends
    the whole Turn. Whenever server state cannot be proven to equal the Turn, the whole Turn is sent
    (logged, counted in ``metrics``). ``instructions_mode=True`` sends system blocks as ``instructions``
    on every request instead of as stored input messages. ``on_previous_not_found="raise"`` turns the
    automatic full resend on an expired parent into an error.
    """

    provider = "openai"

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
    ) -> None:
        if mode is not None and mode not in MODES:
            raise ConfigurationError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if not store and mode in ("chained", "conversation"):
            raise ConfigurationError(
                f"mode={mode!r} needs the server to store responses; pass store=True or use mode='stateless'"
            )
        if on_previous_not_found not in ("resend", "raise"):
            raise ConfigurationError("on_previous_not_found must be 'resend' or 'raise'")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and not isinstance(http, HttpTransport):
            raise AuthenticationError(
                "no OpenAI API key: pass api_key= or set the OPENAI_API_KEY environment variable", provider="openai"
            )
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.mode, self.store, self.instructions_mode = mode, store, instructions_mode
        self.tools = [_tool_dict(t) for t in tools or []]
        self.tool_choice, self.parallel_tool_calls = tool_choice, parallel_tool_calls
        self.reasoning_effort, self.reasoning_summary = reasoning_effort, reasoning_summary
        self.text_format, self.temperature, self.top_p = text_format, temperature, top_p
        self.max_output_tokens, self.include = max_output_tokens, list(include or [])
        self.on_previous_not_found = on_previous_not_found
        self._headers = {"authorization": f"Bearer {key}"} if key else {}
        self._http = http
        self.server_ignores_state = False
        """Set when a server answered a chained request without echoing it; the engine then stays stateless."""

    # -- transport --------------------------------------------------------------------------------
    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[HttpTransport]:
        if isinstance(self._http, HttpTransport):
            yield self._http
            return
        transport = HttpTransport(
            self.base_url, provider="openai", headers=self._headers, error_parser=openai_error_info, client=self._http
        )
        try:
            yield transport
        finally:
            await transport.aclose()

    # -- request body -----------------------------------------------------------------------------
    def is_reasoning_model(self) -> bool:
        """True for o1/o3/o4/gpt-5 families or when a reasoning effort is set (no temperature/top_p)."""
        return self.model.startswith(_REASONING_PREFIXES) or self.reasoning_effort is not None

    def build_body(self, turn: Turn, plan: Plan) -> dict[str, Any]:
        """The JSON body for ``plan`` (public so tests and benchmarks can inspect it)."""
        body: dict[str, Any] = {"model": self.model}
        if self.instructions_mode:
            system = [b.text for b in turn.blocks if b.kind is BlockKind.SYSTEM and b.text]
            if system:
                body["instructions"] = "\n\n".join(system)
        body["input"] = plan.items
        if plan.previous_response_id:
            body["previous_response_id"] = plan.previous_response_id
        if plan.conversation_id:
            body["conversation"] = plan.conversation_id
        if self.tools:
            body["tools"] = self.tools
        optional: dict[str, Any] = {
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "text": {"format": self.text_format} if self.text_format else None,
            "max_output_tokens": self.max_output_tokens,
        }
        if not self.is_reasoning_model():
            optional.update(temperature=self.temperature, top_p=self.top_p)
        reasoning = {k: v for k, v in (("effort", self.reasoning_effort), ("summary", self.reasoning_summary)) if v}
        optional["reasoning"] = reasoning or None
        body.update({k: v for k, v in optional.items() if v is not None})
        include = list(self.include)
        if not self.store:
            body["store"] = False
            if "reasoning.encrypted_content" not in include:
                include.append("reasoning.encrypted_content")
        if include:
            body["include"] = include
        body["stream"] = True
        return body

    # -- planning ---------------------------------------------------------------------------------
    def _mode_for(self, state: ConversationState | None) -> str:
        mode = self.mode or (state.mode if state else None) or ("chained" if self.store else "stateless")
        if not self.store and mode != "stateless":
            raise ConfigurationError(
                f"the Turn asks for mode {mode!r} but the engine has store=False; "
                "pass store=True or set the Turn's ConversationState(mode='stateless')"
            )
        return mode

    def _plan(self, turn: Turn, mode: str, state: ConversationState | None) -> Plan:
        include_system = not self.instructions_mode
        if self.server_ignores_state:
            return plan_full(turn, include_system=include_system, reason="server ignores previous_response_id")
        if mode == "chained":
            return plan_chained(turn, include_system=include_system)
        if mode == "conversation":
            cid = state.conversation_id if state else None
            last = state.previous_response_id if state else None
            return plan_conversation(turn, cid, last, include_system=include_system)
        return plan_full(turn, include_system=include_system)

    async def _seed_conversation(self, http: HttpTransport, items: list[dict[str, Any]]) -> str:
        step = CONVERSATION_ITEMS_PER_CALL
        created = await http.post_json("conversations", {"items": items[:step]})
        cid = str(created["id"])
        for i in range(step, len(items), step):
            await http.post_json(f"conversations/{cid}/items", {"items": items[i : i + step]})
        log.info("responses: new conversation %s seeded with %d items", cid, len(items))
        return cid

    # -- one request ------------------------------------------------------------------------------
    async def _send(self, http: HttpTransport, turn: Turn, plan: Plan, stream: StreamState) -> None:
        if plan.seed_items is not None:
            plan.conversation_id = await self._seed_conversation(http, plan.seed_items)
            plan.seed_items = None
        body = self.build_body(turn, plan)
        metrics.request(plan.mode, len(plan.items))
        if plan.fallback_reason:
            metrics.fallback(plan.fallback_reason.split(" (")[0][:60])
        log.info("responses: %s request, %d input items", plan.mode, len(plan.items))

        def verify(response: dict[str, Any]) -> None:
            if plan.previous_response_id and response.get("previous_response_id") != plan.previous_response_id:
                raise _StateIgnored("previous_response_id")
            conv = response.get("conversation")
            conv_id = conv.get("id") if isinstance(conv, dict) else conv
            if plan.conversation_id and conv_id != plan.conversation_id:
                raise _StateIgnored("conversation")

        meta = metadata_for(turn, self.provider, self.model)
        events = cast(AsyncGenerator[SSEEvent, None], http.stream_sse("responses", body))
        async with aclosing(events):
            await consume_stream(events, stream, meta, on_created=verify)

    async def _send_with_fallbacks(
        self, http: HttpTransport, turn: Turn, plan: Plan, streams: list[StreamState]
    ) -> Plan:
        """Send ``plan``; on an expired parent, a lost conversation or a server that ignores state, send
        once more in the fallback shape. Each attempt's stream state is appended to ``streams``."""
        include_system = not self.instructions_mode
        stream = StreamState()
        streams.append(stream)
        try:
            await self._send(http, turn, plan, stream)
            return plan
        except PreviousResponseNotFoundError:
            if self.on_previous_not_found == "raise":
                raise
            log.warning(
                "responses: parent %s not found on the server; resending the whole Turn", plan.previous_response_id
            )
            retry = plan_full(turn, include_system=include_system, reason="previous_response_not_found")
        except NotFoundError as exc:
            if not plan.conversation_id or exc.param not in (None, "conversation"):
                raise
            log.warning("responses: conversation %s not found; starting a new one", plan.conversation_id)
            retry = plan_conversation(turn, None, None, include_system=include_system)
            retry.fallback_reason = "conversation_not_found"
        except _StateIgnored as exc:
            self.server_ignores_state = True
            log.warning(
                "responses: the server at %s did not echo %s; it ignores server-side state, so this engine "
                "re-sends the whole Turn and stays stateless",
                self.base_url,
                exc,
            )
            retry = plan_full(turn, include_system=include_system, reason="server ignores previous_response_id")
        stream = StreamState()
        streams.append(stream)
        await self._send(http, turn, retry, stream)
        return retry

    # -- the Engine protocol ----------------------------------------------------------------------
    async def run_inference(self, turn: Turn) -> Turn:
        """Send the Turn (or its delta), append the response's blocks in output order, tag them, return the Turn."""
        state = get_state(turn)
        mode = self._mode_for(state)
        meta = metadata_for(turn, self.provider, self.model)
        publish(EventStart(meta))
        start = len(turn.blocks)
        plan = self._plan(turn, mode, state)
        streams: list[StreamState] = []
        try:
            async with self._transport() as http:
                plan = await self._send_with_fallbacks(http, turn, plan, streams)
        except StreamError as exc:
            for block in (
                streams[-1].finished_text_blocks() if streams else []
            ):  # only finished messages; never a tool call
                BLOCK_META_PROVIDER.set(block.metadata, self.provider)
                turn.append(block)
            publish(EventError(meta, str(exc), type(exc).__name__))
            raise
        except GeppettoError as exc:
            publish(EventError(meta, str(exc), type(exc).__name__))
            raise
        self._record(turn, start, plan, streams[-1], mode)
        return turn

    def _record(self, turn: Turn, start: int, plan: Plan, stream: StreamState, mode: str) -> None:
        response = stream.response
        blocks = stream.blocks()
        for block in blocks:
            BLOCK_META_PROVIDER.set(block.metadata, self.provider)
            turn.append(block)
        response_id = str(response.get("id") or "")
        if not response_id:
            log.warning("responses: the response carried no id; its blocks cannot anchor a later request")
        elif self.store:
            tag_blocks(turn, start, response_id, include_system=not self.instructions_mode)
            new_state = ConversationState(mode=mode, previous_response_id=response_id)
            new_state.conversation_id = plan.conversation_id if mode == "conversation" else None
            set_state(turn, new_state)
        else:
            for block in blocks:
                BLOCK_META_RESPONSE_ID.set(block.metadata, response_id)
        usage = usage_of(response)
        stop = stop_reason_of(response, blocks)
        TURN_META_PROVIDER.set(turn.metadata, self.provider)
        TURN_META_MODEL.set(turn.metadata, str(response.get("model") or self.model))
        TURN_META_STOP_REASON.set(turn.metadata, stop)
        if usage is not None:
            TURN_META_USAGE.set(turn.metadata, usage.to_dict())
        meta = metadata_for(turn, self.provider, self.model)
        for block in blocks:
            if block.kind is BlockKind.TOOL_CALL:
                p = block.payload
                publish(EventToolCallRequested(meta, p[PAYLOAD_ID], p[PAYLOAD_NAME], p.get(PAYLOAD_ARGS)))
        meta.usage, meta.stop_reason = usage, stop
        text = "".join(b.text for b in blocks if b.kind is BlockKind.LLM_TEXT)
        publish(EventFinal(meta, text))
