"""``geppetto probe``: what a Responses endpoint really does with server-side state, asked with a handful of
small requests, judged with the evidence the engine uses (``_evidence``; docs/responses.md, "Probing an
endpoint").

The requests, in order: a stored response with a long input (the anchor), one chained on it with a short
one (its echo and usage decide, as they would in the engine; when they leave it open, the one settling
request the engine would make), then one request each for ``/responses/input_tokens``,
``/responses/compact``, ``/conversations`` and a background response, and reading the anchor back. The
responses and the conversation it made are deleted at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from geppetto._exceptions import GeppettoError, ProviderError

from .._http import HttpTransport, openai_error_info
from .._retry import RetryPolicy
from ._answer import usage_of
from ._evidence import Sent, Verdict, echoed, judge, refused_state, settle, token_bound
from ._send import Api

__all__ = ["ProbeReport", "probe"]

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
