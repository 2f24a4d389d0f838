"""Gemini's Interactions API (``/v1beta/interactions``): create, with server-side history through
``previous_interaction_id`` (``store`` on by default), get, delete; streaming and background runs are in
``_interactions_stream``.

The service keeps every stored interaction's whole history: a request that names a previous interaction
continues from that interaction's context and output (``SimState.interactions[id].held``), whatever
happened to the interactions before it. ``store: false`` keeps nothing (the interaction cannot be got,
continued or streamed again). Texts the documentation does not give are marked ``unverified``.
"""

from __future__ import annotations

import base64
import copy
import secrets
import time
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._call import Call
from ._errors import SimError
from ._interactions_rules import check_request, check_results, check_signatures, input_steps, stale_signatures
from ._interactions_steps import (
    interaction_usage,
    output_steps,
    reasoning_on,
    request_choice,
    request_schema,
    request_tools,
    to_msgs,
)
from ._model import decide
from ._state import SimState, StoredInteraction

__all__ = ["Created", "answer", "delete_interaction", "not_found", "shown", "stored_or_404"]

_ECHOED = ("system_instruction", "tools", "generation_config", "response_format", "response_mime_type")


def new_interaction_id() -> str:
    """An interaction id: ``v1_`` and 40 URL-safe characters (the documented examples show ``v1_...``)."""
    return "v1_" + base64.urlsafe_b64encode(secrets.token_bytes(30)).decode()


def iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def not_found(interaction_id: str) -> SimError:
    return SimError(404, f"Interaction '{interaction_id}' not found.", code="not_found")  # unverified text


def stored_or_404(state: SimState, interaction_id: str) -> StoredInteraction:
    """The stored interaction (the caller holds ``state.lock``), else the service's 404."""
    stored = state.interactions.get(interaction_id)
    if stored is None:
        raise not_found(interaction_id)
    return stored


class Created:
    """One answered create request: the interaction object and how to store it."""

    def __init__(
        self, state: SimState, body: dict[str, Any], obj: dict[str, Any], context: list[dict[str, Any]], own: int
    ) -> None:
        self.state, self.body, self.obj, self.context, self.own = state, body, obj, context, own
        self.store = body.get("store") is not False
        self.background = body.get("background") is True

    @property
    def id(self) -> str:
        return str(self.obj["id"])

    def commit(self, frames: list[bytes] | None = None) -> None:
        """Store the interaction (unless ``store`` is false), as the service does once it has finished."""
        if not self.store:
            return
        outputs = copy.deepcopy(self.obj.get("steps") or [])
        own = self.context[len(self.context) - self.own :]
        stored = StoredInteraction(
            id=self.id,
            held=copy.deepcopy(self.context) + outputs,
            steps=copy.deepcopy(own) + outputs,
            input=copy.deepcopy(self.body["input"]),
            obj=copy.deepcopy(self.obj),
            frames=list(frames or []),
        )
        with self.state.lock:
            self.state.interactions[self.id] = stored

    def hold_in_progress(self) -> None:
        """A stream cut while the service goes on (``finish_after_cut``): the interaction reads back as
        ``in_progress``, with its input steps only, until :meth:`commit` stores it whole."""
        if not self.store:
            return
        own = self.context[len(self.context) - self.own :]
        running = {**copy.deepcopy(self.obj), "status": "in_progress", "steps": []}
        running.pop("usage", None)
        stored = StoredInteraction(self.id, [], copy.deepcopy(own), copy.deepcopy(self.body["input"]), running)
        with self.state.lock:
            self.state.interactions[self.id] = stored


def _history(state: SimState, previous: str) -> list[dict[str, Any]]:
    """What a request continuing ``previous`` starts from; a 400 while it still runs in the background."""
    with state.lock:
        stored = state.interactions.get(previous)
        run = state.background_runs.get(previous)
        held = stored is not None and stored.obj.get("status") == "in_progress"  # finish_after_cut
        if held or (stored is None and run is not None and not run.finished):
            raise SimError(  # unverified text
                400,
                f"Interaction '{previous}' is still in progress: wait until it has completed to continue from it.",
                code="invalid_request",
            )
        return copy.deepcopy(stored_or_404(state, previous).held)


def answer(call: Call) -> Created:
    """Run the model for a create request: check it, build the context, decide, and shape the interaction."""
    state = call.state
    body = call.obj()
    check_request(body)
    model = str(body["model"]).removeprefix("models/")
    own = input_steps(body["input"])
    previous = body.get("previous_interaction_id")
    history = _history(state, previous) if previous else []
    if body.get("background") and body.get("store") is False:
        raise SimError(400, "Background interactions require 'store' to be true.", code="invalid_request")  # unverified
    reasoning = reasoning_on(model, body)
    check_signatures(state, own, reasoning)
    stale = stale_signatures(state, history, own)
    if stale:
        call.effects["stale_signatures"] = stale
    context = history + own
    check_results(context)
    msgs = to_msgs(body, context)
    reply = state.next_reply() or decide(msgs, request_tools(body), request_choice(body), request_schema(body))
    steps = output_steps(state, body, reply, reasoning, msgs, context)
    if reply.stop == "max_tokens":
        status = "incomplete"
    else:
        status = "requires_action" if any(s["type"] == "function_call" for s in steps) else "completed"
    now = iso_now()
    obj: dict[str, Any] = {"id": new_interaction_id(), "status": status, "model": model, "created": now}
    obj["updated"] = now
    if previous:
        obj["previous_interaction_id"] = previous
    obj.update({name: copy.deepcopy(body[name]) for name in _ECHOED if name in body})
    obj["steps"] = steps
    obj["usage"] = interaction_usage(state, body, model, context, steps)
    created = Created(state, body, obj, context, len(own))
    with state.lock:
        state.contexts[created.id] = copy.deepcopy(context)
    return created


def shown(stored: StoredInteraction, include_input: bool) -> dict[str, Any]:
    """The interaction as ``GET`` shows it: its own input steps before the model's (and the input as sent
    when asked for)."""
    obj = copy.deepcopy(stored.obj)
    obj["steps"] = copy.deepcopy(stored.steps)
    if include_input:
        obj["input"] = copy.deepcopy(stored.input)
    return obj


async def delete_interaction(call: Call) -> ASGIApp:
    """DELETE /v1beta/interactions/{id}: forget it (a running background interaction stops); ``{}``."""
    state = call.state
    interaction_id = call.request.path_params["interaction_id"]
    with state.lock:
        run = state.background_runs.pop(interaction_id, None)
        if run is not None:
            run.stop()
        elif interaction_id not in state.interactions:
            raise not_found(interaction_id)
        state.interactions.pop(interaction_id, None)
    return JSONResponse({})
