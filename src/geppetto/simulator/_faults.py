"""Fault injection: error statuses, dropped and stalled streams, malformed events, slow first bytes, expiry."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from starlette.types import Receive, Scope, Send

from ._errors import SimError

FAULT_HEADER = "x-sim-fault"
ANTHROPIC_RETRY_AFTER = "1"
_STATUS_TEXT: dict[str, dict[int, tuple[str, str, str | None]]] = {
    "openai": {
        429: ("Rate limit reached for requests. Please try again later.", "requests", "rate_limit_exceeded"),
        500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
        503: ("The engine is currently overloaded, please try again later.", "server_error", None),
    },
    "anthropic": {
        429: ("Number of requests has exceeded your rate limit.", "rate_limit_error", None),
        500: ("Internal server error", "api_error", None),
        503: ("Service unavailable", "api_error", None),
        529: ("Overloaded", "overloaded_error", None),
    },
    "gemini": {
        429: ("Resource has been exhausted (e.g. check quota).", "", None),
        500: (
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
            "",
            None,
        ),
        503: ("The model is overloaded. Please try again later.", "", None),
    },
}

_STATUS_TEXT["interactions"] = {status: (text, "", None) for status, (text, _, _) in _STATUS_TEXT["gemini"].items()}


@dataclass(frozen=True)
class Fault:
    """One injected fault for one generation request.

    status: answer with this HTTP error (429 carries `retry_after` seconds in `retry-after`).
    drop_after: close the connection after this many stream events (no terminal event).
    malformed_after: after this many events send one event whose data is not JSON, then continue.
    deep_after: after this many events send one event whose JSON nests 10,000 levels deep, then continue.
    huge_after: after this many events send one event of `huge_bytes` bytes (a valid JSON string), then continue.
    slow_first_byte: wait this many seconds before sending anything.
    stall_after: after this many events stop sending for `stall_seconds`, then drop the connection.
    error_after: after this many events send the provider's mid-stream error event and end the stream.
    forget: forget this stored response before handling the request (emulates expiry).
    compat: handle this one request in compat mode (ignore `previous_response_id` and `store`).
    finish_after_cut: with `drop_after` or `stall_after`, the server goes on after the cut: it finishes the
        generation and stores the answer (a stored response, an interaction, the conversation's new items)
        as if the client had read it all, `finish_delay` seconds later (until then a stored response or
        interaction reads back as `in_progress`, as it does from the start of a stall). Without it a cut stream stores nothing.

    Raises ValueError for a status outside 400-599, a negative count or a negative or non-finite time.
    """

    status: int | None = None
    retry_after: float | None = None
    drop_after: int | None = None
    malformed_after: int | None = None
    deep_after: int | None = None
    huge_after: int | None = None
    huge_bytes: int = 1 << 20
    slow_first_byte: float | None = None
    stall_after: int | None = None
    stall_seconds: float = 30.0
    error_after: int | None = None
    forget: str | None = None
    compat: bool = False
    finish_after_cut: bool = False
    finish_delay: float = 0.0

    def __post_init__(self) -> None:
        if self.status is not None and not 400 <= self.status <= 599:
            raise FaultValueError(f"status must be an HTTP error status from 400 to 599, got {self.status}")
        for name in (
            "drop_after",
            "malformed_after",
            "deep_after",
            "huge_after",
            "huge_bytes",
            "stall_after",
            "error_after",
        ):
            count = getattr(self, name)
            if count is not None and count < 0:
                raise FaultValueError(f"{name} must be 0 or more, got {count}")
        for name in ("retry_after", "slow_first_byte", "stall_seconds", "finish_delay"):
            seconds = getattr(self, name)
            if seconds is not None and not 0 <= seconds < math.inf:
                raise FaultValueError(f"{name} must be a finite number of seconds, 0 or more, got {seconds}")

    def error(self, api: str) -> SimError | None:
        """The status error this fault answers with in `api`'s terms, or None for stream faults."""
        if self.status is None:
            return None
        message, etype, code = _STATUS_TEXT.get(api, {}).get(self.status, (f"Simulated HTTP {self.status}.", "", None))
        etype = etype or ("server_error" if self.status >= 500 else "invalid_request_error")
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            headers["retry-after"] = _seconds(self.retry_after)
            headers["retry-after-ms"] = str(int(self.retry_after * 1000))
        elif api == "anthropic" and self.status == 429:
            headers["retry-after"] = ANTHROPIC_RETRY_AFTER  # the service always says when to retry
        if self.status == 529 or self.status >= 500:
            headers["x-should-retry"] = "true"
        return SimError(self.status, message, type=etype, code=code, headers=headers)


class FaultValueError(ValueError):
    """A fault setting out of range (the message says which and why)."""


def _seconds(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _flag(raw: str) -> bool:
    return {"1": True, "true": True, "0": False, "false": False}[raw.lower()]


_FIELDS: dict[str, Callable[[str], Any]] = {
    "status": int,
    "retry_after": float,
    "drop_after": int,
    "malformed_after": int,
    "deep_after": int,
    "huge_after": int,
    "huge_bytes": int,
    "slow_first_byte": float,
    "stall_after": int,
    "stall_seconds": float,
    "error_after": int,
    "forget": str,
    "compat": _flag,
    "finish_after_cut": _flag,
    "finish_delay": float,
}


DEEP_EVENT = b'data: {"x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}\n\n"
"""An event nested 10,000 levels deep, as a hostile or broken server might send."""


def error_event(api: str, sequence_number: int) -> bytes:
    """The provider's mid-stream error event (`api`: openai, chat, anthropic, gemini)."""
    if api == "anthropic":
        return sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    if api == "interactions":  # unverified code and text: the service's mid-stream error is undocumented
        message = "The model is overloaded. Please try again later."
        return sse("error", {"event_type": "error", "error": {"code": "unavailable", "message": message}})
    if api == "gemini":
        return sse(
            None,
            {
                "error": {
                    "code": 503,
                    "message": "The model is overloaded. Please try again later.",
                    "status": "UNAVAILABLE",
                }
            },
        )
    message = "The server had an error while processing your request. Sorry about that!"
    if api == "chat":
        return sse(None, {"error": {"message": message, "type": "server_error", "param": None, "code": None}})
    return sse(
        "error",
        {
            "type": "error",
            "code": "server_error",
            "message": message,
            "param": None,
            "sequence_number": sequence_number,
        },
    )


def parse_fault(header: str) -> Fault:
    """Parse an `x-sim-fault` header such as "status=429;retry_after=0.5", "drop_after=3" or "forget=resp_1".

    Raises SimError(400) naming the header and the accepted keys when the header is malformed.
    """
    fault = Fault()
    for part in header.replace(",", ";").split(";"):
        if not part.strip():
            continue
        key, _, raw = part.partition("=")
        key = key.strip().replace("-", "_")
        convert = _FIELDS.get(key)
        try:
            if convert is None or not raw.strip():
                raise ValueError(key)
            fault = replace(fault, **{key: convert(raw.strip())})
        except (ValueError, KeyError) as err:
            reason = f": {err}" if isinstance(err, FaultValueError) else ""
            keys = ", ".join(sorted(_FIELDS))
            raise SimError(
                400,
                f"Invalid {FAULT_HEADER} header part {part.strip()!r}{reason}; use key=value with keys: {keys} "
                "(compat and finish_after_cut take 1 or 0).",
            ) from None
    return fault


async def pause(seconds: float, closing: Callable[[], bool]) -> None:
    """Sleep up to `seconds`, returning early once `closing()` says the server is shutting down."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not closing():  # noqa: ASYNC110 - polls the shutdown flag
        await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))


class SSEStream:
    """An ASGI response sending pre-built SSE frames one by one, applying a stream fault.

    `on_complete` runs just before the last frame is sent, once no fault can cut the stream short (the
    response is committed then, as a real server stores a response before it reports it completed, so a
    client that reads the final event may chain from it at once); a dropped, stalled or failed stream
    runs `on_abort` instead and leaves no server state behind, like an aborted generation, unless the
    fault says `finish_after_cut`: then `on_detach` runs at the cut (the server holds the request as still
    in progress) and `on_complete` `finish_delay` seconds later, as a server that goes on without its client.
    `error_frame` replaces the API's own mid-stream error event (`error_after`).
    """

    def __init__(
        self,
        frames: list[bytes],
        fault: Fault | None,
        closing: Callable[[], bool],
        on_complete: Callable[[], None] | None = None,
        on_abort: Callable[[], None] | None = None,
        api: str = "openai",
        *,
        error_frame: bytes | None = None,
        on_detach: Callable[[], None] | None = None,
    ) -> None:
        self.frames = frames
        self.error_frame = error_frame
        self.fault = fault or Fault()
        self.closing = closing
        self.on_complete = on_complete
        self.on_abort = on_abort
        self.api = api
        self.on_detach = on_detach

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fault = self.fault
        completed = False
        last = len(self.frames) - 1
        try:
            if fault.slow_first_byte:
                await pause(fault.slow_first_byte, self.closing)
            headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for index, frame in enumerate(self.frames):
                if fault.drop_after is not None and index >= fault.drop_after:
                    completed = self._go_on()
                    return
                if fault.stall_after is not None and index >= fault.stall_after:
                    if fault.finish_after_cut and self.on_detach is not None:
                        self.on_detach()  # held as in progress while it stalls, as a server holds what it generates
                    await pause(fault.stall_seconds, self.closing)
                    completed = self._go_on(detached=True)
                    return
                if fault.error_after is not None and index >= fault.error_after:
                    await _send(send, self.error_frame or error_event(self.api, index))
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                if fault.malformed_after is not None and index == fault.malformed_after:
                    await _send(send, b"data: {this is not json\n\n")
                if fault.deep_after is not None and index == fault.deep_after:
                    await _send(send, DEEP_EVENT)
                if fault.huge_after is not None and index == fault.huge_after:
                    await _send(send, b'data: "' + b"x" * fault.huge_bytes + b'"\n\n')
                if index == last:
                    completed = True
                    if self.on_complete is not None:
                        self.on_complete()
                await _send(send, frame)
                await asyncio.sleep(0)
            if not completed:  # no frames at all
                completed = True
                if self.on_complete is not None:
                    self.on_complete()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if not completed and self.on_abort is not None:
                self.on_abort()

    def _go_on(self, *, detached: bool = False) -> bool:
        """At a cut: with `finish_after_cut`, let the generation finish without the client (True: it will be
        stored); else False (the cut aborts it). ``detached``: it is held as in progress already."""
        if not self.fault.finish_after_cut:
            return False
        if self.on_detach is not None and not detached:
            self.on_detach()
        if self.on_complete is not None:
            if self.fault.finish_delay:
                asyncio.get_running_loop().call_later(self.fault.finish_delay, self.on_complete)
            else:
                self.on_complete()
        return True


async def _send(send: Send, body: bytes) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": True})


def sse(event: str | None, data: Any) -> bytes:
    """One SSE frame: `event:` line when named, then one `data:` line of compact JSON (or a raw str)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()
