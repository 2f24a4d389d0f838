"""OpenAI Responses WebSocket mode: one long-lived connection to ``/v1/responses``.

The client sends ``response.create`` messages (the ``POST /v1/responses`` body with ``"type"`` added, without
``stream``; ``background`` is refused); the server answers each with the same events the SSE stream carries,
one JSON text message each, one response at a time in order. Each connection keeps its most recent response
in a connection-local cache: a ``previous_response_id`` made with ``store: false`` is valid only on the
connection that made it (and only while it is the latest), anywhere else it is the service's
``previous_response_not_found`` error event; a stored response (``store: true``) chains from any connection,
as over HTTP. Errors arrive as ``{"type": "error", "status": ..., "error": {...}}`` messages and leave the
connection open. The server closes a connection that has been idle ``ws_idle_timeout`` seconds (code 1000),
one older than ``ws_max_age`` (the documented 60 minutes: an error event
``websocket_connection_limit_reached``, then close), and every open connection on
:meth:`Simulator.drop_websockets`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, cast

from starlette.websockets import WebSocket, WebSocketDisconnect

from . import _openai
from ._call import Call
from ._errors import SimError
from ._openai_out import stream_frames
from ._quirks import DONE_FRAME
from ._state import RecordedRequest, SimState, new_id
from ._validate import validate

__all__ = ["Connection", "serve_responses_socket"]

LIMIT_MESSAGE = (
    "Responses websocket connection limit reached (60 minutes). Create a new websocket connection to continue."
)


@dataclass
class Connection:
    """One open WebSocket connection: its id, its cache (the latest response and the context it holds)."""

    id: str
    loop: asyncio.AbstractEventLoop
    opened: float = field(default_factory=time.monotonic)
    latest: tuple[str, list[dict[str, Any]]] | None = None
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    close_with: tuple[int, str] = (1001, "server closed the connection")

    def drop(self, code: int, reason: str) -> None:
        """Close from the server's side (callable from any thread): the connection's cache is gone."""
        self.close_with = (code, reason)
        self.loop.call_soon_threadsafe(self.closing.set)


def _error_event(err: SimError) -> dict[str, Any]:
    """The WebSocket error message: the HTTP error body with ``type`` and the status it would have had."""
    error: dict[str, Any] = {"type": err.type, "code": err.code, "message": err.message, "param": err.param}
    return {"type": "error", "status": err.status, "error": error}


def _not_found(response_id: str) -> SimError:
    return SimError(
        400,
        f"Previous response with id '{response_id}' not found.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def _lookup(conn: Connection) -> Any:
    def find(state: SimState, response_id: str) -> list[dict[str, Any]]:
        if conn.latest is not None and conn.latest[0] == response_id:
            return [dict(item) for item in conn.latest[1]]
        if response_id in state.responses:
            return _openai.chain_items(state, response_id)
        raise _not_found(response_id)

    return find


def _events(frames: list[bytes]) -> list[str]:
    """The JSON text of each SSE frame's data (the WebSocket carries the events without SSE framing)."""
    out = []
    for frame in frames:
        if frame == DONE_FRAME:
            continue
        for line in frame.decode().splitlines():
            if line.startswith("data:"):
                out.append(line[5:].strip())
    return out


def _create(state: SimState, conn: Connection, body: dict[str, Any], effects: dict[str, Any]) -> list[str]:
    """The events of one ``response.create`` (raises SimError before any response exists)."""
    if body.get("background"):
        raise SimError(
            400, "background is not supported over WebSocket; send it with POST /v1/responses", param="background"
        )
    validate("CreateResponse", body)
    call = Call(cast(Any, None), body, state, None, "openai", effects)
    selectors = _openai._selectors(call, body)
    prev, _store, conv_id = selectors
    context, new_input = _openai._context(state, body, prev, conv_id, _lookup(conn))
    try:
        obj = _openai._respond(state, body, context, selectors, effects, prev)
    except BaseException:
        with state.lock:
            state.busy_conversations.discard(conv_id or "")
        raise
    _openai._commit(state, obj, new_input, conv_id, prev)
    with state.lock:
        seen = state.contexts.get(obj["id"], context)
    conn.latest = (obj["id"], [dict(i) for i in seen] + [dict(i) for i in obj["output"]])
    return _events(stream_frames(obj, False, state.quirks))


async def _turn(state: SimState, conn: Connection, websocket: WebSocket, text: str, headers: dict[str, str]) -> bool:
    """Answer one client message; False when the connection was closed while answering."""
    try:
        message = json.loads(text)
    except ValueError:
        message = None
    recorded = RecordedRequest("WS", "/v1/responses", message, len(text.encode()), headers, {"connection": conn.id})
    state.record(recorded)
    effects = recorded.effects
    if time.monotonic() - conn.opened > state.ws_max_age:
        limit = SimError(400, LIMIT_MESSAGE, code="websocket_connection_limit_reached")
        await websocket.send_text(json.dumps(_error_event(limit)))
        await websocket.close(code=1000, reason="connection limit reached")
        return False
    fault = state.next_fault()
    try:
        if not isinstance(message, dict):
            raise SimError(400, "The message is not a JSON object; send a response.create event.")
        if message.get("type") != "response.create":
            raise SimError(
                400,
                f"Invalid 'type': {message.get('type')!r}. The simulator takes 'response.create' messages only.",
                param="type",
                code="invalid_value",
            )
        if fault is not None:
            if fault.forget:
                state.forget(fault.forget)
            refusal = fault.error("openai")
            if refusal is not None:
                raise refusal
        body = {k: v for k, v in message.items() if k not in ("type", "stream", "stream_options")}
        events = _create(state, conn, body, effects)
    except SimError as err:
        await websocket.send_text(json.dumps(_error_event(err)))
        return True
    cut = fault.drop_after if fault is not None else None
    for n, event in enumerate(events):
        if cut is not None and n >= cut:
            conn.latest = None
            await websocket.close(code=1011, reason="simulated drop")
            return False
        await websocket.send_text(event)
    return True


async def serve_responses_socket(state: SimState, websocket: WebSocket) -> None:
    """The ``/v1/responses`` WebSocket endpoint."""
    headers = {k.lower(): v for k, v in websocket.headers.items()}
    auth = headers.get("authorization", "")
    if not auth.lower().startswith("bearer ") or not auth[7:].strip():
        await websocket.close(code=1008, reason="missing API key: send an Authorization: Bearer header")
        return
    await websocket.accept()
    conn = Connection(new_id("wsconn_"), asyncio.get_running_loop())
    with state.lock:
        state.sockets[conn.id] = conn
    try:
        await _serve(state, conn, websocket, headers)
    finally:
        with state.lock:
            state.sockets.pop(conn.id, None)


async def _serve(state: SimState, conn: Connection, websocket: WebSocket, headers: dict[str, str]) -> None:
    while True:
        receive = asyncio.ensure_future(websocket.receive())
        closer = asyncio.ensure_future(conn.closing.wait())
        done, _ = await asyncio.wait({receive, closer}, timeout=state.ws_idle_timeout, return_when="FIRST_COMPLETED")
        closer.cancel()
        if receive not in done:
            receive.cancel()
            code, reason = conn.close_with if closer in done else (1000, "idle timeout")
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await websocket.close(code=code, reason=reason)
            return
        message = receive.result()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            text = (message.get("bytes") or b"").decode(errors="replace")
        if not await _turn(state, conn, websocket, text, headers):
            return
