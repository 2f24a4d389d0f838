"""OpenAI background responses (``background: true``): a run that goes on server-side whatever its
connections do, followed by streams that resume after a ``sequence_number`` (``GET /v1/responses/{id}
?stream=true&starting_after=N``), retrieved while it runs, and cancelled (``POST /v1/responses/{id}/cancel``).

The scripted model decides the whole answer at once; the run then releases its events one by one, every
``state.background_pace`` seconds, on the server's event loop. The event sequence is the recorded one
(``response.created`` and ``response.queued`` with status ``queued``, ``response.in_progress``, the items,
the terminal event). A stream that a fault cuts leaves the run going; the response is stored (and its
conversation items appended) when the run reaches its end, as for a streamed foreground response. A
cancelled run stops where it is: status ``cancelled``, the output and usage of what it had produced, and it
is not stored for chaining (the simulator's choice: the real service's rule is not documented).

Error texts the real service's documentation does not give are marked ``unverified`` where they are raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ._call import Call
from ._errors import SimError
from ._faults import FAULT_HEADER, Fault, parse_fault, sse
from ._openai_out import stream_frames, usage
from ._state import SimState, stored_or_404

__all__ = ["BackgroundRun", "cancel_response", "check_background", "get_response", "start_background"]

_ACTIVE = ("queued", "in_progress")


def check_background(body: dict[str, Any]) -> None:
    """A background request must let the server store the response (the guide's first limit)."""
    if body.get("background") and body.get("store") is False:
        raise SimError(  # unverified text; the guide: "background sampling requires store=true"
            400,
            "Background mode requires 'store' to be true; stateless background requests are not supported.",
            param="background",
            code="invalid_value",
        )


@dataclass(eq=False)
class BackgroundRun:
    """One background response: every frame it will send, how many the server has produced so far."""

    final: dict[str, Any]
    frames: list[bytes]
    done_at: dict[int, int]  # output index -> sequence number of its response.output_item.done
    streamed: bool
    commit: Callable[[], None]
    release: Callable[[], None]
    created: float = field(default_factory=time.monotonic)
    produced: int = 0
    status: str = "queued"
    cancelled_obj: dict[str, Any] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        return str(self.final["id"])

    @property
    def finished(self) -> bool:
        return self.status not in _ACTIVE

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def advance(self, state: SimState) -> None:
        """Release the frames one by one; the response is committed just before its terminal event."""
        last = len(self.frames) - 1
        while self.produced <= last and not self.finished:
            await asyncio.sleep(state.background_pace)
            if self.finished or state.background_runs.get(self.id) is not self:
                return
            if self.produced == last:
                self.commit()
                self.status = str(self.final["status"])
            elif self.produced >= 2:
                self.status = "in_progress"
            self.produced += 1
            self._notify()

    def stop(self) -> None:
        """Forget the run (the simulator was reset, from any thread): its task sees that at its next step
        and ends without committing anything."""
        if not self.finished:
            self.release()
        self.status = "cancelled"

    def produced_items(self) -> list[dict[str, Any]]:
        """The output items the run has finished so far."""
        return [
            copy.deepcopy(item)
            for index, item in enumerate(self.final["output"])
            if self.done_at.get(index, len(self.frames)) < self.produced
        ]

    def snapshot(self) -> dict[str, Any]:
        """The response object as ``GET /v1/responses/{id}`` shows it now."""
        if self.cancelled_obj is not None:
            return copy.deepcopy(self.cancelled_obj)
        if self.status not in _ACTIVE:
            return copy.deepcopy(self.final)
        return {
            **copy.deepcopy(self.final),
            "status": self.status,
            "output": self.produced_items(),
            "usage": None,
            "completed_at": None,
            "incomplete_details": None,
        }

    def cancel(self) -> dict[str, Any]:
        """Stop the run where it is (a finished run is left as it is: cancelling twice is idempotent)."""
        if not self.finished:
            output = self.produced_items()
            input_tokens = int((self.final.get("usage") or {}).get("input_tokens") or 0)
            self.cancelled_obj = {
                **copy.deepcopy(self.final),
                "status": "cancelled",
                "output": output,
                "usage": usage(input_tokens, output),
                "completed_at": None,
                "incomplete_details": None,
            }
            self.status = "cancelled"
            self.release()
            self._notify()
        return self.snapshot()


def _frames(final: dict[str, Any]) -> tuple[list[bytes], dict[int, int]]:
    """The recorded background sequence: ``response.created`` and ``response.queued`` (status queued), then
    the foreground sequence from ``response.in_progress`` on, numbered after them."""
    queued = {**final, "status": "queued", "output": [], "usage": None, "completed_at": None}
    queued["incomplete_details"] = None
    out = [
        sse("response.created", {"type": "response.created", "response": queued, "sequence_number": 0}),
        sse("response.queued", {"type": "response.queued", "response": queued, "sequence_number": 1}),
    ]
    done_at: dict[int, int] = {}
    for frame in stream_frames(final)[1:]:
        payload = frame.decode().partition("data: ")[2]
        data = json.loads(payload)
        data["sequence_number"] = len(out)
        if data["type"] == "response.output_item.done":
            done_at[int(data["output_index"])] = len(out)
        out.append(sse(data["type"], data))
    return out, done_at


def start_background(
    call: Call, obj: dict[str, Any], commit: Callable[[], None], release: Callable[[], None]
) -> ASGIApp:
    """Start the run for the finished answer ``obj``; the stream of its events, or the queued response."""
    state = call.state
    obj["background"] = True
    frames, done_at = _frames(obj)
    streamed = bool(call.obj().get("stream"))
    run = BackgroundRun(obj, frames, done_at, streamed, commit, release)
    with state.lock:
        state.background_runs[run.id] = run
    run.task = asyncio.get_running_loop().create_task(run.advance(state))
    if streamed:
        return RunStream(run, -1, call.fault, lambda: state.closing)
    run.produced = max(run.produced, 2)  # created and queued are what the answer says
    return JSONResponse(run.snapshot())


class RunStream:
    """An SSE response following a run from the event after ``after``: what the run has produced, then each
    new event as it comes, until the run ends. A fault's ``drop_after`` cuts this connection after that
    many events (the run goes on); ``stall_after`` stops sending for ``stall_seconds`` and then cuts it."""

    def __init__(self, run: BackgroundRun, after: int, fault: Fault | None, closing: Callable[[], bool]) -> None:
        self.run, self.after, self.fault, self.closing = run, after, fault or Fault(), closing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        run, fault = self.run, self.fault
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        index, sent = self.after + 1, 0
        while not self.closing():
            while index < run.produced:
                if fault.drop_after is not None and sent >= fault.drop_after:
                    return  # the body is never ended: the client sees the connection break
                if fault.stall_after is not None and sent >= fault.stall_after:
                    await _pause(fault.stall_seconds, self.closing)
                    return
                await send({"type": "http.response.body", "body": run.frames[index], "more_body": True})
                index, sent = index + 1, sent + 1
                await asyncio.sleep(0)  # let the frame reach the socket before a fault cuts it
            if run.finished and index >= run.produced:
                break
            changed = run.changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.05)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _pause(seconds: float, closing: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not closing():  # noqa: ASYNC110 - polls the shutdown flag
        await asyncio.sleep(0.02)


def _run_or_none(state: SimState, response_id: str) -> BackgroundRun | None:
    with state.lock:
        return state.background_runs.get(response_id)


def _flag(call: Call, name: str) -> bool:
    raw = call.request.query_params.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise SimError(
            400,
            f"Invalid value for '{name}': expected a boolean, but got {raw!r} instead.",
            param=name,
            code="invalid_type",
        )
    return raw in ("true", "1")


def _starting_after(call: Call) -> int:
    raw = call.request.query_params.get("starting_after")
    if raw is None:
        return -1
    try:
        return int(raw)
    except ValueError:
        raise SimError(
            400,
            "Invalid type for 'starting_after': expected an integer, but got a string instead.",
            param="starting_after",
            code="invalid_type",
        ) from None


def _fault_of(call: Call) -> Fault | None:
    header = call.request.headers.get(FAULT_HEADER)
    return parse_fault(header) if header else call.state.next_fault()


async def get_response(call: Call) -> ASGIApp:
    """GET /v1/responses/{id}: a background run as it is now, or its events with ``stream=true`` (after
    ``starting_after``); any other stored response as before."""
    state = call.state
    response_id = call.request.path_params["response_id"]
    stream = _flag(call, "stream")
    run = _run_or_none(state, response_id)
    if run is None:
        if stream:
            raise SimError(  # unverified text: a foreground stream cannot be picked up again
                400,
                f"Response '{response_id}' was not created with background=true; only background responses "
                "can be streamed again.",
                param="stream",
            )
        with state.lock:
            return JSONResponse(stored_or_404(state, response_id).obj)
    if not stream:
        return JSONResponse(run.snapshot())
    if not run.streamed:
        raise SimError(  # unverified text; the guide: only a response created with stream=true streams again
            400,
            f"Response '{response_id}' was not created with stream=true; retrieve it without stream instead.",
            param="stream",
        )
    window = state.background_resume_window
    if window is not None and time.monotonic() - run.created > window:
        raise SimError(  # unverified text: past the window the events are gone, the response stays
            400,
            f"The event stream of response '{response_id}' is no longer available; retrieve the response "
            "without stream to read it.",
            param="starting_after",
        )
    after = _starting_after(call)
    if not -1 <= after < len(run.frames):
        raise SimError(
            400,
            f"Invalid 'starting_after': {after}; the response has sequence numbers 0 to {len(run.frames) - 1}.",
            param="starting_after",
            code="invalid_value",
        )
    return RunStream(run, after, _fault_of(call), lambda: state.closing)


async def cancel_response(call: Call) -> ASGIApp:
    """POST /v1/responses/{id}/cancel: stop a background run (idempotent once it has ended)."""
    state = call.state
    response_id = call.request.path_params["response_id"]
    return cancel_run(
        state,
        _run_or_none(state, response_id),
        response_id,
        state.responses,
        foreground=SimError(400, "Cannot cancel a synchronous response.", param="response_id"),  # unverified text
        unknown=SimError(404, f"Response with id '{response_id}' not found.", param="response_id"),
    )


def cancel_run(
    state: SimState,
    run: BackgroundRun | None,
    run_id: str,
    stored: Container[str],
    *,
    foreground: SimError,
    unknown: SimError,
) -> ASGIApp:
    """Cancel the background ``run`` of ``run_id`` (idempotent once it has ended); without one,
    ``foreground`` when ``stored`` holds ``run_id`` (it ran in the foreground), else ``unknown``."""
    if run is None:
        with state.lock:
            known = run_id in stored
        raise foreground if known else unknown
    return JSONResponse(run.cancel())
