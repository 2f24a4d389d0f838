"""The Starlette app of ``geppetto serve``: the REST API, Server-Sent Events resumable by id, AG-UI and the
Vercel AI SDK stream, JSON errors for every failure."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import web
from .._exceptions import ConfigurationError, GeppettoError, UsageError
from ..events.bus import START, BusEvent, BusUnavailable, EventBus
from ..session._session import INCOMING_HOOKS
from ..session.stores import SessionSummary, SnapshotInfo, SQLTurnStore
from ..tools import ApprovalPendingError, PendingCall, awaiting
from ..turns import new_id, turn_to_dict
from . import agui, vercel
from ._guard import (
    MESSAGE_TEXT,
    BadText,
    Guard,
    allowed_methods,
    check_text,
    client_message,
    error_response,
    json_content_type,
    public_event,
)
from ._history import fork_session, rewind_session
from ._messages import prompt_files
from ._openapi import openapi_document
from ._runner import RUN_FINISHED, Busy, NotFound, Runner, Started

__all__ = ["DEFAULT_MAX_BODY", "build_app"]

log = logging.getLogger("geppetto.server")

DEFAULT_MAX_BODY = 1 << 20
KEEPALIVE_SECONDS = 15.0
SETTING_KEYS = ("model", "mode", "system")
SNAPSHOT_PAGE = 50
"""Snapshot summaries (and inferences) a session's GET returns; older pages come from its ``older_snapshots``."""
MAX_SNAPSHOT_PAGE = 1000
MAX_ID = 200
"""The longest session id (characters)."""
DASHBOARD_SESSIONS = 200
"""The dashboard reads the most recent sessions only, this many unless ``?limit=`` says otherwise."""
INSPECT_PAGE = 20
"""Snapshots (with their inferences' requests) the inspector reads at once; older ones page by ``?before=``."""


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


_RAISE_LIMIT = " (geppetto serve --max-body BYTES raises it, for larger attachments say)"


async def read_json(request: Request, max_body: int, ids: tuple[str, ...] | None = None) -> Any:
    """The request's JSON body; 413 past ``max_body`` bytes (read no further), 415 when a body is not sent
    as ``application/json``, 400 when it is not JSON, 422 for a string the stores cannot hold: anywhere in
    the body, or, for a protocol route, in its ``ids`` and its messages' roles and texts (what it keeps)."""
    content_type = request.headers.get("content-type")
    if content_type is not None and not json_content_type(content_type):
        raise _not_json(content_type)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise ApiError(
            413, f"the body is {declared} bytes; the limit is {max_body} bytes{_RAISE_LIMIT}", "body_too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            raise ApiError(413, f"the body is over the limit of {max_body} bytes{_RAISE_LIMIT}", "body_too_large")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    if content_type is None:
        raise _not_json(None)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON ({exc}); send a JSON object", "malformed_json") from None
    try:
        if ids is None or not isinstance(body, dict):
            check_text(body, "")
        else:
            for name in ids:
                check_text(body.get(name), name)
            check_text(body.get("messages"), "messages", MESSAGE_TEXT)
    except BadText as exc:
        raise ApiError(422, str(exc), "invalid_text") from None
    return body


def _not_json(content_type: str | None) -> ApiError:
    given = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
    return ApiError(415, f"the body was sent with {given}; send JSON with 'Content-Type: application/json'", "not_json")


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object", "invalid_request")
    return body


def _session_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID:
        raise ApiError(422, f"{field!r} must be a string of 1 to {MAX_ID} characters, not all blank", "invalid_request")
    return value


def _settings(body: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(body) - {*SETTING_KEYS, "id"})
    if unknown:
        raise ApiError(
            422, f"unknown field(s) {', '.join(unknown)}; a session takes {', '.join(SETTING_KEYS)}", "invalid_request"
        )
    for key in SETTING_KEYS:
        if key in body and not isinstance(body[key], str):
            raise ApiError(422, f"{key!r} must be a string", "invalid_request")
    if body.get("mode") not in (None, "stateless", "chained", "conversation"):
        raise ApiError(422, "'mode' must be stateless, chained or conversation", "invalid_request")
    return {k: body[k] for k in SETTING_KEYS if body.get(k)}


class Streams:
    """Bus subscriptions read through a queue, so a keep-alive comment can be sent while no event comes
    (the subscription is never cancelled mid-read) and a client that leaves stops its reader."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus

    async def events(self, topic: str, after: str) -> AsyncIterator[BusEvent | None]:
        """The events after ``after``; None every :data:`KEEPALIVE_SECONDS` without one."""
        queue: asyncio.Queue[BusEvent | BaseException] = asyncio.Queue(maxsize=1024)

        async def read() -> None:
            try:
                async for event in self.bus.subscribe(topic, after):
                    await queue.put(event)
            except Exception as exc:
                await queue.put(exc)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield None
                    continue
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader


def _snapshot_info(info: SnapshotInfo) -> dict[str, Any]:
    return {
        "seq": info.seq,
        "turn_id": info.turn_id,
        "inference_id": info.inference_id,
        "saved_at": info.saved_at,
        "blocks": info.blocks,
    }


def _older(session_id: str, page: list[SnapshotInfo]) -> str | None:
    """The route of the page before ``page`` (None when it starts at the first snapshot)."""
    if not page or page[0].seq <= 1:
        return None
    return f"/api/sessions/{session_id}/snapshots?before={page[0].seq}&limit={len(page)}"


def _number(raw: str | None, name: str) -> int | None:
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ApiError(422, f"{name!r} must be a positive whole number", "invalid_request")
    return int(raw)


def build_app(
    runner: Runner,
    *,
    api_key: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    lifespan: Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]] | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> Starlette:
    """The app over ``runner`` (its store and bus). ``api_key``: every ``/api`` and ``/ag-ui`` request
    must carry ``Authorization: Bearer <api_key>``. ``allowed_hosts``: the names clients reach the server
    by, besides the loopback names (``*``: any); ``allowed_origins``: the other sites whose pages may use
    it (CORS is answered for those only). See :class:`~geppetto.server._guard.Guard`."""
    store: SQLTurnStore = runner.store
    streams = Streams(runner.bus)

    def public(exc: BaseException) -> str:
        return client_message(str(exc), [store.location])

    def guarded(handler: Callable[[Request], Any], *, open_route: bool = False) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            if api_key and not open_route:
                given = request.headers.get("authorization", "")
                if given != f"Bearer {api_key}":
                    return error_response(
                        401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "unauthorized"
                    )
            try:
                for name, value in [*request.path_params.items(), *request.query_params.items()]:
                    check_text(value, name)
            except BadText as exc:
                return error_response(422, str(exc), "invalid_text")
            try:
                with contextlib.ExitStack() as hooks:
                    for hook in INCOMING_HOOKS:
                        hooks.enter_context(hook(request.headers))
                    return await handler(request)  # type: ignore[no-any-return]
            except ApiError as exc:
                return error_response(exc.status, client_message(exc.message), exc.kind)
            except NotFound as exc:
                return error_response(404, public(exc), "not_found")
            except Busy as exc:
                return error_response(409, public(exc), "session_busy")
            except ApprovalPendingError as exc:
                log.info("request %s %s refused: %s", request.method, request.url.path, exc)
                return error_response(409, public(exc), "approval_pending")
            except UsageError as exc:
                log.info("request %s %s refused: %s", request.method, request.url.path, exc)
                return error_response(409, public(exc), "conflict")
            except BusUnavailable as exc:  # the broker is down or restarting: the client tries again later
                log.warning("request %s %s failed: %s", request.method, request.url.path, exc)
                return error_response(503, public(exc), "unavailable")
            except GeppettoError as exc:
                log.exception("request %s %s failed", request.method, request.url.path)
                return error_response(503, public(exc), "unavailable")

        return endpoint

    # -- sessions ------------------------------------------------------------------------------
    async def create_session(request: Request) -> Response:
        body = _object(await read_json(request, max_body))
        settings = _settings(body)
        session_id = _session_id(body["id"], "id") if "id" in body else new_id()
        try:
            runner.engine_for(settings)
        except ConfigurationError as exc:
            raise ApiError(422, str(exc), "invalid_settings") from None
        await store.create_session(session_id, settings)
        return JSONResponse({"id": session_id, "settings": settings}, status_code=201)

    async def list_sessions(request: Request) -> Response:
        infos = await store.session_infos(include_empty=True)
        return JSONResponse({"sessions": [i.to_dict() for i in infos]})

    async def get_session(request: Request) -> Response:
        session_id = request.path_params["session_id"]
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
                "last_event_id": await runner.bus.last_id(session_id),
                "latest": turn_to_dict(latest) if latest is not None else None,
                "pending_approvals": [c.to_dict() for c in awaiting(latest)],
                "snapshot_count": page[-1].seq if page else 0,
                "snapshots": [_snapshot_info(i) for i in page],
                "older_snapshots": _older(session_id, page),
                "inferences": [r.to_dict() for r in inferences],
            }
        )

    async def list_snapshots(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await runner.settings(session_id)
        before = _number(request.query_params.get("before"), "before")
        limit = min(_number(request.query_params.get("limit"), "limit") or SNAPSHOT_PAGE, MAX_SNAPSHOT_PAGE)
        page = await store.snapshot_infos(session_id, before=before, limit=limit)
        return JSONResponse({"snapshots": [_snapshot_info(i) for i in page], "older": _older(session_id, page)})

    async def get_snapshot(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await runner.settings(session_id)
        seq = _number(request.path_params["seq"], "seq")
        turn = await store.load_snapshot(session_id, seq or 0)
        if turn is None:
            raise ApiError(
                404, f"session {session_id} has no snapshot {seq}; list them with GET .../snapshots", "not_found"
            )
        return JSONResponse({"seq": seq, "turn": turn_to_dict(turn)})

    async def delete_session(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await runner.settings(session_id)
        lease = await store.try_lock(session_id)
        if lease is None:
            raise Busy(f"session {session_id} is running an inference; cancel it before deleting the session")
        try:
            await store.delete_session(session_id)
        finally:
            await lease.release()
        return Response(status_code=204)

    async def post_message(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        body = _object(await read_json(request, max_body))
        if unknown := sorted(set(body) - {"text", "files"}):
            raise ApiError(
                422, f"unknown field(s) {', '.join(unknown)}; a prompt takes text and files only", "invalid_request"
            )
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(422, 'send the prompt as {"text": "..."} with some text', "invalid_request")
        try:
            files = prompt_files(body.get("files"))
        except ValueError as exc:
            raise ApiError(422, str(exc), "invalid_request") from None
        started = await runner.start(session_id, text.strip(), files=files)
        return JSONResponse(
            {
                "inference_id": started.inference_id,
                "after": started.after,
                "events": f"/api/sessions/{session_id}/events?after={started.after}",
            },
            status_code=202,
        )

    async def post_approvals(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        body = _object(await read_json(request, max_body))
        if unknown := sorted(set(body) - {"decisions"}):
            raise ApiError(
                422, f'unknown field(s) {", ".join(unknown)}; send {{"decisions": {{...}}}}', "invalid_request"
            )
        decisions = body.get("decisions")
        if not isinstance(decisions, dict) or not decisions:
            raise ApiError(
                422,
                'send {"decisions": {"<call_id>": true | false | "reason to deny"}} (a client-side tool\'s call '
                "id takes its result); GET /api/sessions/{id} lists pending_approvals",
                "invalid_request",
            )
        started = await runner.start(session_id, "", decisions=decisions)
        return JSONResponse(
            {
                "inference_id": started.inference_id,
                "after": started.after,
                "events": f"/api/sessions/{session_id}/events?after={started.after}",
            },
            status_code=202,
        )

    async def rewind(request: Request) -> Response:
        body = _object(await read_json(request, max_body))
        n = body.get("n", 1)
        if set(body) - {"n"} or not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ApiError(
                422, 'send {"n": N}: the number of prompts to drop with their answers (1 or more)', "invalid_request"
            )
        return JSONResponse(await rewind_session(runner, request.path_params["session_id"], n))

    async def fork(request: Request) -> Response:
        body = _object(await read_json(request, max_body))
        if set(body) - {"id"}:
            raise ApiError(422, 'send {} or {"id": "<new session id>"}', "invalid_request")
        fork_id = _session_id(body["id"], "id") if "id" in body else None
        return JSONResponse(await fork_session(runner, request.path_params["session_id"], fork_id), status_code=201)

    async def cancel(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        inference_id = await runner.cancel(session_id)
        return JSONResponse({"inference_id": inference_id, "cancelling": True}, status_code=202)

    async def events(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        await runner.settings(session_id)
        after = request.headers.get("last-event-id") or request.query_params.get("after") or START
        until = request.query_params.get("until")
        if until not in (None, "finished"):
            raise ApiError(422, "'until' takes one value: finished", "invalid_request")
        inference = request.query_params.get("inference_id")

        async def body() -> AsyncIterator[str]:
            try:
                async for event in streams.events(session_id, after):
                    if event is None:
                        yield ": keep-alive\n\n"
                        continue
                    data = json.dumps(public_event(event.data), ensure_ascii=False, default=str)
                    yield f"id: {event.id}\nevent: {event.data.get('type', 'event')}\ndata: {data}\n\n"
                    if (
                        until
                        and event.data.get("type") == RUN_FINISHED
                        and inference in (None, event.data.get("inference_id"))
                    ):
                        return
            except ValueError as exc:  # a Last-Event-ID the bus never gave
                yield f"event: error\ndata: {json.dumps({'message': public(exc)})}\n\n"
            except BusUnavailable as exc:  # the broker went away: the client reconnects with Last-Event-ID
                log.warning("the event stream of session %s ended: %s", session_id, exc)
                yield f"event: error\ndata: {json.dumps({'message': public(exc), 'type': 'bus_unavailable'})}\n\n"

        return StreamingResponse(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})

    # -- front-end protocols -------------------------------------------------------------------
    async def protocol_start(
        session_id: str,
        prompt: str,
        seed: Any,
        client_tools: Any = None,
        files: list[dict[str, Any]] | None = None,
    ) -> Started:
        settings = await runner.ensure_session(session_id)
        return await runner.start(
            session_id, prompt, seed=seed, settings=settings, client_tools=client_tools, files=files
        )

    async def run_stream(started: Started) -> AsyncIterator[dict[str, Any]]:
        """The bus events of one inference, from its start to its ``run_finished``."""
        async for event in streams.events(started.session_id, started.after):
            if event is None:
                continue
            if event.data.get("inference_id") != started.inference_id:
                continue
            yield public_event(event.data)
            if event.data.get("type") == RUN_FINISHED:
                return

    async def waiting(session_id: str) -> dict[str, PendingCall]:
        """The calls that wait in ``session_id`` (none for a session the store does not know)."""
        known = await store.session_settings(session_id) is not None
        latest = await store.load_latest(session_id) if known else None
        return {c.call_id: c for c in awaiting(latest)}

    async def protocol_resume(session_id: str, decisions: dict[str, Any], client_tools: Any = None) -> Started:
        if not decisions:
            raise UsageError(
                f"session {session_id} has no tool call waiting for what this request answers; "
                "send a new user message instead"
            )
        settings = await runner.settings(session_id)
        return await runner.start(session_id, "", settings=settings, decisions=decisions, client_tools=client_tools)

    async def ag_ui(request: Request) -> Response:
        body = await read_json(request, max_body, ("threadId", "runId"))
        try:
            run = agui.parse_input(body)
            thread = _session_id(run.thread_id, "threadId")  # a bad id is a 422 before anything is streamed
            client_tools = agui.client_tools(run)
            if agui.wants_resume(run):
                calls = await waiting(thread)
                decisions = agui.resume_decisions(run, calls)
                answered = {i for i in decisions if i in calls and calls[i].kind == "client"}
                starting = asyncio.ensure_future(protocol_resume(thread, decisions, client_tools))
            else:
                prompt, seed = agui.prompt_and_seed(run)
                answered = set()
                starting = asyncio.ensure_future(protocol_start(thread, prompt, seed, client_tools))
        except ValueError as exc:  # pydantic's ValidationError is one
            raise ApiError(422, f"not an AG-UI run input: {exc}", "invalid_request") from None
        stream = agui.AGUIStream(run.thread_id, run.run_id, request.headers.get("accept"), answered=answered)
        # RUN_STARTED goes out at once; the inference begins meanwhile in a task made here, so it carries
        # this request's context (an incoming trace), and shielded, so a client that leaves does not cut
        # its start short. One that cannot begin (the thread is busy) ends the stream with RUN_ERROR.
        starting.add_done_callback(lambda task: task.cancelled() or task.exception())  # read when nobody waits

        async def out() -> AsyncIterator[str]:
            yield stream.encode(stream.started())
            try:
                started = await asyncio.shield(starting)
            except Exception as exc:
                if not isinstance(exc, Busy | UsageError):
                    log.exception("AG-UI run %s of thread %s could not begin", run.run_id, run.thread_id)
                yield stream.encode(stream.not_started(exc))
                return
            async for event in run_stream(started):
                if produced := stream.feed(event):
                    yield stream.encode(produced)

        return StreamingResponse(out(), media_type=stream.media_type, headers={"cache-control": "no-cache"})

    async def vercel_chat(request: Request) -> Response:
        body = await read_json(request, max_body, ("id",))
        continued = vercel.resumed_message(body)
        if continued is not None:  # the client answered approvals or ran client-side tools
            chat_id = _session_id(body.get("id"), "id")
            calls = await waiting(chat_id)
            decisions = vercel.resume_decisions(continued, calls)
            started = await protocol_resume(chat_id, decisions)
            stream = vercel.VercelStream(
                str(continued.get("id") or "") or None,
                answered={i for i in decisions if calls[i].kind == "client"},
                denied={i for i, d in decisions.items() if calls[i].kind != "client" and d is not True},
            )
        else:
            try:
                chat_id, prompt, seed = vercel.prompt_and_seed(body)
                files = prompt_files(vercel.prompt_files(body))
            except ValueError as exc:
                raise ApiError(422, str(exc), "invalid_request") from None
            started = await protocol_start(_session_id(chat_id, "id"), prompt, seed, files=files)
            stream = vercel.VercelStream()

        async def out() -> AsyncIterator[str]:
            async for event in run_stream(started):
                for chunk in stream.feed(event):
                    yield vercel.sse(chunk)
            yield vercel.DONE

        return StreamingResponse(out(), media_type="text/event-stream", headers=vercel.HEADERS)

    # -- the web front-end and what it reads ------------------------------------------------------
    async def page(request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
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

    async def info(request: Request) -> Response:
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

    async def inspect(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        settings = await runner.settings(session_id)
        before = _number(request.query_params.get("before"), "before")
        limit = min(_number(request.query_params.get("limit"), "limit") or INSPECT_PAGE, MAX_SNAPSHOT_PAGE)
        report = await _inspect_window(session_id, before, limit)
        report["settings"] = settings
        return JSONResponse(report)

    async def _inspect_window(session_id: str, before: int | None, limit: int) -> dict[str, Any]:
        """The inspector's report over ``limit`` snapshots before number ``before`` (the latest when None):
        those snapshots, the events and inferences of the time they cover, and the route of the page before."""
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
        report.update(
            {"snapshot_count": count, "window": {"first": first, "last": last, "limit": limit}, "older": older}
        )
        return report

    async def dashboard(request: Request) -> Response:
        raw = request.query_params.get("limit", str(DASHBOARD_SESSIONS))
        if not raw.isdigit() or int(raw) < 1:
            raise ApiError(422, "'limit' must be a positive number of sessions", "invalid_request")
        summaries, limited = await store.session_summaries(limit=int(raw))
        summary = web.dashboard([await _session_totals(s) for s in summaries])
        summary["limited"] = limited
        return JSONResponse(summary)

    async def _session_totals(kept: SessionSummary) -> dict[str, Any]:
        """A session's totals from the summary its store kept; a session without an event log has its
        requests inferred from its latest snapshot (that one snapshot is read)."""
        if kept.events and kept.totals is not None:
            return {"session_id": kept.session_id, "first_prompt": kept.first_prompt, "totals": kept.totals}
        latest = await store.load_latest(kept.session_id)
        totals = web.session_totals([latest] if latest is not None else [], session_id=kept.session_id)
        return {**totals, "first_prompt": kept.first_prompt}

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(keyed=bool(api_key)))

    async def metrics(request: Request) -> Response:
        try:
            import prometheus_client
        except ImportError:
            raise ApiError(
                404, "metrics need prometheus_client in the server: pip install 'geppetto[prometheus]'", "not_found"
            ) from None
        return Response(prometheus_client.generate_latest(), media_type=prometheus_client.CONTENT_TYPE_LATEST)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "worker": runner.worker})

    routes = [
        Route("/api/sessions", guarded(create_session), methods=["POST"]),
        Route("/api/sessions", guarded(list_sessions), methods=["GET"]),
        Route("/api/sessions/{session_id}", guarded(get_session), methods=["GET"]),
        Route("/api/sessions/{session_id}", guarded(delete_session), methods=["DELETE"]),
        Route("/api/sessions/{session_id}/messages", guarded(post_message), methods=["POST"]),
        Route("/api/sessions/{session_id}/approvals", guarded(post_approvals), methods=["POST"]),
        Route("/api/sessions/{session_id}/rewind", guarded(rewind), methods=["POST"]),
        Route("/api/sessions/{session_id}/fork", guarded(fork), methods=["POST"]),
        Route("/api/sessions/{session_id}/cancel", guarded(cancel), methods=["POST"]),
        Route("/api/sessions/{session_id}/events", guarded(events), methods=["GET"]),
        Route("/api/sessions/{session_id}/snapshots", guarded(list_snapshots), methods=["GET"]),
        Route("/api/sessions/{session_id}/snapshots/{seq}", guarded(get_snapshot), methods=["GET"]),
        Route("/api/chat", guarded(vercel_chat), methods=["POST"]),
        Route("/ag-ui", guarded(ag_ui), methods=["POST"]),
        Route("/api/sessions/{session_id}/inspect", guarded(inspect), methods=["GET"]),
        Route("/api/dashboard", guarded(dashboard), methods=["GET"]),
        Route("/api/info", guarded(info), methods=["GET"]),
        Route("/", guarded(page, open_route=True), methods=["GET"]),
        Route("/ui/{name}", guarded(page, open_route=True), methods=["GET"]),
        Route("/openapi.json", guarded(openapi, open_route=True), methods=["GET"]),
        Route("/healthz", guarded(health, open_route=True), methods=["GET"]),
        Route("/metrics", guarded(metrics), methods=["GET"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            if exc.status_code == 404:
                return error_response(
                    404, f"no route {request.method} {request.url.path}; see /openapi.json for the API", "not_found"
                )
            if exc.status_code == 405:
                allow = allowed_methods(routes, request.url.path)
                return error_response(
                    405,
                    f"{request.method} is not allowed on {request.url.path} (it takes {allow}); see /openapi.json",
                    "bad_method",
                    headers={"allow": allow},
                )
            return error_response(exc.status_code, str(exc.detail), "http_error")
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error: {type(exc).__name__}; the server log has the details", "internal")

    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)],
        exception_handlers={HTTPException: http_error, Exception: http_error},
        lifespan=lifespan,
    )
