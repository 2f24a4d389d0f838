"""The events resource: a session's events as Server-Sent Events, resumable by id."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ...events.bus import START, BusUnavailable
from .._api import ERRORS, GuardedRoute, api
from .._guard import public_event
from .._runner import RUN_FINISHED
from .sessions import SessionPath

__all__ = ["SSE", "router"]

log = logging.getLogger("geppetto.server")

router = APIRouter(route_class=GuardedRoute, responses=ERRORS, tags=["events"])

SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events",
        "content": {
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": {"type": "string"}},
                }
            }
        },
    }
}
"""The answer of a route that streams events."""


@router.get(
    "/api/sessions/{session_id}/events",
    responses=SSE,
    response_class=StreamingResponse,
    summary="The session's events as Server-Sent Events, resumable with Last-Event-ID",
)
async def events(
    request: Request,
    session_id: SessionPath,
    after: Annotated[str | None, Query(description="an event id")] = None,
    until: Annotated[Literal["finished"] | None, Query(description="finished, its one value")] = None,
    inference_id: Annotated[str | None, Query(description="an inference id")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", description="an event id")] = None,
) -> Response:
    the_api = api(request)
    await the_api.runner.settings(session_id)
    start = last_event_id or after or START

    async def body() -> AsyncIterator[str]:
        try:
            async for event in the_api.streams.events(session_id, start):
                if event is None:
                    yield ": keep-alive\n\n"
                    continue
                data = json.dumps(public_event(event.data, session_id), ensure_ascii=False, default=str)
                yield f"id: {event.id}\nevent: {event.data.get('type', 'event')}\ndata: {data}\n\n"
                if (
                    until
                    and event.data.get("type") == RUN_FINISHED
                    and inference_id in (None, event.data.get("inference_id"))
                ):
                    return
        except ValueError as exc:  # a Last-Event-ID the bus never gave
            yield f"event: error\ndata: {json.dumps({'message': the_api.public(exc)})}\n\n"
        except BusUnavailable as exc:  # the broker went away: the client reconnects with Last-Event-ID
            log.warning("the event stream of session %s ended: %s", session_id, exc)
            yield f"event: error\ndata: {json.dumps({'message': the_api.public(exc), 'type': 'bus_unavailable'})}\n\n"

    return StreamingResponse(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})
