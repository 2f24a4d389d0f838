"""The server's context: what the engine asks the server about it rather than for an answer. Compacting
and counting it (``POST /responses/compact``, ``POST /responses/input_tokens``), validating it against
the Turn (``validate_server_context``), probing what an endpoint keeps at all (``geppetto probe``), and
keeping the system prompts it holds as it holds them (``prefix_policy="append"``, below).
See docs/responses.md ("Compacting by reference", "Token counts", "Probing an endpoint").

Compacting goes by reference when the server provably holds the blocks to compact. Neither call makes a
response to chain on: ``/responses/compact`` answers with a ``response.compaction`` object whose id is never
put on a block (so no later request sends it as ``previous_response_id``), and ``/responses/input_tokens``
answers with a count only.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import httpx

from geppetto._exceptions import GeppettoError, NotFoundError, PreviousResponseNotFoundError, ProviderError
from geppetto.providers._landed import SAFE_TO_RESEND
from geppetto.turns import (
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ITEM,
    PAYLOAD_TEXT,
    Block,
    BlockKind,
    Turn,
    turn_data_key,
)

from .._http import HttpTransport
from .._http_errors import openai_error_info
from .._retry import RetryPolicy
from .._stateful import ResponsesMetrics, Validation
from ._answer import item_to_block, usage_of
from ._evidence import Sent, Verdict, echoed, judge, refused_state, settle, token_bound
from ._items import blocks_to_items, message_text, replayed, server_compaction
from ._request import (
    ANCHOR_REFUSED,
    COUNT_FIELDS,
    Plan,
    PromptCacheKey,
    chain_seed,
    plan_full,
    prompt_cache_key_for,
    scan_anchors,
)
from ._send import Api
from ._state import ConversationState, get_state, list_items, visible

__all__ = [
    "SYSTEM_HELD",
    "ContextEngine",
    "ProbeReport",
    "append_system_changes",
    "compact_blocks",
    "count_turn_tokens",
    "probe",
    "reference_for",
    "validate_server_context",
]

log = logging.getLogger("geppetto.providers.openai_responses")


class ContextEngine(Protocol):
    """What these calls need of their engine (a :class:`~geppetto.providers.openai_responses.ResponsesEngine`)."""

    provider: str
    model: str
    store: bool
    instructions_mode: bool
    prompt_cache_key: PromptCacheKey

    def _api(self) -> Api: ...

    def plan(self, turn: Turn) -> Plan: ...

    def build_body(self, turn: Turn, plan: Plan) -> dict[str, Any]: ...

    def guard_plan(self, turn: Turn, plan: Plan) -> None: ...


def reference_for(turn: Turn, blocks: list[Block], *, include_system: bool) -> tuple[str, list[Block]] | None:
    """``(response id, blocks after it)`` when ``blocks`` are the Turn's first blocks (its system blocks
    aside) and a stored response provably holds them up to its end: ``/responses/compact`` can then name
    that response instead of sending them. None when it cannot (a Turn that continues a ``base``, a
    conversation, system blocks the server holds among them, or no valid anchor inside them)."""
    if not blocks:
        return None
    state = get_state(turn)
    if state is not None and (state.mode == "conversation" or chain_seed(state, "chained")):
        return None
    try:
        end = next(i for i in range(len(turn.blocks) - 1, -1, -1) if turn.blocks[i] is blocks[-1])
    except StopIteration:
        return None
    head = turn.blocks[: end + 1]
    rest = [b for b in head if b.kind is not BlockKind.SYSTEM]
    if len(rest) != len(blocks) or any(b is not c for b, c in zip(rest, blocks, strict=True)):
        return None
    if include_system and any(b.kind is BlockKind.SYSTEM for b in head):
        return None  # the server holds them; the compaction would fold in blocks the Turn keeps
    scan = scan_anchors(turn, include_system=include_system, seed="", incremental=True)
    held = [(span.last, rid) for rid, span in scan.spans.items() if span.last <= end and scan.valid(rid)]
    if not held:
        return None
    last, rid = max(held)
    return rid, list(turn.blocks[last + 1 : end + 1])


async def compact_blocks(engine: ContextEngine, blocks: list[Block], turn: Turn | None) -> list[Block]:
    """See :meth:`ResponsesEngine.compact`."""
    include_system = not engine.instructions_mode
    body: dict[str, Any] = {"model": engine.model}
    key = prompt_cache_key_for(engine.prompt_cache_key, turn) if turn is not None else None
    if key:
        body["prompt_cache_key"] = key  # the same cache as the session's requests
    ref = reference_for(turn, blocks, include_system=include_system) if turn is not None and engine.store else None
    api = engine._api()
    result: Any = None
    if ref is not None:
        rid, after = ref
        body["previous_response_id"] = rid
        items = blocks_to_items(after, include_system=include_system)
        if items:
            body["input"] = items
        try:
            result = await api.post("/responses/compact", body)
        except PreviousResponseNotFoundError:
            log.warning("responses: compaction by reference to %s failed (expired); sending the blocks", rid)
            body.pop("previous_response_id")
    if result is None:
        body["input"] = blocks_to_items(replayed(blocks), include_system=include_system)
        result = await api.post("/responses/compact", body)
    output = result.get("output") if isinstance(result, dict) else None
    if not isinstance(output, list):
        raise ProviderError(
            "POST /responses/compact answered without an output list; nothing was compacted",
            provider=engine.provider,
        )
    out: list[Block] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and item.get("role") == "user":
            out.append(Block.user(message_text(item)))
        elif (block := item_to_block(item)) is not None:
            out.append(block)
    return out


def _count_plan(engine: ContextEngine, turn: Turn) -> Plan:
    plan = engine.plan(turn)  # the request the engine would send now, by its own planning code
    if plan.seed_items is not None:  # a request would first make a conversation: count the Turn as it stands
        plan = plan_full(turn, include_system=not engine.instructions_mode)
    return plan


async def count_turn_tokens(engine: ContextEngine, turn: Turn) -> int:
    """See :meth:`ResponsesEngine.count_tokens`."""
    plan = _count_plan(engine, turn)
    api = engine._api()

    async def count(plan: Plan) -> int:
        engine.guard_plan(turn, plan)  # count what would be sent: without reasoning whose prefix changed
        body = {k: v for k, v in engine.build_body(turn, plan).items() if k in COUNT_FIELDS}
        result = await api.post("/responses/input_tokens", body, SAFE_TO_RESEND)  # counts, changes nothing
        tokens = result.get("input_tokens") if isinstance(result, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            raise ProviderError(
                f"POST /responses/input_tokens answered without an input_tokens count: {str(result)[:200]}",
                provider=engine.provider,
            )
        return tokens

    try:
        return await count(plan)
    except (PreviousResponseNotFoundError, NotFoundError):
        if plan.full and not (plan.previous_response_id or plan.conversation_id):
            raise
        log.info("responses: the server no longer holds the Turn's anchor; counting the whole Turn")
        return await count(plan_full(turn, include_system=not engine.instructions_mode))


# -- validate ------------------------------------------------------------------------------------------------
# Validation with the server (opt-in): read the context the server holds and compare it with the Turn.
#
# Chained: the anchor's chain is walked back (``GET /responses/{id}`` for each response's output and
# ``previous_response_id``, ``GET /responses/{id}/input_items?order=asc`` for its own input; the API does
# not say whether a chained response lists only its own input, and the simulator does), up to
# a response an earlier validation already matched (periodic checks: each link is read once), the
# Turn's ``base``, or the chain's start. Conversation: ``GET /conversations/{id}/items?order=asc``. Both sides are compared
# in what the model reads (role and text of messages, call ids, names and parsed arguments, outputs,
# reasoning and other items by id), up to the end of the anchor's blocks. When the Turn holds a server
# compaction item, both sides are compared from the latest one (what the server reads), and the walk back
# stops at the link that holds it.
#
# A mismatch is logged, counted (``validation:mismatch``) and the blocks of every response in the Turn
# are marked ``openai.not_anchorable@v1``, so the next request sends the whole Turn and a new chain (or
# conversation) starts.


_RID = str(BLOCK_META_RESPONSE_ID)
MISMATCH = "the server's stored context differs from the Turn (validation)"


def _link_key(response_id: str, cut: str | None) -> str:
    """A validated link's key: its count of items runs from the chain's start, or from compaction ``cut``."""
    return f"{response_id}@{cut}" if cut else response_id


def _compaction_id(held: list[Any]) -> str | None:
    """The id of the server compaction item ``held`` starts with (``replayed`` puts it first), else None."""
    if held and server_compaction(held[0]):
        item = held[0].payload.get(PAYLOAD_ITEM)
        return str(item.get("id")) if isinstance(item, dict) else None
    return None


def _from_compaction(items: list[tuple[Any, ...]], cut: str | None) -> list[tuple[Any, ...]]:
    """The server's items from the compaction item ``cut`` on (all of them when it holds none such)."""
    if cut is None or ("compaction", cut) not in items:
        return items
    return items[len(items) - 1 - items[::-1].index(("compaction", cut)) :]


class ValidatedLinks:
    """Responses an earlier validation matched, with the number of context items up to their end
    (bounded: the oldest are forgotten)."""

    def __init__(self, size: int = 4096) -> None:
        self._links: OrderedDict[str, int] = OrderedDict()
        self._size = size

    def get(self, response_id: str) -> int | None:
        return self._links.get(response_id)

    def add(self, response_id: str, count: int) -> None:
        self._links[response_id] = count
        self._links.move_to_end(response_id)
        while len(self._links) > self._size:
            self._links.popitem(last=False)


async def validate_server_context(
    api: Api,
    turn: Turn,
    state: ConversationState | None,
    mode: str,
    *,
    include_system: bool,
    metrics: ResponsesMetrics,
    links: ValidatedLinks,
    reread: bool = True,
) -> Validation:
    """Compare the server's context at the Turn's anchor with the Turn (see the module text)."""
    if mode == "stateless":
        return Validation(None, None, "stateless: the server holds no context")
    scan = scan_anchors(turn, include_system=include_system, seed=chain_seed(state, mode), incremental=True)
    anchor = scan.best() if mode == "chained" else (state.previous_response_id if state else None)
    if not anchor or not scan.valid(anchor):
        return Validation(None, None, "no anchor: the next request sends the whole Turn")
    end = scan.spans[anchor].last
    held = replayed(turn.blocks[: end + 1])
    cut = _compaction_id(held)
    mine = [visible(i) for i in blocks_to_items(held, include_system=include_system)]
    base = state.base if state else None
    reads = 0
    if mode == "conversation":
        cid = state.conversation_id if state else None
        stored, reads = await list_items(api, f"/conversations/{cid}/items")
        theirs = _from_compaction([visible(i) for i in stored], cut)
        if base:  # the conversation holds context from before the Turn: compare the Turn's part
            theirs = theirs[len(theirs) - len(mine) :] if len(theirs) >= len(mine) else theirs
    else:
        theirs, known, reads = await _walk_chain(api, anchor, base, cut, links, reread)
        mine = mine[known:]
    result = Validation(anchor, theirs == mine, requests=reads, server=theirs, turn=mine)
    if result.matches:
        if mode == "chained":
            links.add(_link_key(anchor, cut), known + len(mine))
        metrics.validation("match")
        return result
    _report_mismatch(turn, result, anchor, metrics)
    return result


async def _walk_chain(
    api: Api, anchor: str, base: str | None, cut: str | None, links: ValidatedLinks, reread: bool
) -> tuple[list[tuple[Any, ...]], int, int]:
    """The items the server holds from ``anchor`` back to ``base`` (or to the compaction item ``cut``), the
    number of Turn items a validated link already covers (the walk stops there), and the reads it took."""
    links_walked: list[list[dict[str, Any]]] = []
    known = reads = 0
    rid: str | None = anchor
    while rid and rid != base:
        count = None if reread else links.get(_link_key(rid, cut))
        if count is not None:
            known = count
            break
        response = await api.get(f"/responses/{rid}")
        own, n = await list_items(api, f"/responses/{rid}/input_items")
        reads += 1 + n
        link = own + [o for o in response.get("output") or [] if isinstance(o, dict)]
        links_walked.append(link)
        if cut and any(i.get("type") == "compaction" and i.get("id") == cut for i in link):
            break  # what the server holds starts at this compaction item: the links before it do not count
        prev = response.get("previous_response_id")
        rid = str(prev) if prev else None
    return _from_compaction([visible(i) for link in reversed(links_walked) for i in link], cut), known, reads


def _report_mismatch(turn: Turn, result: Validation, anchor: str, metrics: ResponsesMetrics) -> None:
    """Say where the server's context and the Turn part, and trust no response of this chain again."""
    theirs, mine = result.server, result.turn
    diverge = next(
        (i for i, (a, b) in enumerate(zip(theirs, mine, strict=False)) if a != b), min(len(theirs), len(mine))
    )
    result.detail = (
        f"{MISMATCH}: at item {diverge} the server holds "
        f"{theirs[diverge] if diverge < len(theirs) else 'nothing'} and the Turn "
        f"{mine[diverge] if diverge < len(mine) else 'nothing'}; the next request sends the whole Turn"
    )
    log.warning("responses: %s (response %s)", result.detail, anchor)
    metrics.validation("mismatch")
    for block in turn.blocks:  # no response of this chain is trusted again: the next request starts a new one
        if block.metadata.get(_RID):
            ANCHOR_REFUSED.set(block.metadata, MISMATCH)


# -- probe ---------------------------------------------------------------------------------------------------
# ``geppetto probe``: what a Responses endpoint really does with server-side state, asked with a handful of
# small requests, judged with the evidence the engine uses (``_evidence``; docs/responses.md, "Probing an
# endpoint").
#
# The requests, in order: a stored response with a long input (the anchor), one chained on it with a short
# one (its echo and usage decide, as they would in the engine; when they leave it open, the one settling
# request the engine would make), then one request each for ``/responses/input_tokens``,
# ``/responses/compact``, ``/conversations`` and a background response, and reading the anchor back. The
# responses and the conversation it made are deleted at the end.


ANCHOR_TEXT = (
    "This is a check of the endpoint by geppetto probe; no answer is needed beyond one word. "
    "Background for the check, to be remembered: the harbour master keeps a ledger of every ship that "
    "enters the bay, noting its name, its flag, the cargo it carries, the hour of its arrival and the "
    "berth it is given; at dusk the ledger is copied, sealed and sent to the customs house on the hill, "
    "where the clerks compare it with the manifests the captains filed before they sailed. "
    "Reply with the single word: ready."
)
"""The anchor's input: long enough that a chained answer's usage tells history from the short delta."""

DELTA_TEXT = "Reply with the single word: done."

MAX_OUTPUT_TOKENS = 16
"""Each answer is cut at this many tokens (the least OpenAI accepts): the probe costs little."""


@dataclass
class ProbeReport:
    """What ``geppetto probe`` found at one endpoint (base URL and model).

    ``verdict`` is what the engine would conclude (seed an engine with it: ``endpoint_verdict=``). The
    other fields are None where the probe could not tell (an earlier step failed)."""

    base_url: str
    model: str
    verdict: Verdict
    echo_seen: str = ""
    """What the chained answer's ``previous_response_id`` was: ``exact``, ``missing``, ``null``, ``other``."""
    input_tokens: bool = False
    compact: bool = False
    conversations: bool = False
    store_default: bool | None = None
    """The ``store`` a response has when the request does not say (OpenAI: true)."""
    background: bool | None = None
    retrieve: bool | None = None
    """``GET /responses/{id}`` returns a stored response."""
    delete: bool | None = None
    """``DELETE /responses/{id}`` removes one."""
    expires_at: Any = None
    """A retention the answers state (``expires_at``), when they do."""
    requests: int = 0
    notes: list[str] = field(default_factory=list)
    """Why a step answered what it did (an error's status and message)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``geppetto probe --json`` prints; ``Verdict.from_dict`` reads it back for an engine."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            **self.verdict.to_dict(),
            "echo_seen": self.echo_seen,
            "input_tokens": self.input_tokens,
            "compact": self.compact,
            "conversations": self.conversations,
            "store_default": self.store_default,
            "background": self.background,
            "retrieve": self.retrieve,
            "delete": self.delete,
            "expires_at": self.expires_at,
            "requests": self.requests,
            "notes": list(self.notes),
        }


def _user(text: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def _why(exc: BaseException) -> str:
    if isinstance(exc, ProviderError):
        status = f"{exc.status}: " if exc.status else ""
        return f"{status}{' '.join(exc.message.split())[:200]}"
    return " ".join(str(exc).split())[:200]


def _echo_seen(answer: dict[str, Any], sent: str) -> str:
    if "previous_response_id" not in answer:
        return "missing"
    got = answer["previous_response_id"]
    return "exact" if got == sent else "null" if got is None else "other"


class _Counting:
    """The probe's requests through :class:`Api`, counted; a failed one is noted and answers None."""

    def __init__(self, api: Api, notes: list[str]) -> None:
        self.api, self.notes, self.count = api, notes, 0

    async def post(self, path: str, body: Any) -> Any:
        self.count += 1
        return await self.api.post(path, body)

    async def get(self, path: str, params: Any = None) -> Any:
        self.count += 1
        return await self.api.get(path, params)

    async def cancel(self, path: str) -> Any:
        """A bodyless POST (``responses/{id}/cancel``), as the engine sends it."""
        self.count += 1
        api = self.api
        return await api.transport.request_json("POST", path, None, headers=api.headers, error_parser=openai_error_info)

    async def delete(self, path: str) -> Any:
        self.count += 1
        return await self.api.delete(path)

    async def attempt(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return await call()
        except (GeppettoError, httpx.HTTPError) as exc:
            self.notes.append(f"{what}: {_why(exc)}")
            return None


async def _chain(http: _Counting, model: str, anchor: dict[str, Any], report: ProbeReport) -> list[str]:
    """The chained request and its verdict (into ``report``); the ids of the responses it stored."""
    anchor_id = str(anchor["id"])
    delta = _user(DELTA_TEXT)
    body = {"model": model, "input": delta, "previous_response_id": anchor_id, "max_output_tokens": MAX_OUTPUT_TOKENS}
    usage = usage_of(anchor)
    sent = Sent(
        previous_response_id=anchor_id,
        bound=token_bound(delta),
        delta_bound=token_bound(delta),
        anchor=anchor_id,
        anchor_input=usage.input_tokens or None if usage else None,
        # visible output only: reasoning tokens are not part of what a chained request reads back
        anchor_output=usage.output_tokens - usage.reasoning_tokens if usage else None,
        items=len(delta),
    )
    try:
        answer = await http.post("responses", body)
    except ProviderError as exc:
        why = f"POST /responses with previous_response_id answered {_why(exc)}"
        refused = refused_state(exc.status, exc.param, exc.message)
        if refused is not None:
            report.verdict = refused
        elif exc.status is not None and 400 <= exc.status < 500 and exc.status not in (401, 403, 408, 429):
            # the same request without the id was answered a moment ago, and the anchor was just stored:
            # the refusal is of chaining on it (an id "not found", as a server that cannot chain answers)
            report.verdict = Verdict("rejected", evidence="probe", detail=why)
        else:
            report.verdict = Verdict("unknown", evidence="probe", detail=why)
        report.notes.append(why)
        return []
    if not isinstance(answer, dict):
        report.verdict = Verdict("unknown", evidence="probe", detail="the chained answer is not a response object")
        return []
    report.echo_seen = _echo_seen(answer, anchor_id)
    if isinstance(answer.get("store"), bool):
        report.store_default = answer["store"]
    verdict = judge(sent, answer)
    if verdict.previous_response_id == "unknown":
        verdict = await settle(http, sent, answer, {"model": model, "input": delta})
    report.verdict = replace(verdict, echo=echoed(answer, anchor_id, None))
    return [str(answer["id"])] if answer.get("id") else []


async def _run(http: _Counting, model: str, report: ProbeReport) -> None:
    anchor = await http.post(
        "responses",
        {"model": model, "input": _user(ANCHOR_TEXT), "store": True, "max_output_tokens": MAX_OUTPUT_TOKENS},
    )
    if not isinstance(anchor, dict) or not anchor.get("id"):
        raise ProviderError(
            f"{report.base_url}/responses answered without a response id: {str(anchor)[:200]}", provider="openai"
        )
    report.expires_at = anchor.get("expires_at")
    stored = [str(anchor["id"]), *await _chain(http, model, anchor, report)]

    count = await http.attempt(
        "POST /responses/input_tokens",
        lambda: http.post("responses/input_tokens", {"model": model, "input": _user(DELTA_TEXT)}),
    )
    report.input_tokens = isinstance(count, dict) and isinstance(count.get("input_tokens"), int)
    compacted = await http.attempt(
        "POST /responses/compact", lambda: http.post("responses/compact", {"model": model, "input": _user(DELTA_TEXT)})
    )
    report.compact = isinstance(compacted, dict) and isinstance(compacted.get("output"), list)
    conversation = await http.attempt("POST /conversations", lambda: http.post("conversations", {}))
    report.conversations = isinstance(conversation, dict) and bool(conversation.get("id"))
    report.verdict = replace(report.verdict, conversations=report.conversations)
    body = {
        "model": model,
        "input": _user(DELTA_TEXT),
        "background": True,
        "store": True,
        "max_output_tokens": MAX_OUTPUT_TOKENS,
    }
    background = await http.attempt("POST /responses with background", lambda: http.post("responses", {**body}))
    report.background = isinstance(background, dict) and background.get("background") is True
    if isinstance(background, dict) and background.get("id"):
        bid = str(background["id"])
        if background.get("status") in ("queued", "in_progress"):
            await http.attempt("cancel the background response", lambda: http.cancel(f"responses/{bid}/cancel"))
        stored.append(bid)
    read = await http.attempt("GET /responses/{id}", lambda: http.get(f"responses/{stored[0]}"))
    report.retrieve = isinstance(read, dict) and isinstance(read.get("output"), list)

    deleted = [await http.attempt(f"DELETE /responses/{rid}", _deleting(http, f"responses/{rid}")) for rid in stored]
    # the anchor's: a cancelled background response may be gone already
    report.delete = isinstance(deleted[0], dict) and deleted[0].get("deleted") is True
    if report.conversations and isinstance(conversation, dict):
        cid = str(conversation["id"])
        await http.attempt(f"DELETE /conversations/{cid}", _deleting(http, f"conversations/{cid}"))


def _deleting(http: _Counting, path: str) -> Callable[[], Any]:
    return lambda: http.delete(path)


async def probe(
    base_url: str,
    model: str,
    api_key: str,
    *,
    transport: HttpTransport | None = None,
    request_timeout: float = 60.0,
) -> ProbeReport:
    """Ask the Responses endpoint at ``base_url`` (e.g. ``http://127.0.0.1:4000/v1``) what it does, with
    ``model``: whether it keeps the context ``previous_response_id`` names (the verdict the engine would
    reach, from the same evidence), and which of the other stateful routes work.

    ``request_timeout``: seconds each request may take. Raises :class:`~geppetto.ProviderError` when the endpoint does not answer a plain stored response (a
    wrong URL, key or model); every later step's failure is a finding, noted in ``notes``."""
    root = base_url.rstrip("/")
    own = transport is None
    http_transport = transport or HttpTransport(
        root,
        provider="openai",
        error_parser=openai_error_info,
        retry=RetryPolicy(max_retries=1),
        timeout=request_timeout,
    )
    report = ProbeReport(root, model, Verdict("unknown", evidence="probe", detail="not probed"))
    http = _Counting(Api(http_transport, {"Authorization": f"Bearer {api_key}"}), report.notes)
    started = time.time()
    try:
        await _run(http, model, report)
    finally:
        report.requests = http.count
        if own:
            await http_transport.aclose()
    report.verdict = replace(report.verdict, learned_at=started)
    return report


# -- append ---------------------------------------------------------------------------------------------------
# ``prefix_policy="append"`` on the Responses API: a changed system prompt goes as an appended developer
# message, so the chain's anchor and the reasoning made under the old prompt stay valid.
#
# The server holds the system (or developer) blocks of a response's context as they were sent, and every
# reasoning item is bound to them. When one of them changed since (a middleware rewrote it) and a response
# already came after it, the Turn is made append-only before the request is planned: the block gets back the
# text the server holds, and the new text goes in a new developer block after the latest response's blocks
# (before the new user messages at the end of the Turn). The Turn then says what the server and the model
# see: the old prompt, then the new one as a later instruction. Only one developer block is appended for
# each new text: a middleware that sets the same prompt on every request adds it once.
#
# Under ``instructions_mode`` the system blocks travel as ``instructions``, which every reasoning item is
# bound to and which an appended developer block would join: there it drops, and the guard's report says so.


SYSTEM_HELD = turn_data_key("openai", "system_held", 1, dict)
"""``openai.system_held@v1`` in turn data: ``{"texts": {block id: text as last sent}, "notes": {block id:
the text of the latest developer block appended for it}}``."""


def append_system_changes(turn: Turn) -> int:
    """Make ``turn`` append-only for its system blocks (see above); the number of developer blocks added."""
    held: dict[str, Any] = dict(SYSTEM_HELD.get(turn.data) or {})
    texts: dict[str, str] = dict(held.get("texts") or {})
    notes: dict[str, str] = dict(held.get("notes") or {})
    last = max((i for i, b in enumerate(turn.blocks) if BLOCK_META_RESPONSE_ID.get(b.metadata)), default=-1)
    added: list[tuple[Block, Block]] = []
    for index, block in enumerate(turn.blocks):
        if block.kind is not BlockKind.SYSTEM:
            continue
        text = str(block.payload.get(PAYLOAD_TEXT) or "")
        old = texts.get(block.id)
        if old is None or old == text or index > last:
            texts[block.id] = text  # new, unchanged, or no response came after it yet
            continue
        block.payload[PAYLOAD_TEXT] = old  # what the server holds, and the reasoning is bound to
        if notes.get(block.id) != text:
            note = Block(BlockKind.SYSTEM, {PAYLOAD_TEXT: text}, "developer")
            who = BLOCK_META_MIDDLEWARE.get(block.metadata)
            if who:
                BLOCK_META_MIDDLEWARE.set(note.metadata, who)
            notes[block.id] = text
            added.append((block, note))
    if added:
        at = len(turn.blocks)
        while at - 1 > last and turn.blocks[at - 1].kind is BlockKind.USER:
            at -= 1
        for _, note in reversed(added):
            turn.insert(at, note)
        for _, note in added:
            texts[note.id] = str(note.payload[PAYLOAD_TEXT])
    SYSTEM_HELD.set(turn.data, {"texts": texts, "notes": notes})
    return len(added)
