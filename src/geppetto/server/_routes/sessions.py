"""The sessions resource: make, list, read, delete a session; send it a prompt or the answers to the tool
calls that wait; cancel its inference; page through its snapshots."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..._exceptions import ConfigurationError
from ...events.bus import BusUnavailable
from ...session.stores import SnapshotInfo
from ...tools import awaiting
from ...turns import PAYLOAD_CITATIONS, BlockKind, Turn, citation_sources, new_id, turn_to_dict
from .._api import ERRORS, ApiError, GuardedRoute, api, json_body
from .._history import fork_session, rewind_session
from .._models import (
    MAX_WHOLE,
    Approvals,
    Cancelling,
    CreateSession,
    Fork,
    Forked,
    Prompt,
    Rewind,
    Rewound,
    SessionCreated,
    SessionList,
    SessionView,
    Snapshot,
    SnapshotPage,
    Started,
)
from .._runner import Busy

__all__ = ["MAX_SNAPSHOT_PAGE", "SNAPSHOT_PAGE", "PageNumber", "cited_sources", "router", "snapshot_info"]

SNAPSHOT_PAGE = 50
"""Snapshot summaries (and inferences) a session's GET returns; older pages come from its ``older_snapshots``."""
MAX_SNAPSHOT_PAGE = 1000

router = APIRouter(route_class=GuardedRoute, responses=ERRORS, tags=["sessions"])

SessionPath = Annotated[str, Path(description="the session id")]
PageNumber = Annotated[int | None, Query(ge=1, le=MAX_WHOLE, description="a positive whole number")]


def snapshot_info(info: SnapshotInfo) -> dict[str, Any]:
    return {
        "seq": info.seq,
        "turn_id": info.turn_id,
        "inference_id": info.inference_id,
        "saved_at": info.saved_at,
        "blocks": info.blocks,
    }


def cited_sources(turn: Turn | None) -> dict[str, list[dict[str, Any]]]:
    """Per id of a text block of ``turn`` that cites something, its citations normalized."""
    out: dict[str, list[dict[str, Any]]] = {}
    for block in turn.blocks if turn is not None else ():
        if block.kind is BlockKind.LLM_TEXT and (found := citation_sources(block.payload.get(PAYLOAD_CITATIONS))):
            out[block.id] = found
    return out


def _older(session_id: str, page: list[SnapshotInfo]) -> str | None:
    """The route of the page before ``page`` (None when it starts at the first snapshot)."""
    if not page or page[0].seq <= 1:
        return None
    return f"/api/sessions/{session_id}/snapshots?before={page[0].seq}&limit={len(page)}"


def _started(session_id: str, inference_id: str, after: str) -> Response:
    events = f"/api/sessions/{session_id}/events?after={after}"
    return JSONResponse({"inference_id": inference_id, "after": after, "events": events}, status_code=202)


@router.post("/api/sessions", status_code=201, response_model=SessionCreated, summary="Make a session")
async def create_session(request: Request, body: Annotated[CreateSession, json_body(CreateSession)]) -> Response:
    settings = body.settings()
    session_id = body.id if body.id is not None else new_id()
    try:
        api(request).runner.engine_for(settings)
    except ConfigurationError as exc:
        raise ApiError(422, str(exc), "invalid_settings") from None
    await api(request).store.create_session(session_id, settings)
    return JSONResponse({"id": session_id, "settings": settings}, status_code=201)


@router.get("/api/sessions", response_model=SessionList, summary="List sessions")
async def list_sessions(request: Request) -> Response:
    infos = await api(request).store.session_infos(include_empty=True)
    return JSONResponse({"sessions": [i.to_dict() for i in infos]})


async def _last_event_id(runner: Any, session_id: str) -> str | None:
    """The session's newest event id, None while the event bus is away: the rest of the answer is the
    store's, and a client that follows events reconnects to the bus by itself."""
    try:
        return str(await runner.bus.last_id(session_id))
    except BusUnavailable:
        return None


@router.get("/api/sessions/{session_id}", response_model=SessionView, summary="A session")
async def get_session(request: Request, session_id: SessionPath) -> Response:
    runner, store = api(request).runner, api(request).store
    settings = await runner.settings(session_id)
    latest = await store.load_latest(session_id)
    page = await store.snapshot_infos(session_id, limit=SNAPSHOT_PAGE)
    inferences = await store.inferences(session_id, limit=SNAPSHOT_PAGE)
    running = [r.inference_id for r in await store.inferences(session_id, status="running")]
    return JSONResponse(
        {
            "id": session_id,
            "settings": settings,
            "status": "running" if running else "idle",
            "running_inference": running[-1] if running else None,
            "last_event_id": await _last_event_id(runner, session_id),
            "latest": turn_to_dict(latest) if latest is not None else None,
            "pending_approvals": [c.to_dict() for c in awaiting(latest)],
            "snapshot_count": page[-1].seq if page else 0,
            "snapshots": [snapshot_info(i) for i in page],
            "older_snapshots": _older(session_id, page),
            "inferences": [r.to_dict() for r in inferences],
            "sources": cited_sources(latest),
        }
    )


@router.delete("/api/sessions/{session_id}", status_code=204, summary="Delete a session")
async def delete_session(request: Request, session_id: SessionPath) -> Response:
    store = api(request).store
    await api(request).runner.settings(session_id)
    lease = await store.try_lock(session_id)
    if lease is None:
        raise Busy(f"session {session_id} is running an inference; cancel it before deleting the session")
    try:
        await store.delete_session(session_id)
    finally:
        await lease.release()
    return Response(status_code=204)


@router.post(
    "/api/sessions/{session_id}/messages",
    status_code=202,
    response_model=Started,
    summary="Send a prompt: starts an inference (409 while one runs in any worker)",
)
async def post_message(
    request: Request, session_id: SessionPath, body: Annotated[Prompt, json_body(Prompt)]
) -> Response:
    started = await api(request).runner.start(session_id, body.text.strip(), files=body.file_dicts())
    return _started(session_id, started.inference_id, started.after)


@router.post(
    "/api/sessions/{session_id}/approvals",
    status_code=202,
    response_model=Started,
    summary="Answer the tool calls that wait (the session's pending_approvals) and continue the inference, on any "
    "worker: true approves, false or a reason denies, a client-side tool's call takes its result; calls left out "
    "keep waiting",
)
async def post_approvals(
    request: Request, session_id: SessionPath, body: Annotated[Approvals, json_body(Approvals)]
) -> Response:
    started = await api(request).runner.start(session_id, "", decisions=body.decisions)
    return _started(session_id, started.inference_id, started.after)


@router.post(
    "/api/sessions/{session_id}/rewind",
    response_model=Rewound,
    summary="Drop the last n prompts with their answers (n defaults to 1): a new latest snapshot, saved; the next "
    "request re-anchors on the latest response still in it",
)
async def rewind(request: Request, session_id: SessionPath, body: Annotated[Rewind, json_body(Rewind)]) -> Response:
    return JSONResponse(await rewind_session(api(request).runner, session_id, body.n))


@router.post(
    "/api/sessions/{session_id}/fork",
    status_code=201,
    response_model=Forked,
    summary="A new session with this one's settings, sharing its history so far; each continues on its own",
)
async def fork(request: Request, session_id: SessionPath, body: Annotated[Fork, json_body(Fork)]) -> Response:
    return JSONResponse(await fork_session(api(request).runner, session_id, body.id), status_code=201)


@router.post(
    "/api/sessions/{session_id}/cancel",
    status_code=202,
    response_model=Cancelling,
    summary="Cancel the running inference, in whichever worker runs it",
)
async def cancel(request: Request, session_id: SessionPath) -> Response:
    inference_id = await api(request).runner.cancel(session_id)
    return JSONResponse({"inference_id": inference_id, "cancelling": True}, status_code=202)


@router.get(
    "/api/sessions/{session_id}/snapshots",
    response_model=SnapshotPage,
    summary="A page of snapshot summaries, the last `limit` before `before`, oldest first; `older` is the route "
    "of the page before",
)
async def list_snapshots(
    request: Request, session_id: SessionPath, before: PageNumber = None, limit: PageNumber = None
) -> Response:
    await api(request).runner.settings(session_id)
    page = await api(request).store.snapshot_infos(
        session_id, before=before, limit=min(limit or SNAPSHOT_PAGE, MAX_SNAPSHOT_PAGE)
    )
    return JSONResponse({"snapshots": [snapshot_info(i) for i in page], "older": _older(session_id, page)})


@router.get(
    "/api/sessions/{session_id}/snapshots/{seq}",
    response_model=Snapshot,
    summary="One snapshot's Turn, exactly as it was saved",
)
async def get_snapshot(
    request: Request,
    session_id: SessionPath,
    seq: Annotated[int, Path(ge=1, le=MAX_WHOLE, description="a positive whole number")],
) -> Response:
    await api(request).runner.settings(session_id)
    turn = await api(request).store.load_snapshot(session_id, seq)
    if turn is None:
        raise ApiError(
            404, f"session {session_id} has no snapshot {seq}; list them with GET .../snapshots", "not_found"
        )
    return JSONResponse({"seq": seq, "turn": turn_to_dict(turn)})
