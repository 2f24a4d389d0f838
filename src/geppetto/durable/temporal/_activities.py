"""The activities of geppetto's session workflow: one provider request, one tool call.

A request activity runs a :class:`~geppetto.Session` (the session's middleware, structured output, usage
accounting and store, unchanged) on the Turn the workflow holds, with the session's tools offered as
client-side tools: the inference makes its request and ends with the model's calls waiting, so each tool
call is an activity of its own and its answer is in workflow history before the next request is made. The
next request activity answers the calls (``Session.resume``) and the request chains from the response that
made them, like any tool step. A request activity is given the whole Turn and answers with a delta
(:class:`~geppetto.durable.temporal._types.TurnDelta`: the blocks from the first one it changed).

A retried request activity (its worker stopped) finds out first what the attempt before it left: a
background response whose id the attempt recorded in its heartbeat is read on instead of sent again
(``providers._background``); otherwise the request is sent again from the same Turn, still chained, and
counted as a retry of unknown outcome (``providers._landed``). A retried tool activity follows the tool's
``on_interrupted`` policy (the journal's rule): ``"retry"`` runs it again, otherwise the model reads that it
was interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..._exceptions import GeppettoError, ProviderError, ToolDefinitionError, UsageError
from ...engine import Engine
from ...events import Event
from ...middleware import Middleware, system_prompt
from ...providers import BACKGROUND_OBSERVER, PENDING_RESPONSE, PendingResponse, retried_unknown
from ...session import TURN_META_SESSION_USAGE, Session, prepare_resume
from ...tools import (
    APPROVAL,
    INTERRUPTED_ERROR,
    ApprovalPolicy,
    Tool,
    ToolRegistry,
    ToolReportedError,
    client_tool,
    execute_tool_calls,
    interrupted_policy,
    needs_person,
    pending_tool_calls,
    registry_require,
)
from ...turns import PAYLOAD_ARGS, PAYLOAD_ID, PAYLOAD_NAME, Turn, TurnData, block_to_json
from ._types import Answer, CallInfo, RequestInput, RequestOutput, ToolInput, ToolOutput, TurnDelta

__all__ = ["REQUEST", "TOOL", "Activities", "resolve_middleware"]

log = logging.getLogger("geppetto.durable")

REQUEST = "geppetto.request"
TOOL = "geppetto.tool"

EngineSource = Callable[[], Engine] | str


class EventRelay(Protocol):
    """Where the events of one request activity go (``worker(events=...)`` makes one per request)."""

    def __call__(self, event: Event) -> None:
        """A sink: called with each event, in order."""

    async def aclose(self) -> None:
        """The request is over: deliver what is left."""


RelayFactory = Callable[[str, Mapping[str, str]], EventRelay | None]
"""``(session_id, context) -> EventRelay | None``: the relay of a request of that session, given the context
its prompt was sent with (``DurableSession.run(..., context=...)``)."""


def resolve_middleware(ref: str) -> Middleware:
    """The middleware a ``module:name`` reference names (imported on the worker)."""
    module, _, name = ref.partition(":")
    try:
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(
            f"middleware {ref!r} cannot be imported on this worker ({exc}); install its module here"
        ) from exc
    if not callable(target):
        raise UsageError(f"middleware {ref!r} is not callable")
    return target  # type: ignore[no-any-return]


class _Heartbeat:
    """Heartbeats while an activity runs, carrying what a retry needs (a background response's id)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.details: dict[str, Any] = {}

    # a BackgroundObserver: the response a retry reads on instead of sending again
    def created(self, response_id: str, turn: Turn) -> None:
        self.details = {"response_id": response_id, "after": -1, "blocks": len(turn.blocks)}
        activity.heartbeat(self.details)

    def advanced(self, response_id: str, cursor: int, resume_after: str | None = None) -> None:
        if self.details.get("response_id") == response_id:
            self.details = {**self.details, "after": cursor, "resume_after": resume_after}

    def cancels_response(self) -> bool:
        return False  # another worker picks it up

    @contextlib.asynccontextmanager
    async def beating(self) -> AsyncIterator[None]:
        async def beat() -> None:
            while True:
                activity.heartbeat(self.details)
                await asyncio.sleep(self.interval)

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _failure(exc: BaseException) -> BaseException:
    """``exc`` as the activity's failure: a usage or configuration error, or a provider's refusal of the
    request (a 4xx other than 408 and 429), is not retried; anything else is, by the retry policy."""
    status = getattr(exc, "status", None)
    final = isinstance(exc, (UsageError, ToolDefinitionError)) or (
        isinstance(exc, ProviderError) and isinstance(status, int) and 400 <= status < 500 and status not in (408, 429)
    )
    if isinstance(exc, GeppettoError) and final:
        return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)
    return exc


class Activities:
    """The activities of one worker: its engines (built once, on first use) and its tools."""

    def __init__(
        self,
        engines: Mapping[str, EngineSource],
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
        store: Any = None,
        events: RelayFactory | None = None,
    ) -> None:
        if not engines:
            raise UsageError("worker(engines=...) needs at least one engine, e.g. engines={'default': 'sim'}")
        self.sources = dict(engines)
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(list(tools))
        self.store = store
        self.events = events
        self._engines: dict[str, Engine] = {}
        self._held = contextlib.ExitStack()
        # the model sees the tools; the inference stops at their calls, which run as activities
        self._offered = ToolRegistry(
            [client_tool(name=d.name, description=d.description, parameters=d.parameters) for d in self.tools.list()]
        )

    def close(self) -> None:
        """Stop what the engines of profiles started (a simulator)."""
        self._held.close()

    def engine(self, name: str) -> Engine:
        built = self._engines.get(name)
        if built is not None:
            return built
        source = self.sources.get(name)
        if source is None:
            known = ", ".join(self.sources)
            raise UsageError(f"this worker has no engine {name!r}; it has: {known} (worker(engines={{...}}))")
        if isinstance(source, str):
            from ...profiles import load_profiles
            from ...runtime import open_engine

            profiles, _default = load_profiles()
            profile = profiles.get(source)
            if profile is None:
                raise UsageError(f"no profile {source!r}; list them with `geppetto profiles list`")
            built = self._held.enter_context(open_engine(profile)).engine
        else:
            built = source()
        self._engines[name] = built
        return built

    # -- a provider request ----------------------------------------------------------------------
    @activity.defn(name=REQUEST)
    async def request(self, req: RequestInput) -> RequestOutput:
        beat = _Heartbeat(max(0.5, req.session.heartbeat_s / 4))
        async with beat.beating():
            try:
                return await self._request(req, beat)
            except Exception as exc:
                raise _failure(exc) from exc

    async def _request(self, req: RequestInput, beat: _Heartbeat) -> RequestOutput:
        spec = req.session
        info = activity.info()
        middlewares: list[Middleware] = [system_prompt(spec.system)] if spec.system else []
        middlewares += [resolve_middleware(ref) for ref in spec.middlewares]
        relay = self.events(spec.session_id, req.context) if self.events is not None else None
        session = Session(
            self.engine(spec.engine),
            tools=self._offered,
            middlewares=middlewares,
            store=self.store,
            session_id=spec.session_id,
            sinks=[relay] if relay is not None else [],
        )
        try:
            return await self._requested(req, session, beat, info)
        finally:
            if relay is not None:
                await relay.aclose()

    async def _requested(
        self, req: RequestInput, session: Session, beat: _Heartbeat, info: activity.Info
    ) -> RequestOutput:
        spec = req.session
        turn_in = req.turn
        given = [block_to_json(b) for b in turn_in.blocks] if turn_in is not None else []  # as the workflow holds it
        load_latest = getattr(self.store, "load_latest", None)
        if turn_in is None and load_latest is not None:  # a new workflow of a session the store holds
            turn_in = await load_latest(spec.session_id)
        if turn_in is not None:
            session.append(turn_in)
        if req.prompt is not None:
            seed = session.prompt(req.prompt.text, files=req.prompt.files or None)
            if req.prompt.output:
                seed.data.update(req.prompt.output)
        else:
            turn = session.latest
            assert turn is not None, "a request without a prompt continues a Turn"
            _as_client_calls(turn, {a.call_id for a in req.answers})
            prepare_resume(session, {a.call_id: _client_answer(a) for a in req.answers})
        if info.attempt > 1:
            self._before_retry(req, info)
        BACKGROUND_OBSERVER.set(beat)
        out = await session.start_inference(inference_id=req.inference_id).wait()
        if session.usage.requests:
            TURN_META_SESSION_USAGE.set(out.metadata, session.usage.to_dict())
        calls = self._calls(out)  # marks the calls that wait for a person: before the delta is taken
        return RequestOutput(_delta(given, out), calls)

    @staticmethod
    def _before_retry(req: RequestInput, info: activity.Info) -> None:
        details = info.heartbeat_details[0] if info.heartbeat_details else None
        if isinstance(details, dict) and details.get("response_id"):
            PENDING_RESPONSE.set(
                PendingResponse(
                    str(details["response_id"]),
                    int(details.get("after", -1)),
                    int(details.get("blocks", 0)),
                    details.get("resume_after"),
                )
            )
            log.info("session %s: reading on background response %s", req.session.session_id, details["response_id"])
            return
        retried_unknown(
            "temporal",
            f"request {req.inference_id} of session {req.session.session_id}",
            f"attempt {info.attempt - 1} stopped (its worker stopped or timed out)",
            "the request was not a background one, so no response id was recorded",
        )

    def _calls(self, turn: Turn) -> list[CallInfo]:
        policy = ApprovalPolicy()
        require = registry_require(self.tools)
        out = []
        for call in pending_tool_calls(turn):
            name = str(call.payload.get(PAYLOAD_NAME, ""))
            asks = needs_person(self.tools.get(name), call, policy, require) == "pending"
            if asks:  # it waits for a person, as a Session's own tool loop marks it
                state = dict(APPROVAL.get(call.metadata) or {})
                APPROVAL.set(call.metadata, {**state, "state": "pending"})
            out.append(CallInfo(str(call.payload.get(PAYLOAD_ID, "")), name, call.payload.get(PAYLOAD_ARGS), asks))
        return out

    # -- a tool call ---------------------------------------------------------------------------------
    @activity.defn(name=TOOL)
    async def tool(self, req: ToolInput) -> ToolOutput:
        beat = _Heartbeat(max(0.5, req.heartbeat_s / 4))
        async with beat.beating():
            name = str(req.call.payload.get(PAYLOAD_NAME, ""))
            t = self.tools.get(name)
            if activity.info().attempt > 1 and t is not None and interrupted_policy(t) != "retry":
                log.warning("tool call %s (%s) was interrupted; not run again", req.call.payload.get(PAYLOAD_ID), name)
                return ToolOutput(None, INTERRUPTED_ERROR)
            (answer,) = await execute_tool_calls(self.tools, [req.call])
            error = answer.payload.get("error")
            return ToolOutput(None if error is not None else str(answer.payload.get("result", "")), error)


def _delta(given: list[str], out: Turn) -> TurnDelta:
    """``out`` as a delta from the Turn whose blocks' JSON is ``given``: the blocks from the first that differs."""
    keep = 0
    for i, old in enumerate(given):
        if i >= len(out.blocks) or block_to_json(out.blocks[i]) != old:
            break
        keep = i + 1
    return TurnDelta(keep, list(out.blocks[keep:]), out.id, dict(out.metadata), dict(out.data))


def _as_client_calls(turn: Turn, ids: set[str]) -> None:
    """The calls ``ids`` as calls the client answers (those a person approved or denied too)."""
    for call in pending_tool_calls(turn):
        if str(call.payload.get(PAYLOAD_ID, "")) in ids:
            state = dict(APPROVAL.get(call.metadata) or {})
            APPROVAL.set(call.metadata, {**state, "state": "client"})


def _client_answer(answer: Answer) -> Any:
    return ToolReportedError(answer.error) if answer.error is not None else (answer.result or "")


def output_entry(output: Any) -> dict[str, Any]:
    """The Turn data entry ``Session.run(..., output=...)`` sets, as JSON."""
    from ...output import STRUCTURED_OUTPUT, output_config

    data = TurnData()
    STRUCTURED_OUTPUT.set(data, output_config(output))
    return dict(data)
