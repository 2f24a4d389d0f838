"""One request to the Responses API, before it is sent: the plan (what it carries), the anchor it chains
on, its body, the prefix guard on the reasoning it replays, its prompt cache key, and, once answered, the
judging of an answer that did not echo its state.

Deciding what a request sends: anchor + delta, conversation + delta, or the whole Turn. A plan never sends
an empty ``input``: with nothing after the anchor (the API's behaviour there is not specified) the whole
Turn is sent instead, so every mode gives the model the same context; a Turn whose last response asked for
tools that have no results yet is refused with a ``UsageError`` naming the fix, since the server would
reject it anyway.

See docs/responses.md ("The proof: anchors and fingerprints", "What goes on the wire", "Fallbacks").
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from geppetto._exceptions import ConfigurationError
from geppetto.output import StructuredOutputConfig, wire_schema_encoded
from geppetto.tools import require_tool_results
from geppetto.turns import (
    PAYLOAD_ARGS,
    PAYLOAD_ID,
    PAYLOAD_ITEM_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_TEXT,
    TURN_META_SESSION_ID,
    Block,
    BlockKind,
    Turn,
    block_meta_key,
    watch_metadata_keys,
)

from .._chain import REASON_TEXT, AnchorScan, blocks_after_response, scan_chain, scan_reusing, timed_scan
from .._chain_wire import Wire, block_wire, seal
from .._chain_wire import prefix_hasher as _hasher
from .._prefix_guard import REASONING_STALE, Unit, apply_policy, check, header_digest
from .._stateful import ResponsesMetrics
from ._items import (
    RESPONSE_BLOCKS,
    arguments_text,
    block_identity,
    blocks_to_items,
    compact_json,
    replayed,
    replayed_reasoning,
    tool_output_text,
)
from ._state import ConversationState, get_state

__all__ = [
    "ANCHOR_REFUSED",
    "CONVERSATION_ITEMS_PER_CALL",
    "COUNT_FIELDS",
    "INSTRUCTIONS_FALLBACK",
    "OTHER_EDIT_FALLBACK",
    "PROMPT_CACHE_RETENTIONS",
    "Plan",
    "build_body",
    "chain_seed",
    "find_best_anchor",
    "guard_plan",
    "is_valid_anchor",
    "plan_chained",
    "plan_conversation",
    "plan_full",
    "plan_new_conversation",
    "plan_request",
    "plan_stateless",
    "prefix_fingerprint",
    "prefix_hasher",
    "prefix_header",
    "prompt_cache_key_for",
    "scan_anchors",
    "seed_split",
    "session_cache_key",
    "wire_for",
]

log = logging.getLogger("geppetto.providers.openai_responses")


CONVERSATION_ITEMS_PER_CALL = 20
"""The Conversations API takes at most 20 items per create / add-items call."""


@dataclass
class Plan:
    """One request's shape.

    ``mode`` is how the request carries the context (``chained``: ``previous_response_id``;
    ``conversation``; ``stateless``: neither). ``blocks`` are the blocks whose items are sent;
    ``full`` says they are the whole Turn. ``seed_items`` go into a conversation before the request
    is sent: into ``reuse_conversation`` when that one turns out to be empty, else into a new one.
    ``fallback`` is a reason code when server state could have been used but was not (``detail``
    says why, for the log). ``base`` is the ``ConversationState.base`` to record afterwards.
    ``created`` is set once sending made a new conversation for the request; ``replaced`` then names the
    conversation it took the place of (one that still exists on the server, holding other context).
    ``repair`` names the response a conversation is repaired back to before sending (its items after that
    response's are deleted; ``repair_conversation`` in ``_send``); ``deleted`` counts the items that took.
    ``why`` says why this anchor, repair or whole Turn was chosen (the inspector shows it).
    ``stale`` names the reasoning blocks the prefix guard left out of ``items``.
    """

    mode: str
    items: list[dict[str, Any]]
    blocks: list[Block] = field(default_factory=list)
    full: bool = False
    previous_response_id: str | None = None
    conversation_id: str | None = None
    seed_items: list[dict[str, Any]] | None = None
    reuse_conversation: str | None = None
    fallback: str = ""
    detail: str = ""
    base: str | None = None
    prefix: Any = None
    created: bool = False
    replaced: str | None = None
    repair: str | None = None
    deleted: int = 0
    why: str = ""
    stale: frozenset[str] = frozenset()
    """Ids of the reasoning blocks the prefix guard left out (their prefix changed since they were made)."""
    evidence: str = ""
    """What decided that the server used (or ignored) the stored context, when its answer did not echo it
    (``kept (usage: ...)``); empty when the echo proved it or nothing was chained."""

    def seed(self) -> str:
        """The fingerprint seed of the server object that holds this request's context."""
        state = ConversationState(mode="chained", conversation_id=self.conversation_id, base=self.base)
        return chain_seed(state, "conversation" if self.mode == "conversation" else "chained")


def plan_full(turn: Turn, *, include_system: bool, fallback: str = "", detail: str = "", prefix: Any = None) -> Plan:
    """Stateless: the whole Turn (from its latest server compaction), no server state."""
    blocks = replayed(turn.blocks)
    items = blocks_to_items(blocks, include_system=include_system)
    return Plan("stateless", items, blocks, True, fallback=fallback, detail=detail, prefix=prefix)


def plan_stateless(turn: Turn, state: ConversationState | None, *, include_system: bool) -> Plan:
    """Stateless with a stored response: the whole Turn, and the prefix its response's fingerprint extends
    from the Turn's incremental proof (as a chained request keeps it), so a Turn that goes on statelessly
    hashes only the blocks added since its last request, not every block again on each response."""
    scan = scan_anchors(turn, include_system=include_system, seed=chain_seed(state, "chained"), incremental=True)
    return plan_full(turn, include_system=include_system, prefix=scan.hasher)


def _timed_scan(turn: Turn, include_system: bool, seed: str, metrics: ResponsesMetrics | None) -> AnchorScan:
    def run() -> AnchorScan:
        return scan_anchors(turn, include_system=include_system, seed=seed, incremental=True)

    return timed_scan(run, metrics, log=log, label="responses")


def _delta(turn: Turn, anchor: str, include_system: bool) -> tuple[list[Block], list[dict[str, Any]]]:
    delta = blocks_after_response(turn, anchor)
    items = blocks_to_items(delta, include_system=include_system)
    if not items:
        require_tool_results(turn)
    return delta, items


def plan_chained(
    turn: Turn, state: ConversationState | None, *, include_system: bool, metrics: ResponsesMetrics | None
) -> Plan:
    """Anchor + delta when a valid anchor exists; else the whole Turn (after ``state.base`` for a
    fresh Turn), with a reason code when that is a fallback."""
    base = state.base if state else None
    scan = _timed_scan(turn, include_system, chain_seed(state, "chained"), metrics)
    anchor = scan.best()
    if anchor is not None:
        delta, items = _delta(turn, anchor, include_system)
        if items:
            log.debug("responses: anchor %s, %d delta blocks, %d items", anchor, len(delta), len(items))
            plan = Plan("chained", items, delta, previous_response_id=anchor, base=base, prefix=scan.hasher)
            latest = scan.latest_id
            if latest is not None and latest != anchor:
                plan.why = (
                    f"re-anchored on {anchor}, the latest response whose prefix still matches the Turn "
                    f"(the latest response, {latest}: {REASON_TEXT[scan.spans[latest].problem() or 'fingerprint_mismatch']})"
                )
            return plan
        code, detail = "empty_delta", f"nothing after anchor {anchor} to send"
    elif not scan.spans:
        code, detail = "", ""
        if state is not None and state.previous_response_id and not base:
            log.info(
                "responses: the Turn's state names previous_response_id %s but no block comes from a response: "
                "sending the whole Turn (to send only new blocks after it, set ConversationState(base=...) "
                "or use ConversationManager)",
                state.previous_response_id,
            )
    else:
        code, detail = scan.reason_code() or "fingerprint_mismatch", f"no valid anchor ({scan.reason()})"
    if base:
        blocks = replayed(turn.blocks)
        items = blocks_to_items(blocks, include_system=include_system)
        return Plan("chained", items, blocks, True, base, base=base, fallback=code, detail=detail, prefix=scan.hasher)
    return plan_full(turn, include_system=include_system, fallback=code, detail=detail, prefix=scan.hasher)


def seed_split(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split a whole Turn's items into (conversation seed, request input): the last item goes in the
    request, together with the reasoning items right before it (a pair is never split)."""
    k = max(0, len(items) - 1)
    while k > 0 and items[k - 1].get("type") in ("reasoning", "item_reference"):
        k -= 1
    return items[:k], items[k:]


def plan_new_conversation(
    turn: Turn, *, include_system: bool, fallback: str = "", detail: str = "", reuse: str | None = None
) -> Plan:
    """The whole Turn in a conversation made for it: seeded with all but the last item, which is the
    request's input. ``reuse`` names a conversation to seed instead, if it turns out to be empty."""
    blocks = replayed(turn.blocks)
    seed, items = seed_split(blocks_to_items(blocks, include_system=include_system))
    plan = Plan("conversation", items, blocks, True, seed_items=seed, fallback=fallback, detail=detail)
    plan.reuse_conversation = reuse
    return plan


def _mismatch_code(scan: AnchorScan, last: str | None) -> str:
    if last and last in scan.spans:
        return scan.spans[last].problem() or "fingerprint_mismatch"
    if last:
        return "response_incomplete"  # every block of the conversation's last response is gone
    return scan.reason_code() or "fingerprint_mismatch"


def _plan_repair(
    turn: Turn, scan: AnchorScan, cid: str, last: str | None, base: str | None, include_system: bool
) -> Plan | None:
    """Conversation ``cid`` repaired in place: when a response answered in it still anchors the Turn but its
    last one does not (an edit, insertion or removal after that response), the items after the anchor's
    are deleted from the conversation before the request and only the blocks after it are sent. None when
    no response of the conversation anchors (the divergence is before everything it holds)."""
    anchor = scan.best()
    if anchor is None or anchor == last:
        return None
    delta, items = _delta(turn, anchor, include_system)
    if not items:
        return None
    why = REASON_TEXT.get(_mismatch_code(scan, last), "it no longer matches the Turn")
    plan = Plan("conversation", items, delta, conversation_id=cid, base=base, prefix=scan.hasher)
    plan.repair = anchor
    plan.why = (
        f"the Turn changed after response {anchor} (the latest response, {last or 'none'}: {why}): conversation "
        f"{cid} is repaired in place, its items after {anchor} deleted, and the {len(delta)} blocks after it sent"
    )
    log.debug("responses: %s", plan.why)
    return plan


def plan_conversation(
    turn: Turn, state: ConversationState | None, *, include_system: bool, metrics: ResponsesMetrics | None
) -> Plan:
    """Conversation + delta when the conversation provably holds the Turn up to its last response; the
    whole Turn into the conversation for a fresh Turn; else the Turn in a (new or empty) conversation."""
    cid = state.conversation_id if state else None
    if state is None or not cid:
        return plan_new_conversation(turn, include_system=include_system)
    last, base = state.previous_response_id, state.base
    scan = _timed_scan(turn, include_system, chain_seed(state, "conversation"), metrics)
    if last and scan.valid(last):
        delta, items = _delta(turn, last, include_system)
        if items:
            log.debug("responses: conversation %s after %s, %d items", cid, last, len(items))
            return Plan("conversation", items, delta, conversation_id=cid, base=base, prefix=scan.hasher)
        code, detail = "empty_delta", f"nothing after {last} to send in conversation {cid}"
    elif (repair := _plan_repair(turn, scan, cid, last, base, include_system)) is not None:
        return repair
    elif not scan.spans and base == cid:
        items = blocks_to_items(turn.blocks, include_system=include_system)
        log.debug("responses: fresh Turn into conversation %s, %d items", cid, len(items))
        return Plan("conversation", items, list(turn.blocks), True, conversation_id=cid, base=base, prefix=scan.hasher)
    elif not scan.spans:
        code, detail = "conversation_not_empty", f"no block of the Turn was answered in conversation {cid}"
    else:
        code = _mismatch_code(scan, last)
        detail = f"conversation {cid} no longer matches the Turn ({scan.reason()})"
    if base:
        detail += f"; the context held before this Turn in {base} is not carried over"
    return plan_new_conversation(turn, include_system=include_system, fallback=code, detail=detail, reuse=cid)


def plan_request(
    turn: Turn,
    mode: str,
    state: ConversationState | None,
    *,
    include_system: bool,
    store: bool = True,
    ignores_state: bool = False,
    metrics: ResponsesMetrics | None = None,
) -> Plan:
    """The plan of the request the engine sends for ``turn`` in ``mode`` (the one place that decides it:
    the engine sends it, ``geppetto inspect`` and the web inspector show it). ``ignores_state``: the
    server ignores server-side state, so the whole Turn goes. ``metrics`` gets the anchor selection time."""
    if ignores_state:
        return plan_full(turn, include_system=include_system)
    if mode == "chained":
        return plan_chained(turn, state, include_system=include_system, metrics=metrics)
    if mode == "conversation":
        return plan_conversation(turn, state, include_system=include_system, metrics=metrics)
    if store and state is not None and state.previous_response_id:
        # a Turn that goes on after a stored response: keep its proof, hash only the new blocks (a fresh
        # Turn's few blocks cost less hashed once than sealed; store=False writes no fingerprint at all)
        return plan_stateless(turn, state, include_system=include_system)
    return plan_full(turn, include_system=include_system)


# -- anchors -------------------------------------------------------------------------------------------------
# Anchor selection for the Responses engine: its wire form of a block, on the shared proof.
#
# The proof itself (spans, fingerprints, incremental scans, tagging) is :mod:`geppetto.providers._chain`,
# shared with the Gemini Interactions engine; this module is the Responses side of it: the canonical wire
# form of a block as an input item, the seed a Turn's ``ConversationState`` implies, and the names the
# Responses engine and its tests have always used.


ANCHOR_REFUSED = block_meta_key("openai", "not_anchorable", 1, str)
"""``openai.not_anchorable@v1``: why a stored response can never be an anchor (the server holds an item
the Turn does not replay, e.g. a function call cut off by ``max_output_tokens``)."""

_CANON = compact_json(sort_keys=True)
_STR = json.encoder.encode_basestring  # a JSON string as _CANON writes one (ensure_ascii=False)


class _ResponsesWire(Wire):
    """A block as a Responses input item (system blocks included or not)."""

    def __init__(self, include_system: bool) -> None:
        super().__init__(str(RESPONSE_BLOCKS), str(ANCHOR_REFUSED))
        self.include_system = include_system

    def fresh(self, block: Block) -> bytes | None:
        return _fresh_wire(block, self.include_system)


_WIRES = {True: _ResponsesWire(True), False: _ResponsesWire(False)}


def wire_for(include_system: bool) -> Wire:
    """The Responses wire form, with or without system blocks (one object each: seals remember it)."""
    return _WIRES[bool(include_system)]


def chain_seed(state: ConversationState | None, mode: str | None = None) -> str:
    """What holds the context before the Turn's first block, folded into every fingerprint.

    ``""`` when the Turn holds the whole context of a chain; ``after:<id>`` for a fresh Turn continuing
    response ``<id>``; ``conversation:<id>`` in conversation mode (the conversation holds the context).
    """
    mode = mode or (state.mode if state else "chained")
    if mode == "conversation":
        return f"conversation:{state.conversation_id if state and state.conversation_id else ''}"
    return f"after:{state.base}" if state and state.base else ""


def _fresh_wire(block: Block, include_system: bool) -> bytes | None:
    """``_CANON(block_identity(block)) + "\\n"`` as UTF-8. A plain block (a text message, a function call, a
    tool result, holding only the payload fields its wire item is made of) is written straight from its
    fields, byte for byte what the encoder makes of its identity (``tests/responses/test_anchor_wire.py``
    holds them equal), since a Turn just loaded makes every block's wire form at once and the encoder's
    generic walk was most of that cost. A block with any other payload field (a phase, images, an error)
    goes the general way, so a field added to the wire item later can never be left out here."""
    payload = block.payload
    kind = block.kind
    keys = payload.keys()
    if kind is BlockKind.TOOL_USE:
        call = payload.get(PAYLOAD_ID)
        if keys <= _PLAIN_TOOL_USE and call:
            output = tool_output_text(block)
            return f'{{"call_id":{_STR(str(call))},"output":{_STR(output)},"type":"function_call_output"}}\n'.encode()
    elif kind is BlockKind.TOOL_CALL:
        call, name = payload.get(PAYLOAD_ID), payload.get(PAYLOAD_NAME)
        if keys <= _PLAIN_TOOL_CALL and call and name:
            args = arguments_text(payload.get(PAYLOAD_ARGS))
            return (
                f'{{"arguments":{_STR(args)},"call_id":{_STR(str(call))},"name":{_STR(str(name))},'
                '"type":"function_call"}\n'
            ).encode()
    elif kind is BlockKind.LLM_TEXT:
        text = payload.get(PAYLOAD_TEXT)
        if keys <= _PLAIN_LLM_TEXT and type(text) is str:
            return f'{{"content":{_STR(text)},"role":"assistant"}}\n'.encode() if text.strip() else None
    elif kind is BlockKind.USER or (kind is BlockKind.SYSTEM and include_system):
        text = payload.get(PAYLOAD_TEXT)
        if keys <= _PLAIN_MESSAGE and type(text) is str:
            role = "user" if kind is BlockKind.USER else ("developer" if block.role == "developer" else "system")
            return f'{{"content":{_STR(text)},"role":"{role}"}}\n'.encode()
    identity = block_identity(block, include_system=include_system)
    return None if identity is None else (_CANON(identity) + "\n").encode()


_PLAIN_MESSAGE = frozenset({PAYLOAD_TEXT})
_PLAIN_LLM_TEXT = frozenset({PAYLOAD_TEXT, PAYLOAD_ITEM_ID})
_PLAIN_TOOL_CALL = frozenset({PAYLOAD_ID, PAYLOAD_NAME, PAYLOAD_ARGS, PAYLOAD_ITEM_ID})
_PLAIN_TOOL_USE = frozenset({PAYLOAD_ID, PAYLOAD_RESULT})
"""The payload fields of the plain blocks whose wire form ``_fresh_wire`` writes itself: exactly the ones
their wire identity is made of (an item id is not part of it)."""


def prefix_hasher(blocks: Iterable[Block], *, include_system: bool = True) -> Any:
    """A running sha256 over the wire form of ``blocks`` (copy it before adding more)."""
    return _hasher(blocks, wire_for(include_system))


def prefix_fingerprint(blocks: Iterable[Block], *, include_system: bool = True, seed: str = "") -> str:
    """The fingerprint of a Turn whose first blocks are ``blocks``."""
    return seal(seed, prefix_hasher(blocks, include_system=include_system).hexdigest())


def scan_anchors(
    turn: Turn, *, include_system: bool = True, seed: str | None = None, incremental: bool = False
) -> AnchorScan:
    """Spans, completeness and fingerprint of every response (:func:`geppetto.providers._chain.scan_chain`
    with the Responses wire form). ``seed`` defaults to the one the Turn's ``ConversationState`` implies
    (``chain_seed``); ``incremental`` keeps the proof with the Turn (the engine's stateful requests)."""
    if seed is None:
        seed = chain_seed(get_state(turn))
    return scan_chain(turn, wire_for(include_system), seed=seed, incremental=incremental)


def _reusing(turn: Turn, include_system: bool) -> AnchorScan:
    return scan_reusing(turn, wire_for(include_system), seed=chain_seed(get_state(turn)))


def find_best_anchor(turn: Turn, *, include_system: bool = True) -> str | None:
    """The latest response id that is a valid anchor, or None (send the whole Turn). On a Turn the engine
    proved it reads only the blocks added since (the engine's own proof, extended); on a Turn just loaded
    it reads each stored block in place."""
    return _reusing(turn, include_system).best()


def is_valid_anchor(turn: Turn, response_id: str, *, include_system: bool = True) -> bool:
    """True when all of ``response_id``'s blocks are there, contiguous, and its fingerprint still matches."""
    return _reusing(turn, include_system).valid(response_id)


# -- cache ---------------------------------------------------------------------------------------------------
# Prompt caching settings: the ``prompt_cache_key`` a request carries and ``prompt_cache_retention``.
#
# By default every request of a session carries the same key, derived from the Turn's session id
# (``geppetto-`` and 32 hex digits of its sha256: stable across processes and restarts, at most 64
# characters as the API requires, and not the session id itself), so the requests of one session are
# routed to the same cache; a Turn without a session id carries none. A string is sent as it is; a
# callable ``(turn) -> str | None`` chooses per request; ``False`` or ``None`` sends none.


PROMPT_CACHE_RETENTIONS = ("in_memory", "24h")
"""The values ``prompt_cache_retention`` takes."""

_MAX_KEY = 64

PromptCacheKey = str | bool | Callable[[Turn], str | None] | None


def session_cache_key(session_id: str) -> str:
    """The default ``prompt_cache_key`` of a session."""
    return "geppetto-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _checked_key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY:
        raise ConfigurationError(
            f"{where} gave prompt_cache_key {key!r}: pass a non-empty string of at most {_MAX_KEY} characters, "
            "True (one key per session), or None (no key)"
        )
    return key


def prompt_cache_key_for(setting: PromptCacheKey, turn: Turn) -> str | None:
    """The key a request for ``turn`` carries under ``setting`` (None: no key)."""
    if setting is None or setting is False:
        return None
    if setting is True:
        session_id = TURN_META_SESSION_ID.get(turn.metadata)
        return session_cache_key(session_id) if session_id else None
    if isinstance(setting, str):
        return setting
    key = setting(turn)
    return None if key is None else _checked_key(key, "the prompt_cache_key callable")


# -- body ----------------------------------------------------------------------------------------------------
# The JSON body of one ``POST /v1/responses`` request, from a plan and the engine's settings.


COUNT_FIELDS = frozenset(
    {
        "model",
        "input",
        "previous_response_id",
        "conversation",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "reasoning",
    }
)
"""The fields of a create request that ``POST /responses/input_tokens`` takes (``TokenCountsBody``)."""


def build_body(engine: Any, turn: Turn, plan: Plan, output: StructuredOutputConfig | None) -> dict[str, Any]:
    """The JSON body ``engine`` (a ``ResponsesEngine``: its settings) sends for ``plan`` (see its ``build_body``),
    with ``output``, the Turn's structured-output config as the engine read it for this request."""
    body: dict[str, Any] = {"model": engine.model}
    if engine.instructions_mode:
        system = [b.text for b in turn.blocks if b.kind is BlockKind.SYSTEM and b.text]
        if system:
            body["instructions"] = "\n\n".join(system)
    body["input"] = plan.items
    if plan.previous_response_id:
        body["previous_response_id"] = plan.previous_response_id
    if plan.conversation_id:
        body["conversation"] = plan.conversation_id
    body.update(engine._tools.fields(turn, engine.tool_choice))
    optional: dict[str, Any] = {
        "parallel_tool_calls": engine.parallel_tool_calls,
        "text": _text(engine, output),
        "max_output_tokens": engine.max_output_tokens,
        "prompt_cache_key": prompt_cache_key_for(engine.prompt_cache_key, turn),
        "prompt_cache_retention": engine.prompt_cache_retention,
    }
    if not engine.is_reasoning_model():
        optional.update(temperature=engine.temperature, top_p=engine.top_p)
    effort, summary = engine.reasoning_effort, engine.reasoning_summary
    reasoning = {k: v for k, v in (("effort", effort), ("summary", summary)) if v}
    optional["reasoning"] = reasoning or None
    body.update({k: v for k, v in optional.items() if v is not None})
    if engine.compact_threshold is not None:
        body["context_management"] = [{"type": "compaction", "compact_threshold": engine.compact_threshold}]
    include = list(engine.include)
    if engine.background:
        body["background"] = body["store"] = True  # background responses must be stored
    if not engine.store:
        body["store"] = False
        if "reasoning.encrypted_content" not in include:
            include.append("reasoning.encrypted_content")
    if include:
        body["include"] = include
    body["stream"] = engine.stream
    return body


def _text(engine: Any, output: StructuredOutputConfig | None) -> dict[str, Any] | None:
    """``text.format``: the Turn's structured-output config (``output``), else the engine's ``text_format``."""
    if output is None:
        return {"format": engine.text_format} if engine.text_format else None
    fmt: dict[str, Any] = {"type": "json_schema", "name": output.name}
    if output.description:
        fmt["description"] = output.description
    fmt.update(schema=wire_schema_encoded(output, "openai"), strict=output.strict)
    return {"format": fmt}


# -- guard ---------------------------------------------------------------------------------------------------
# The prefix guard on the Responses API (see :mod:`geppetto.providers._prefix_guard`).
#
# OpenAI keeps a ``reasoning`` item (sent with its ``encrypted_content``, or by reference) only when what
# precedes it is what it was produced after; otherwise the item is dropped silently: the request succeeds,
# the model reasons again and the bill grows. The prefix here is the Turn's blocks before the reasoning
# block, each in the wire form the anchor proof fingerprints (``wire_for``, above), under a header of the
# ``instructions`` when system blocks travel there. The anchor proof's running digest over the blocks
# before a response is reused to stamp that response's reasoning, so stamping costs O(new blocks).
#
# It applies to every request that replays reasoning: a stateless one (the whole Turn), a chained or
# conversation delta (reasoning after an earlier anchor, when an edit made the later responses unusable as
# anchors) and the seed of a new conversation. ``rewrite`` has nothing to rewrite on this API (it takes
# no system message after the fact that keeps earlier reasoning valid): it drops, and says so.


watch_metadata_keys(REASONING_STALE)  # marking a sealed block changes its wire form: the proof sees it

_NO_REWRITE = "the Responses API cannot take a changed prefix append-only: dropped instead"


def prefix_header(turn: Turn, include_system: bool) -> str:
    """The header: the ``instructions`` text when system blocks are sent there, else nothing."""
    if include_system:
        return ""
    system = [b.text for b in turn.blocks if b.kind is BlockKind.SYSTEM and b.text]
    return header_digest("\n\n".join(system)) if system else ""


def guard_plan(turn: Turn, plan: Plan, *, include_system: bool, policy: str, model: str) -> None:
    """Leave the plan's stale reasoning out of its items (and its conversation seed), as ``policy`` says."""
    replayed = {id(b) for b in replayed_reasoning(plan.blocks)}
    if not replayed:
        apply_policy(turn, "openai", model, policy, [], [])
        return
    units = [Unit(block_wire(b, wire_for(include_system)) or b"", b, id(b) in replayed) for b in turn.blocks]
    stale = check(units, prefix_header(turn, include_system))
    note = _NO_REWRITE if policy == "rewrite" else ""
    if policy == "append":
        note = OTHER_EDIT_FALLBACK if include_system else INSTRUCTIONS_FALLBACK
    apply_policy(turn, "openai", model, policy, stale, units, note=note)
    if not stale:
        return
    plan.stale = frozenset(s.block.id for s in stale)
    # apply_policy marked them stale for good: the anchor proof's wire form leaves them out from now on
    plan.prefix = None  # the plan's digest counted the blocks as they were; the response is tagged afresh
    items = blocks_to_items(plan.blocks, include_system=include_system, stale=plan.stale)
    if plan.seed_items is not None:
        plan.seed_items, plan.items = seed_split(items)
    else:
        plan.items = items


INSTRUCTIONS_FALLBACK = (
    "instructions_mode sends the system prompt as instructions, which the reasoning is bound to: dropped instead"
)
OTHER_EDIT_FALLBACK = "only a changed system prompt can be sent as an appended message: dropped instead"
