"""Whether a Responses endpoint keeps server-side state, decided from evidence that holds on real servers.

An answer that echoes the ``previous_response_id`` (or ``conversation``) it was sent proves the server
chained it. Many compatible servers send no echo, ``null``, or another id (a proxy's upstream id) although
they used the stored context, so a missing or different echo proves nothing by itself. What decides then,
in this order (docs/responses.md, "Servers other than OpenAI"):

- ``usage``: the answer's ``input_tokens`` against what this request alone could count (an upper bound
  from the bytes it sent) and against the anchor's own recorded ``input_tokens``. A server that read the
  stored context counts more than the request could hold, or at least the anchor's input plus the delta;
  one that counts fewer tokens than the anchor alone read did not use it. Free: it comes with the answer.
- one extra request per endpoint, only when ``usage`` left it open: ``POST /responses/input_tokens`` for
  the request without its ``previous_response_id`` (what a server that forgot would count), or, when the
  answer carried no usage, ``GET /responses/{id}`` (its stored echo, usage or input).
- a chained tool result refused as having no call (``lost_calls``): the anchor made that call, so a
  server that cannot find it answers from the new input alone.
- what is remembered for the endpoint (base URL and model): in this process, and in the session store
  when there is one, with the time it was learned (a new process does not pay again).

"Ignores state" is concluded only from evidence that shows it (fewer tokens than the anchor read, the
server's own count of the request alone, a refused tool result); inconclusive evidence leaves the
verdict ``unknown`` and the engine chaining.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import httpx

from geppetto._exceptions import ConfigurationError, GeppettoError

__all__ = [
    "EVIDENCE",
    "VERDICTS",
    "Endpoint",
    "EndpointMemory",
    "Requests",
    "Sent",
    "StateIgnored",
    "Verdict",
    "VerdictStore",
    "echoed",
    "endpoint_verdicts",
    "fresh",
    "judge",
    "judge_count",
    "judge_stored",
    "lost_calls",
    "refused_state",
    "settle",
    "token_bound",
]

log = logging.getLogger("geppetto.providers.openai_responses")

VERDICTS = ("kept", "ignored", "rejected", "unknown")
"""What an endpoint does with ``previous_response_id``: uses the stored context, accepts and ignores it,
refuses it (an error), or not known yet."""

EVIDENCE = ("echo", "usage", "input_tokens", "response_get", "input_items", "error", "probe", "seed", "none")
"""What decided a verdict: the answer's echo, its usage, the server's count of the request alone, the
stored response read back, its input items, an error that shows the stored context missing (a tool
result whose call the anchor holds, refused as having no call), ``geppetto probe``, a verdict given to
the engine, nothing."""

_LOST_CALL = re.compile(r"no tool call found|tool_calls'? must be|preceding message with 'tool_calls'|preceeding", re.I)

MAX_AGE = 30 * 24 * 3600.0
"""A verdict read from a store older than this (seconds) is learned again: servers get upgraded."""

ITEM_PAD = 8
"""Tokens allowed per input item beyond its text's bytes (a chat template's role and separators)."""


@dataclass(frozen=True)
class Verdict:
    """What an endpoint (base URL and model) was found to do with server-side state.

    ``previous_response_id``: one of :data:`VERDICTS`. ``echo``: its answers name the id they were chained
    on. ``conversations``: whether ``/conversations`` works (None: not looked at). ``evidence``: what
    decided (one of :data:`EVIDENCE`). ``learned_at``: when (epoch seconds). ``detail``: the figures, for
    the log and the inspector."""

    previous_response_id: str
    echo: bool = False
    conversations: bool | None = None
    evidence: str = "none"
    learned_at: float = field(default_factory=time.time)
    detail: str = ""

    def __post_init__(self) -> None:
        if self.previous_response_id not in VERDICTS:
            raise ConfigurationError(
                f"unknown verdict {self.previous_response_id!r} for previous_response_id; "
                f"use one of {', '.join(VERDICTS)}"
            )
        if self.evidence not in EVIDENCE:
            raise ConfigurationError(f"unknown evidence {self.evidence!r}; use one of {', '.join(EVIDENCE)}")

    @property
    def kept(self) -> bool:
        return self.previous_response_id == "kept"

    @property
    def ignored(self) -> bool:
        """The server does not chain (it ignores or refuses ``previous_response_id``): send whole Turns."""
        return self.previous_response_id in ("ignored", "rejected")

    def describe(self) -> str:
        """``kept (usage: 412 input tokens, ...)``: the verdict, what decided it and its figures."""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.previous_response_id} ({self.evidence}{detail})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a store keeps (and ``geppetto probe --json`` prints)."""
        return {
            "previous_response_id": self.previous_response_id,
            "echo": self.echo,
            "conversations": self.conversations,
            "evidence": self.evidence,
            "learned_at": self.learned_at,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        """Read :meth:`to_dict`'s form back (unknown keys ignored)."""
        conversations = data.get("conversations")
        return cls(
            previous_response_id=str(data.get("previous_response_id") or "unknown"),
            echo=bool(data.get("echo")),
            conversations=None if conversations is None else bool(conversations),
            evidence=str(data.get("evidence") or "none"),
            learned_at=float(data.get("learned_at") or 0.0),
            detail=str(data.get("detail") or ""),
        )


def lost_calls(items: Iterable[Mapping[str, Any]], status: int | None, message: str) -> Verdict | None:
    """The verdict a rejected chained request shows, when it shows one: a 400 that says a tool result sent
    after the anchor has no call, although the anchor's answer made that call, means the server answered
    from the new input alone (it forgot the stored context). None for any other rejection."""
    if status != 400:
        return None
    calls = [str(i.get("call_id")) for i in items if i.get("type") == "function_call_output" and i.get("call_id")]
    if not calls:
        return None
    if not (_LOST_CALL.search(message) or any(c in message for c in calls)):
        return None
    return Verdict(
        "ignored",
        evidence="error",
        detail=f"a tool result of the anchor's call was refused as having no call: {message[:200]}",
    )


_UNSUPPORTED = re.compile(r"unrecognized|unsupported|not supported|unknown|extra (inputs|fields)|not permitted", re.I)


def refused_state(status: int | None, param: str | None, message: str) -> Verdict | None:
    """The verdict a 400 that refuses the ``previous_response_id`` parameter itself shows (a server that
    does not take it: "Unrecognized request argument supplied: previous_response_id", "Extra inputs are not
    permitted"): ``rejected``. None for any other error, a parent not found among them."""
    if status != 400 or "not found" in message.lower():
        return None
    named = param == "previous_response_id" or "previous_response_id" in message
    if not (named and _UNSUPPORTED.search(message)):
        return None
    return Verdict("rejected", evidence="error", detail=f"the server refused previous_response_id: {message[:200]}")


class StateIgnored(GeppettoError):
    """The server answered a chained (or conversation) request without using the stored context."""

    def __init__(self, field_name: str, verdict: Verdict) -> None:
        super().__init__(f"{field_name} ignored: {verdict.describe()}")
        self.field = field_name
        self.verdict = verdict


@dataclass(frozen=True)
class Sent:
    """What a stateful request sent, as far as judging its answer needs.

    ``previous_response_id`` / ``conversation_id``: the state it named. ``bound``: at most how many tokens
    the request alone holds (its input, instructions and tools; :func:`token_bound`). ``delta_bound``: the
    same for its input items alone. ``anchor``: the response whose context it continues, with that
    response's recorded ``anchor_input`` / ``anchor_output`` tokens when the Turn has them (visible
    output: reasoning tokens left out). ``items``: how many input items it sent. ``shrinks``: the server
    may legitimately read less than it holds (compaction, truncation), so a low count proves nothing."""

    previous_response_id: str | None = None
    conversation_id: str | None = None
    bound: int = 0
    delta_bound: int = 0
    anchor: str | None = None
    anchor_input: int | None = None
    anchor_output: int | None = None
    items: int = 0
    shrinks: bool = False

    @property
    def field(self) -> str:
        return "previous_response_id" if self.previous_response_id else "conversation"


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            # what names or types an item, not what the model reads
            if key not in ("type", "role", "status", "id", "call_id", "encrypted_content"):
                _strings(inner, out)
    elif isinstance(value, (list, tuple)):
        for inner in value:
            _strings(inner, out)


def token_bound(items: Iterable[Any]) -> int:
    """At most how many tokens ``items`` (input items, tools, instruction strings) make: the UTF-8 bytes of
    their text (a byte-level tokenizer makes at most one token a byte) plus :data:`ITEM_PAD` each."""
    total = 0
    for item in items:
        texts: list[str] = []
        _strings(item, texts)
        total += ITEM_PAD + sum(len(t.encode()) for t in texts)
    return total


def echoed(response: Mapping[str, Any], previous_response_id: str | None, conversation_id: str | None) -> bool:
    """Whether the answer names exactly the state it was sent (the proof that needs nothing else)."""
    if previous_response_id:
        return response.get("previous_response_id") == previous_response_id
    conv = response.get("conversation")
    conv_id = conv.get("id") if isinstance(conv, Mapping) else conv
    return bool(conversation_id) and conv_id == conversation_id


def _tokens(response: Mapping[str, Any]) -> tuple[int, int] | None:
    """(input_tokens, cached_tokens) of the answer's usage, None without a usable count."""
    usage = response.get("usage")
    if not isinstance(usage, Mapping):
        return None
    raw = usage.get("input_tokens")
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return raw, cached if isinstance(cached, int) and not isinstance(cached, bool) and cached > 0 else 0


def judge(sent: Sent, response: Mapping[str, Any]) -> Verdict:
    """The verdict one answered stateful request supports on its own (no request made): ``kept`` by its
    echo or its usage, ``ignored`` by its usage, else ``unknown`` (the detail says what was missing)."""
    if echoed(response, sent.previous_response_id, sent.conversation_id):
        return Verdict("kept", echo=True, evidence="echo", detail=f"the answer names {sent.field} it was sent")
    what = sent.field
    got = response.get(what)
    echo = "no echo" if what not in response else ("a null echo" if got is None else f"echo {got!r}")
    counted = _tokens(response)
    if counted is None:
        return Verdict("unknown", evidence="none", detail=f"{echo} and no usage")
    tokens, cached = counted
    if tokens > sent.bound:
        return Verdict(
            "kept",
            evidence="usage",
            detail=f"{echo}; {tokens} input tokens, more than the {sent.bound} this request can hold",
        )
    anchor = f"anchor {sent.anchor}" if sent.anchor else "the anchor"
    if sent.anchor_input is not None:
        if tokens >= sent.anchor_input + sent.delta_bound:
            return Verdict(
                "kept",
                evidence="usage",
                detail=f"{echo}; {tokens} input tokens, at least the {sent.anchor_input} {anchor} read "
                f"plus the {sent.delta_bound} the new input can hold",
            )
        # cached tokens added: a server that counts them apart from input_tokens read that many more
        if tokens + cached < sent.anchor_input and not sent.shrinks:
            return Verdict(
                "ignored",
                evidence="usage",
                detail=f"{echo}; {tokens} input tokens, fewer than the {sent.anchor_input} {anchor} alone read",
            )
    known = f", {anchor} read {sent.anchor_input}" if sent.anchor_input is not None else ""
    return Verdict(
        "unknown",
        evidence="usage",
        detail=f"{echo}; {tokens} input tokens (this request holds at most {sent.bound}{known})",
    )


def judge_count(sent: Sent, response: Mapping[str, Any], alone: int) -> Verdict:
    """The verdict from the server's own count of the request without its state (``alone``, from ``POST
    /responses/input_tokens``): a server that forgot counted just that; one that kept counted the stored
    context on top (at least half the anchor's visible output more)."""
    counted = _tokens(response)
    if counted is None:
        return Verdict("unknown", evidence="input_tokens", detail=f"the request alone counts {alone}; no usage")
    tokens = counted[0]
    gap = tokens - alone
    need = max(1, (sent.anchor_output or 0) // 2)
    detail = f"the answer counted {tokens} input tokens, the request alone counts {alone}"
    if gap >= need:
        return Verdict("kept", evidence="input_tokens", detail=detail)
    if gap <= 0 and not sent.shrinks:
        return Verdict("ignored", evidence="input_tokens", detail=detail)
    return Verdict("unknown", evidence="input_tokens", detail=detail)


def judge_stored(sent: Sent, stored: Mapping[str, Any]) -> Verdict:
    """The verdict from the answer read back with ``GET /responses/{id}``: its stored echo, its usage, or an
    ``input`` that holds more items than were sent (servers that store the whole context they used)."""
    found = judge(sent, stored)
    if found.previous_response_id != "unknown":
        return replace(found, evidence="response_get", detail=f"read back: {found.detail}")
    held = stored.get("input")
    if isinstance(held, list) and sent.items and len(held) > sent.items:
        return Verdict(
            "kept",
            evidence="response_get",
            detail=f"the stored response holds {len(held)} input items; {sent.items} were sent",
        )
    return replace(found, evidence="response_get", detail=f"read back: {found.detail}")


class Requests(Protocol):
    """What settling needs of the engine's requests (its ``Api``)."""

    async def post(self, path: str, body: Any) -> Any: ...

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


async def settle(api: Requests, sent: Sent, response: Mapping[str, Any], count_body: Mapping[str, Any]) -> Verdict:
    """The one extra request that settles what :func:`judge` left open: with usage, the server's count of
    ``count_body`` (the request without its state; ``POST /responses/input_tokens``); without, the answer
    read back (``GET /responses/{id}``). A server that has neither route leaves the verdict ``unknown``."""
    rid = str(response.get("id") or "")
    try:
        if _tokens(response) is not None:
            counted = await api.post("responses/input_tokens", dict(count_body))
            alone = counted.get("input_tokens") if isinstance(counted, Mapping) else None
            if not isinstance(alone, int) or isinstance(alone, bool):
                return Verdict("unknown", evidence="input_tokens", detail=f"no count in {str(counted)[:120]}")
            return judge_count(sent, response, alone)
        if not rid:
            return Verdict("unknown", evidence="none", detail="no usage and no response id to read back")
        stored = await api.get(f"responses/{rid}")
    except (GeppettoError, httpx.HTTPError) as exc:
        route = "POST /responses/input_tokens" if _tokens(response) is not None else f"GET /responses/{rid}"
        evidence = "input_tokens" if route.startswith("POST") else "response_get"
        return Verdict("unknown", evidence=evidence, detail=f"{route} failed: {str(exc)[:160]}")
    if not isinstance(stored, Mapping):
        return Verdict("unknown", evidence="response_get", detail="the stored response is not an object")
    return judge_stored(sent, stored)


@runtime_checkable
class VerdictStore(Protocol):
    """A store that remembers endpoint verdicts across processes (the SQL stores and ``MemoryTurnStore``)."""

    async def load_endpoint_verdict(self, base_url: str, model: str) -> dict[str, Any] | None:
        """The verdict saved for the endpoint (:meth:`Verdict.to_dict`'s form), None when there is none."""
        ...

    async def save_endpoint_verdict(self, base_url: str, model: str, verdict: dict[str, Any]) -> None:
        """Keep ``verdict`` for the endpoint, replacing the one saved before."""
        ...


class EndpointMemory:
    """The verdicts learned in this process, by (base URL, model). Engines of the same endpoint share
    :data:`endpoint_verdicts`; one that learns a verdict spares the others the evidence."""

    def __init__(self) -> None:
        self._verdicts: dict[tuple[str, str], Verdict] = {}

    def get(self, base_url: str, model: str) -> Verdict | None:
        return self._verdicts.get((base_url.rstrip("/"), model))

    def put(self, base_url: str, model: str, verdict: Verdict) -> None:
        self._verdicts[(base_url.rstrip("/"), model)] = verdict

    def forget(self, base_url: str, model: str) -> None:
        self._verdicts.pop((base_url.rstrip("/"), model), None)

    def clear(self) -> None:
        self._verdicts.clear()

    def items(self) -> list[tuple[tuple[str, str], Verdict]]:
        return list(self._verdicts.items())


endpoint_verdicts = EndpointMemory()
"""The process-wide memory every ``ResponsesEngine`` reads and writes."""


def fresh(verdict: Verdict | None, now: float | None = None) -> Verdict | None:
    """``verdict`` unless it is older than :data:`MAX_AGE` (then None: learn it again)."""
    if verdict is None:
        return None
    if (now if now is not None else time.time()) - verdict.learned_at > MAX_AGE:
        return None
    return verdict


class Endpoint:
    """One engine's knowledge of its endpoint (base URL and model): a verdict it was given, else the one
    this process learned (``memory``), else the one a store holds (read once, on first need)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        memory: EndpointMemory | None = None,
        seed: Verdict | None = None,
        store: VerdictStore | None = None,
    ) -> None:
        self.base_url, self.model = base_url.rstrip("/"), model
        self.memory = memory if memory is not None else endpoint_verdicts
        self.store = store
        self.pending = store is not None  # the store is read before the first request
        self.echoes = False  # an echo was seen and remembered: later echoes cost nothing more
        if seed is not None:
            self.memory.put(self.base_url, self.model, seed)

    def current(self) -> Verdict | None:
        """The verdict known now (None: nothing learned yet)."""
        return self.memory.get(self.base_url, self.model)

    def attach(self, store: VerdictStore) -> None:
        """Remember verdicts in ``store`` too (and read the one it holds before the next request)."""
        if self.store is None:
            self.store, self.pending = store, True

    async def load(self) -> Verdict | None:
        """The store's verdict for the endpoint when this process knows none yet (read once)."""
        self.pending = False
        known = self.current()
        if known is not None or self.store is None:
            return known
        try:
            data = await self.store.load_endpoint_verdict(self.base_url, self.model)
            verdict = fresh(Verdict.from_dict(data)) if data else None
        except (GeppettoError, OSError, ValueError) as exc:
            log.warning(
                "responses: could not read the verdict for %s (%s) from the store: %s", self.base_url, self.model, exc
            )
            return None
        if verdict is not None:
            self.memory.put(self.base_url, self.model, verdict)
            log.info(
                "responses: %s (%s) keeps state? %s, learned %s (from the store)",
                self.base_url,
                self.model,
                verdict.describe(),
                time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(verdict.learned_at)),
            )
        return verdict

    async def learn(self, verdict: Verdict) -> None:
        """Remember ``verdict`` (in memory, and in the store when there is one) unless it says what the
        known one says."""
        known = self.current()
        if known is not None and (known.previous_response_id, known.echo, known.evidence) == (
            verdict.previous_response_id,
            verdict.echo,
            verdict.evidence,
        ):
            return
        if known is not None and known.conversations is not None and verdict.conversations is None:
            verdict = replace(verdict, conversations=known.conversations)
        self.memory.put(self.base_url, self.model, verdict)
        if verdict.evidence != "echo":  # an echo is the common, expected proof: not worth a line
            log.info("responses: %s (%s) keeps state? %s", self.base_url, self.model, verdict.describe())
        if self.store is None:
            return
        try:
            await self.store.save_endpoint_verdict(self.base_url, self.model, verdict.to_dict())
        except (GeppettoError, OSError, ValueError) as exc:
            log.warning(
                "responses: could not save the verdict for %s (%s) in the store: %s", self.base_url, self.model, exc
            )
