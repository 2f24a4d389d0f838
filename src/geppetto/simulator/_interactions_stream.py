"""Interactions as server-sent events, and background interactions.

A streamed interaction is ``interaction.created`` and ``interaction.status_update`` (in progress), then for
each step ``step.start``, its ``step.delta`` events (text, thought summary and signature, function call
arguments) and ``step.stop``, then the final ``interaction.status_update`` and ``interaction.completed``.
Every event carries an ``event_id``; ``GET /v1beta/interactions/{id}?stream=true&last_event_id=...``
sends the events after that one again (a stored interaction's, or a background run's as it goes).

A background interaction (``background: true``) runs on the server whatever its connections do, releasing
its events one by one every ``SimState.background_pace`` seconds; it is stored just before its last event.
``POST /v1beta/interactions/{id}/cancel`` stops it where it is: status ``cancelled``, the steps it had
finished, and nothing stored to continue from (the simulator's choice; the service's rule is undocumented).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import time
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._background import BackgroundRun, RunStream, cancel_run
from ._call import Call
from ._errors import SimError
from ._faults import FAULT_HEADER, Fault, SSEStream, parse_fault, sse
from ._interactions import Created, answer, not_found, shown, stored_or_404
from ._openai_out import chunks
from ._state import SimState, StoredInteraction
from ._tokens import count_text, count_value

__all__ = [
    "InteractionRun",
    "background_get",
    "cancel_interaction",
    "create_interaction",
    "event_frames",
    "get_interaction",
    "replay",
    "respond",
]


def _event_id(interaction_id: str, index: int) -> str:
    """An opaque event id naming the interaction and the event's place in its stream."""
    return base64.urlsafe_b64encode(f"{interaction_id}:{index}".encode()).decode().rstrip("=")


def _event_index(interaction_id: str, event_id: str, count: int) -> int:
    """The place of ``event_id`` in the interaction's stream; the service's 400 for anything else."""
    try:
        raw = base64.urlsafe_b64decode(event_id + "=" * (-len(event_id) % 4)).decode()
        owner, _, index = raw.rpartition(":")
        if owner == interaction_id and 0 <= int(index) < count:
            return int(index)
    except ValueError:
        pass
    raise SimError(  # unverified text
        400,
        f"Invalid last_event_id '{event_id}': it is not an event of interaction '{interaction_id}'.",
        code="invalid_request",
    )


def _step_events(index: int, step: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The step.start event and the step.delta payloads of one step."""
    kind = step["type"]
    deltas: list[dict[str, Any]] = []
    if kind == "thought":
        deltas += [{"type": "thought_summary", "content": c} for c in step.get("summary") or []]
        if step.get("signature"):
            deltas.append({"type": "thought_signature", "signature": step["signature"]})
        start: dict[str, Any] = {"type": "thought"}
    elif kind == "model_output":
        texts = [str(c.get("text") or "") for c in step.get("content") or [] if c.get("type") == "text"]
        deltas += [{"type": "text", "text": piece} for text in texts for piece in chunks(text) or [text]]
        start = {"type": "model_output"}
    elif kind == "function_call":
        start = {"type": "function_call", "id": step["id"], "name": step["name"], "arguments": {}}
        deltas.append({"type": "arguments_delta", "arguments": json.dumps(step["arguments"], separators=(",", ":"))})
    else:
        start, deltas = copy.deepcopy(step), []
    head = [{"event_type": "step.start", "index": index, "step": start}]
    return head, [{"event_type": "step.delta", "index": index, "delta": d} for d in deltas]


def event_frames(obj: dict[str, Any]) -> tuple[list[bytes], dict[int, int]]:
    """The frames of the interaction ``obj``'s stream and the frame of each step's ``step.stop``."""
    iid = str(obj["id"])
    lifecycle = {"id": iid, "status": "in_progress", "object": "interaction", "model": obj["model"]}
    events: list[dict[str, Any]] = [
        {"event_type": "interaction.created", "interaction": {**lifecycle, "created": obj["created"]}},
        {"event_type": "interaction.status_update", "interaction_id": iid, "status": "in_progress"},
    ]
    stops: dict[int, int] = {}
    for index, step in enumerate(obj.get("steps") or []):
        head, deltas = _step_events(index, step)
        events += head + deltas
        stops[index] = len(events)
        events.append({"event_type": "step.stop", "index": index})
    events.append({"event_type": "interaction.status_update", "interaction_id": iid, "status": obj["status"]})
    final = {**lifecycle, "status": obj["status"], "created": obj["created"], "updated": obj["updated"]}
    final["usage"] = obj["usage"]
    events.append({"event_type": "interaction.completed", "interaction": final})
    ids = [_event_id(iid, n) for n in range(len(events))]
    frames = [sse(e["event_type"], {**e, "event_id": ids[n]}) for n, e in enumerate(events)]
    return frames, stops


def respond(call: Call, created: Created) -> ASGIApp:
    """The answer to a create request: the interaction, its event stream, or a background run's start."""
    state = call.state
    frames, stops = event_frames(created.obj)
    streamed = created.body.get("stream") is True
    if created.background:
        return _start_run(call, created, frames, stops, streamed)
    if not streamed:
        created.commit(frames)
        return JSONResponse(created.obj)
    return SSEStream(
        frames,
        call.fault,
        lambda: state.closing,
        on_complete=lambda: created.commit(frames),
        api="interactions",
        on_detach=created.hold_in_progress,
    )


def replay(call: Call, stored: StoredInteraction) -> ASGIApp:
    """A stored interaction's events again, after ``last_event_id`` when given."""
    after = _after(call, stored.id, len(stored.frames))
    return SSEStream(stored.frames[after + 1 :], _fault_of(call), lambda: call.state.closing, api="interactions")


def _after(call: Call, interaction_id: str, count: int) -> int:
    event_id = call.request.query_params.get("last_event_id")
    return -1 if event_id is None else _event_index(interaction_id, event_id, count)


def _fault_of(call: Call) -> Fault | None:
    header = call.request.headers.get(FAULT_HEADER)
    return parse_fault(header) if header else call.state.next_fault()


@dataclass(eq=False)
class InteractionRun(BackgroundRun):
    """A background interaction: ``final`` is the finished interaction, ``done_at`` each step's stop frame."""

    created_by: Created | None = None

    def produced_steps(self) -> list[dict[str, Any]]:
        steps = self.final.get("steps") or []
        return [copy.deepcopy(s) for i, s in enumerate(steps) if self.done_at.get(i, len(self.frames)) < self.produced]

    def snapshot(self) -> dict[str, Any]:
        if self.cancelled_obj is not None:
            return copy.deepcopy(self.cancelled_obj)
        obj = copy.deepcopy(self.final)
        if self.finished:
            return obj
        obj.update(status="in_progress", steps=self.produced_steps())
        obj.pop("usage", None)
        return obj

    def cancel(self) -> dict[str, Any]:
        if not self.finished:
            steps = self.produced_steps()
            obj = {**copy.deepcopy(self.final), "status": "cancelled", "steps": steps}
            obj["usage"] = _produced_usage(self.final.get("usage") or {}, steps)
            self.cancelled_obj = obj
            self.status = "cancelled"
            self.release()
            self._notify()
        return self.snapshot()


def _produced_usage(whole: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A cancelled interaction's usage: its whole input, and as output the steps it had produced."""
    prompt = int(whole.get("total_input_tokens") or 0)
    thoughts = sum(count_text(str(c.get("text") or "")) for s in steps for c in s.get("summary") or [])
    output = sum(count_value(s) for s in steps if s.get("type") != "thought")
    usage = {**whole, "total_output_tokens": output, "total_tokens": prompt + output + thoughts}
    usage["output_tokens_by_modality"] = [{"modality": "text", "tokens": output}]
    usage.pop("total_thought_tokens", None)
    if thoughts:
        usage["total_thought_tokens"] = thoughts
    return usage


def _start_run(call: Call, created: Created, frames: list[bytes], stops: dict[int, int], streamed: bool) -> ASGIApp:
    state = call.state
    run = InteractionRun(
        created.obj, frames, stops, streamed, lambda: created.commit(frames), lambda: None, created_by=created
    )
    with state.lock:
        state.background_runs[run.id] = run
    run.task = asyncio.get_running_loop().create_task(run.advance(state))
    if streamed:
        return RunStream(run, -1, call.fault, lambda: state.closing)
    run.produced = max(run.produced, 2)  # created and in progress are what the answer says
    return JSONResponse(run.snapshot())


def _run_or_none(state: SimState, interaction_id: str) -> InteractionRun | None:
    with state.lock:
        run = state.background_runs.get(interaction_id)
    return run if isinstance(run, InteractionRun) else None


def background_get(call: Call, interaction_id: str, stream: bool) -> ASGIApp | None:
    """GET of a background interaction: as it is now, or its events after ``last_event_id``; None when
    ``interaction_id`` is not a background interaction."""
    run = _run_or_none(call.state, interaction_id)
    if run is None:
        return None
    if not stream:
        obj = run.snapshot()
        if run.finished and run.cancelled_obj is None and run.created_by is not None:
            with call.state.lock:
                stored = call.state.interactions.get(interaction_id)
            obj = shown(stored, False) if stored is not None else obj
        return JSONResponse(obj)
    window = call.state.background_resume_window
    if window is not None and time.monotonic() - run.created > window:
        raise SimError(  # unverified text: past the window the events are gone, the interaction stays
            400,
            f"The event stream of interaction '{interaction_id}' is no longer available; get it without stream.",
            code="invalid_request",
        )
    after = _after(call, interaction_id, len(run.frames))
    return RunStream(run, after, _fault_of(call), lambda: call.state.closing)


async def cancel_interaction(call: Call) -> ASGIApp:
    """POST /v1beta/interactions/{id}/cancel: stop a background interaction (idempotent once it has ended)."""
    state = call.state
    interaction_id = call.request.path_params["interaction_id"]
    return cancel_run(
        state,
        _run_or_none(state, interaction_id),
        interaction_id,
        state.interactions,
        # unverified text
        foreground=SimError(400, "Only background interactions can be cancelled.", code="invalid_request"),
        unknown=not_found(interaction_id),
    )


async def create_interaction(call: Call) -> ASGIApp:
    """POST /v1beta/interactions."""
    return respond(call, answer(call))


def query_flag(call: Call, name: str) -> bool:
    raw = call.request.query_params.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise SimError(400, f"Invalid value for '{name}': expected a boolean, got {raw!r}.", code="invalid_request")
    return raw in ("true", "1")


async def get_interaction(call: Call) -> ASGIApp:
    """GET /v1beta/interactions/{id}: the stored interaction, or its events with ``stream=true`` (after
    ``last_event_id``)."""
    state = call.state
    interaction_id = call.request.path_params["interaction_id"]
    stream = query_flag(call, "stream")
    include_input = query_flag(call, "include_input")
    if call.request.query_params.get("last_event_id") is not None and not stream:
        raise SimError(400, "'last_event_id' can only be used with stream=true.", code="invalid_request")  # unverified
    running = background_get(call, interaction_id, stream)
    if running is not None:
        return running
    with state.lock:
        stored = stored_or_404(state, interaction_id)
        if stream:
            return replay(call, stored)
        return JSONResponse(shown(stored, include_input))
