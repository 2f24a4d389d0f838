"""The front-end protocols: AG-UI (``POST /ag-ui``) and the Vercel AI SDK's UI message stream
(``POST /api/chat``). Each reads its own input (the protocol modules name what is wrong); the models in
:mod:`~geppetto.server._models` document it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..._exceptions import UsageError
from ...tools import PendingCall, awaiting
from .. import agui, vercel
from .._api import ERRORS, Api, ApiError, GuardedRoute, api, documents_body, read_json
from .._guard import public_event
from .._messages import prompt_files
from .._models import MAX_ID, ChatRequest, RunAgentInput
from .._runner import RUN_FINISHED, Busy, Started
from .events import SSE

__all__ = ["router"]

log = logging.getLogger("geppetto.server")

router = APIRouter(route_class=GuardedRoute, responses=ERRORS, tags=["protocols"])

Handler = Callable[[Request], Awaitable[Response]]


def _session_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID:
        raise ApiError(422, f"{field!r} must be a string of 1 to {MAX_ID} characters, not all blank", "invalid_request")
    return value


async def _start(
    the_api: Api,
    session_id: str,
    prompt: str,
    seed: Any,
    client_tools: Any = None,
    files: list[dict[str, Any]] | None = None,
) -> Started:
    settings = await the_api.runner.ensure_session(session_id)
    return await the_api.runner.start(
        session_id, prompt, seed=seed, settings=settings, client_tools=client_tools, files=files
    )


async def _resume(the_api: Api, session_id: str, decisions: dict[str, Any], client_tools: Any = None) -> Started:
    if not decisions:
        raise UsageError(
            f"session {session_id} has no tool call waiting for what this request answers; "
            "send a new user message instead"
        )
    settings = await the_api.runner.settings(session_id)
    return await the_api.runner.start(session_id, "", settings=settings, decisions=decisions, client_tools=client_tools)


async def _run_stream(the_api: Api, started: Started) -> AsyncIterator[dict[str, Any]]:
    """The bus events of one inference, from its start to its ``run_finished``."""
    async for event in the_api.streams.events(started.session_id, started.after):
        if event is None:
            continue
        if event.data.get("inference_id") != started.inference_id:
            continue
        yield public_event(event.data, started.session_id)
        if event.data.get("type") == RUN_FINISHED:
            return


async def _waiting(the_api: Api, session_id: str) -> dict[str, PendingCall]:
    """The calls that wait in ``session_id`` (none for a session the store does not know)."""
    known = await the_api.store.session_settings(session_id) is not None
    latest = await the_api.store.load_latest(session_id) if known else None
    return {c.call_id: c for c in awaiting(latest)}


_VALIDATORS: dict[str, Any] = {}


def _validator(documented: type[Any]) -> Any:
    """The JSON Schema validator of a documented request model, made once."""
    found = _VALIDATORS.get(documented.__name__)
    if found is None:
        from jsonschema import Draft202012Validator

        found = _VALIDATORS[documented.__name__] = Draft202012Validator(documented.model_json_schema(by_alias=True))
    return found


def _conforms(documented: type[Any], body: Any) -> None:
    """Refuse (422) a body the route's documented schema refuses: the protocol code reads the body loosely
    (only the last user message counts), so the document is what holds clients to one shape."""
    error = next(iter(_validator(documented).iter_errors(body)), None)
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path) or "the body"
        raise ApiError(422, f"{where.lstrip('.')}: {error.message}", "invalid_request")


def _streams(path: str, documented: type[Any], summary: str) -> Callable[[Handler], Handler]:
    """A protocol's route: a JSON body ``documented`` by a model (read by the protocol's own module), an
    event stream out."""
    return router.post(
        path,
        responses=SSE,
        response_class=StreamingResponse,
        openapi_extra=documents_body(documented),
        summary=summary,
    )


@_streams("/ag-ui", RunAgentInput, "AG-UI: a RunAgentInput in, its event stream out (threadId is the session)")
async def ag_ui(request: Request) -> Response:
    the_api = api(request)
    body = await read_json(request, the_api.max_body, ("threadId", "runId"))
    try:
        run = agui.parse_input(body)
        thread = _session_id(run.thread_id, "threadId")  # a bad id is a 422 before anything is streamed
        client_tools = agui.client_tools(run)
        if agui.wants_resume(run):
            calls = await _waiting(the_api, thread)
            decisions = agui.resume_decisions(run, calls)
            answered = {i for i in decisions if i in calls and calls[i].kind == "client"}
            starting = asyncio.ensure_future(_resume(the_api, thread, decisions, client_tools))
        else:
            prompt, seed = agui.prompt_and_seed(run)
            answered = set()
            starting = asyncio.ensure_future(_start(the_api, thread, prompt, seed, client_tools))
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
        async for event in _run_stream(the_api, started):
            if produced := stream.feed(event):
                yield stream.encode(produced)

    return StreamingResponse(out(), media_type=stream.media_type, headers={"cache-control": "no-cache"})


@_streams("/api/chat", ChatRequest, "Vercel AI SDK UI message stream: the request useChat sends (id is the session)")
async def vercel_chat(request: Request) -> Response:
    the_api = api(request)
    body = await read_json(request, the_api.max_body, ("id",))
    _conforms(ChatRequest, body)
    continued = vercel.resumed_message(body)
    if continued is not None:  # the client answered approvals or ran client-side tools
        chat_id = _session_id(body.get("id"), "id")
        calls = await _waiting(the_api, chat_id)
        decisions = vercel.resume_decisions(continued, calls)
        started = await _resume(the_api, chat_id, decisions)
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
        started = await _start(the_api, _session_id(chat_id, "id"), prompt, seed, files=files)
        stream = vercel.VercelStream()

    async def out() -> AsyncIterator[str]:
        async for event in _run_stream(the_api, started):
            for chunk in stream.feed(event):
                yield vercel.sse(chunk)
        yield vercel.DONE

    return StreamingResponse(out(), media_type="text/event-stream", headers=vercel.HEADERS)
