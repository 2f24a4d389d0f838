"""Server state shared by every simulated API: stored responses, conversations, queues, records."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ._errors import SimError
from ._faults import Fault
from ._model import Reply


@dataclass(frozen=True)
class RecordedRequest:
    """One request the simulator received: parsed JSON body (None when absent or not JSON) and byte size.

    ``effects``: what the service did to the request that its answer does not say, e.g.
    ``{"dropped_reasoning": ["rs_..."]}`` (OpenAI's silent drop of reasoning after a changed prefix)."""

    method: str
    path: str
    body: Any
    size: int
    headers: dict[str, str]
    query: dict[str, str] = field(default_factory=dict)
    effects: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoredResponse:
    """A stored OpenAI response: its own normalized input, output, parent and full object."""

    id: str
    input: list[dict[str, Any]]
    output: list[dict[str, Any]]
    previous_response_id: str | None
    obj: dict[str, Any]


@dataclass
class StoredInteraction:
    """A stored Gemini interaction: the history a chained request starts from, its own steps, its frames.

    ``held`` is the context it saw followed by its output (what ``previous_interaction_id`` continues);
    ``steps`` its own input steps then its output steps (what ``GET`` shows); ``frames`` its event stream.
    """

    id: str
    held: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    input: Any
    obj: dict[str, Any]
    frames: list[bytes] = field(default_factory=list)


@dataclass
class Conversation:
    """An OpenAI conversation: metadata and items in order (oldest first)."""

    id: str
    created_at: int
    metadata: dict[str, Any]
    items: list[dict[str, Any]] = field(default_factory=list)
    deleted: bool = False


DEFAULT_BACKGROUND_PACE = 0.002
"""Seconds between two events of a background run (``Simulator.background_pace``)."""

DEFAULT_WS_MAX_AGE = 3600.0
"""Seconds a Responses WebSocket connection lasts (the service's documented 60 minutes)."""

_SEAL_HEADER = b"\x80\x00\x00\x00\x00\x00"  # base64 "gAAAAAAA": reads like a Fernet token's start


def new_id(prefix: str) -> str:
    """A fresh provider-style id: `prefix` + 32 hex characters."""
    return prefix + secrets.token_hex(16)


class SimState:
    """Everything the simulator remembers; every method is thread-safe (the test thread calls in)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.secret = secrets.token_bytes(16)
        self.compat_mode = False
        self.base_quirks: frozenset[str] = frozenset()
        """The quirks the simulator was started with (``reset`` returns to them)."""
        self.quirks: frozenset[str] = frozenset()
        """The quirks in force (see ``_quirks.QUIRKS``)."""
        self.reject_empty_input = False
        self.claude_prefix_mismatch = "error"
        """What Claude does with a thinking block replayed after a changed prefix when the request does not
        say (``thinking.block_binding``): ``"error"`` (a 400, the default for accounts created from
        2026-08-31) or ``"drop_block"``."""
        self.closing = False
        self.background_pace = DEFAULT_BACKGROUND_PACE
        self.background_resume_window: float | None = None
        self.background_runs: dict[str, Any] = {}
        self.sockets: dict[str, Any] = {}
        """The open Responses WebSocket connections by id (``_openai_ws.Connection``)."""
        self.ws_idle_timeout: float | None = None
        """Seconds a Responses WebSocket connection may stay idle before the server closes it (None: never)."""
        self.ws_max_age = DEFAULT_WS_MAX_AGE
        self._reset_locked()

    def _reset_locked(self) -> None:
        self.replies: deque[Reply] = deque()
        self.faults: deque[Fault] = deque()
        self.requests: list[RecordedRequest] = []
        self.responses: dict[str, StoredResponse] = {}
        self.conversations: dict[str, Conversation] = {}
        self.interactions: dict[str, StoredInteraction] = {}
        self.busy_conversations: set[str] = set()
        # Items of stored responses and conversations, addressable by id (item_reference, bare reasoning ids).
        self.items: dict[str, dict[str, Any]] = {}
        # Output item id -> id of the reasoning item that produced it (for every response, stored or not).
        self.produced_by: dict[str, str] = {}
        # Ids of the compaction items in-request compaction made (a context starts at the latest one).
        self.compactions: set[str] = set()
        # Any response id (all APIs, stored or not) -> the effective context the model saw.
        self.contexts: dict[str, list[Any]] = {}
        # Thinking signature (or redacted data) -> digest of the prefix it was produced after (Claude).
        self.thinking_bound: dict[str, str] = {}
        # Reasoning item id -> digest of the context before it when produced (OpenAI).
        self.reasoning_bound: dict[str, str] = {}
        self.prompt_cache: set[str] = set()
        self.fingerprints: dict[str, dict[str, Any]] = {}
        """Claude answer id -> the fingerprint of the request that asked for cache diagnostics."""
        """Digests of the prompt prefixes cached (Anthropic's breakpoints, Gemini's implicit cache)."""

    def reset(self) -> None:
        """Forget everything: stored responses, conversations, queued replies and faults, recorded requests.

        Also turns compat mode off, puts the quirks back to those the simulator started with, and stops every background run (their pace and resume window back to
        the defaults).
        """
        with self.lock:
            self.compat_mode = False
            self.quirks = self.base_quirks
            self.reject_empty_input = False
            self.claude_prefix_mismatch = "error"
            self.background_pace = DEFAULT_BACKGROUND_PACE
            self.background_resume_window = None
            self.ws_idle_timeout, self.ws_max_age = None, DEFAULT_WS_MAX_AGE
            for run in self.background_runs.values():
                run.stop()
            self.background_runs = {}
            self._reset_locked()

    def record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def next_reply(self) -> Reply | None:
        with self.lock:
            return self.replies.popleft() if self.replies else None

    def forget(self, response_id: str) -> None:
        """Drop a stored response or interaction as if it expired (a response's items stay addressable, like
        the service's)."""
        with self.lock:
            self.responses.pop(response_id, None)
            self.interactions.pop(response_id, None)

    def next_fault(self) -> Fault | None:
        with self.lock:
            return self.faults.popleft() if self.faults else None

    def sign(self, *parts: str) -> str:
        """A deterministic MAC over `parts` with this simulator's secret (signatures, encrypted content)."""
        mac = hmac.new(self.secret, "\x1f".join(parts).encode(), hashlib.sha256).digest()
        return base64.b64encode(mac[:24]).decode()

    def seal(self, kind: str, item_id: str, text: str) -> str:
        """Opaque encrypted content for a reasoning item, verifiable with `unseal`.

        The blob is valid base64 (URL-safe, padded; standard alphabet for Gemini, whose `thoughtSignature` is a
        proto bytes field) of a Fernet-like version header and the payload, so OpenAI blobs start with `gAAAA`.
        """
        payload = json.dumps({"k": kind, "id": item_id, "t": text, "m": self.sign(kind, item_id, text)})
        raw = _SEAL_HEADER + payload.encode()
        encode = base64.b64encode if kind == "gemini" else base64.urlsafe_b64encode
        return encode(raw).decode()

    def unseal(self, kind: str, blob: str) -> dict[str, Any] | None:
        """The sealed payload ({"id", "t"}) when `blob` is intact and ours, else None."""
        try:
            raw = base64.b64decode(blob.replace("-", "+").replace("_", "/").encode(), validate=True)
            if not raw.startswith(_SEAL_HEADER):
                return None
            payload = json.loads(raw[len(_SEAL_HEADER) :])
        except (ValueError, TypeError):
            return None
        if not isinstance(payload, dict) or payload.get("k") != kind:
            return None
        expected = self.sign(kind, str(payload.get("id")), str(payload.get("t")))
        return payload if hmac.compare_digest(expected, str(payload.get("m"))) else None

    def now(self) -> int:
        return int(time.time())


def stored_or_404(state: SimState, response_id: str) -> StoredResponse:
    """The stored response ``response_id`` (the caller holds ``state.lock``), else the API's 404."""
    stored = state.responses.get(response_id)
    if stored is None:
        raise SimError(404, f"Response with id '{response_id}' not found.", param="response_id")
    return stored
