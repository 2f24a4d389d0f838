"""The web front-end and what it reads (the page, the server's info, the Turn inspector, the dashboard), and
the server's own routes: its API document, ``/docs``, liveness and metrics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from ... import web
from ..._extras import install_hint
from ...session.stores import SessionSummary
from .._api import ERRORS, OPEN, Api, ApiError, GuardedRoute, api
from .._models import Health, Info
from .._openapi import openapi_document
from .sessions import MAX_SNAPSHOT_PAGE, PageNumber, SessionPath

__all__ = ["DASHBOARD_SESSIONS", "INSPECT_PAGE", "router"]

DASHBOARD_SESSIONS = 200
"""The dashboard reads the most recent sessions only, this many unless ``?limit=`` says otherwise."""
MAX_DASHBOARD = 1_000_000
"""The most sessions one dashboard reads (``?limit=``)."""
INSPECT_PAGE = 20
"""Snapshots (with their inferences' requests) the inspector reads at once; older ones page by ``?before=``."""

router = APIRouter(route_class=GuardedRoute, responses=ERRORS, tags=["web"])

_REPORT: dict[int | str, dict[str, Any]] = {200: {"content": {"application/json": {"schema": {"type": "object"}}}}}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: ERRORS[404]}


@router.get("/", openapi_extra=OPEN, response_class=HTMLResponse, summary="The web chat, Turn inspector and dashboard")
async def index(request: Request) -> Response:
    return _asset("index.html")


@router.get("/ui/{name}", openapi_extra=OPEN, response_class=HTMLResponse, summary="The web front-end's files")
async def page(request: Request, name: str) -> Response:
    return _asset(name)


def _asset(name: str) -> Response:
    if name not in web.ASSETS:
        raise ApiError(404, f"no file /ui/{name}; the web front-end has {', '.join(web.ASSETS)}", "not_found")
    return Response(
        web.asset(name),
        media_type=web.ASSETS[name],
        headers={
            "content-security-policy": web.CONTENT_SECURITY_POLICY,
            "x-content-type-options": "nosniff",
            "cache-control": "no-cache",
        },
    )


@router.get("/api/info", response_model=Info, summary="The server's profile, provider, model, mode and tools")
async def info(request: Request) -> Response:
    runner = api(request).runner
    engine = runner.engine_for({})
    return JSONResponse(
        {
            "profile": runner.profile_name or "custom",
            "provider": getattr(engine, "provider", ""),
            "model": getattr(engine, "model", ""),
            "mode": getattr(engine, "mode", None),
            "tools": runner.tools.names() if runner.tools else [],
            "worker": runner.worker,
        }
    )


@router.get(
    "/api/sessions/{session_id}/inspect",
    responses=_REPORT,
    summary="The Turn inspector's report over a window of snapshots (the last `limit` before `before`, the latest "
    "when absent): the blocks of the window's last snapshot with provenance, the requests of its inferences (mode, "
    "anchor, delta block ids, input bytes vs the stateless equivalent, fallback), diffs between consecutive "
    "snapshots of the window; `window` (first, last, limit), `snapshot_count`, and `older`, the route of the "
    "window before",
)
async def inspect(
    request: Request, session_id: SessionPath, before: PageNumber = None, limit: PageNumber = None
) -> Response:
    settings = await api(request).runner.settings(session_id)
    report = await _inspect_window(api(request), session_id, before, min(limit or INSPECT_PAGE, MAX_SNAPSHOT_PAGE))
    report["settings"] = settings
    return JSONResponse(report)


async def _inspect_window(the_api: Api, session_id: str, before: int | None, limit: int) -> dict[str, Any]:
    """The inspector's report over ``limit`` snapshots before number ``before`` (the latest when None):
    those snapshots, the events and inferences of the time they cover, and the route of the page before."""
    store = the_api.store
    page = await store.snapshot_infos(session_id, before=before, limit=limit)
    if not page:  # no snapshot yet (only failed inferences' events), or paged past the first
        events = await store.load_events(session_id) if before is None else []
        report = web.session_report([], events, session_id=session_id)
        count = await store.latest_seq(session_id) if before is not None else 0
        report.update({"snapshot_count": count, "window": None, "older": None})
        return report
    first, last = page[0].seq, page[-1].seq
    prior = await store.snapshot_infos(session_id, before=first, limit=1)
    # The window's inferences ran after the save of the snapshot before it and, unless it ends at the
    # latest, before the save of its last one (a failed inference after the latest is in the last page).
    after = prior[0].saved_at if prior else None
    until = page[-1].saved_at if before is not None else None
    inferences = await store.inferences(session_id, after=after, until=until)
    report = web.session_report(
        await store.load_snapshots(session_id, first, last),
        await store.load_events(session_id, after=after, until=until),
        session_id=session_id,
        inferences=[r.to_dict() for r in inferences],
        seqs=[i.seq for i in page],
    )
    older = f"/api/sessions/{session_id}/inspect?before={first}&limit={limit}" if first > 1 else None
    count = last if before is None else await store.latest_seq(session_id)
    report.update({"snapshot_count": count, "window": {"first": first, "last": last, "limit": limit}, "older": older})
    return report


@router.get(
    "/api/dashboard",
    responses=_REPORT,
    summary="Chained / stateless / fallback counts, fallback reasons, delta sizes, bytes saved and API rejections "
    "over the most recent sessions (200 unless limit says otherwise), from the summary the store keeps per "
    "session; `limited` says whether older sessions were left out",
)
async def dashboard(
    request: Request,
    limit: Annotated[
        int, Query(ge=1, le=MAX_DASHBOARD, description=f"a number of sessions from 1 to {MAX_DASHBOARD}")
    ] = DASHBOARD_SESSIONS,
) -> Response:
    summaries, limited = await api(request).store.session_summaries(limit=limit)
    summary = web.dashboard([await _session_totals(api(request), s) for s in summaries])
    summary["limited"] = limited
    return JSONResponse(summary)


async def _session_totals(the_api: Api, kept: SessionSummary) -> dict[str, Any]:
    """A session's totals from the summary its store kept; a session without an event log has its
    requests inferred from its latest snapshot (that one snapshot is read)."""
    if kept.events and kept.totals is not None:
        return {"session_id": kept.session_id, "first_prompt": kept.first_prompt, "totals": kept.totals}
    latest = await the_api.store.load_latest(kept.session_id)
    totals = web.session_totals([latest] if latest is not None else [], session_id=kept.session_id)
    return {**totals, "first_prompt": kept.first_prompt}


@router.get("/openapi.json", openapi_extra=OPEN, responses=_REPORT, summary="This document")
async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(request.app, keyed=bool(api(request).api_key)))


@router.get("/docs", openapi_extra=OPEN, response_class=HTMLResponse, summary="This document, to read")
async def docs(request: Request) -> Response:
    return _asset("docs.html")


@router.get("/healthz", openapi_extra=OPEN, response_model=Health, summary="Liveness")
async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "worker": api(request).runner.worker})


@router.get(
    "/metrics",
    responses={200: {"content": {"text/plain": {}}}, **_NOT_FOUND},
    response_class=Response,
    summary="This worker's counters in the Prometheus text format (needs prometheus_client)",
)
async def metrics(request: Request) -> Response:
    try:
        import prometheus_client
    except ImportError:
        raise ApiError(
            404, f"metrics need prometheus_client in the server: {install_hint('prometheus')}", "not_found"
        ) from None
    return Response(prometheus_client.generate_latest(), media_type=prometheus_client.CONTENT_TYPE_LATEST)
