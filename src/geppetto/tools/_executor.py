"""Running a model's tool calls: in parallel, each under a timeout, every failure as data.

Each call becomes exactly one ``tool_use`` block, in call order. An unknown tool, arguments that are
not JSON or fail validation, an exception (the tool's own ``TimeoutError`` included) and the
executor's timeout all become a ``tool_use`` with ``error`` so the model can see what went wrong and
try again. Only cancellation escapes, and ``KeyboardInterrupt``/``SystemExit`` raised by an async
tool: it runs on the event loop's thread, where asyncio re-raises them to stop the loop. Raised in a
sync tool's worker thread they are that tool's failure like any other exception.

Events: an engine publishes ``tool_call`` (requested) when a model's call arrives, since it sees the
call first; the executor does not repeat it. It publishes ``tool_call_started`` once per call when the
tool starts (after the tool was found and its arguments validated; retries are not new starts) and
``tool_result`` for every call, including those that never started.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._exceptions import GeppettoError, Retry, UsageError
from .._json import JSONTooDeep, parse_json
from ..events import EventMetadata, EventToolCallStarted, EventToolResult, publish
from ..turns import PAYLOAD_ARGS, PAYLOAD_ERROR, PAYLOAD_ID, PAYLOAD_NAME, PAYLOAD_RESULT, Block, Turn
from ._context import context_for
from ._journal import INTERRUPTED_ERROR, JOURNAL, MARKS_PUBLISHED, may_run_again
from ._pending import pending_tool_calls
from ._registry import ToolRegistry
from ._retry import TOOL_RETRY, over_the_bound, retry_error
from ._tool import Tool, ToolReportedError, serialize_result
from ._workers import WORKERS

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "OnError",
    "ToolCallError",
    "bound_result",
    "execute_tool_calls",
    "pending_tool_calls",
    "refuse_tool_calls",
    "require_tool_results",
]

OnError = Literal["continue", "retry", "raise"]


class ToolCallError(GeppettoError):
    """A tool call failed under ``on_error="raise"``. ``block`` is the failed ``tool_use``."""

    def __init__(self, message: str, *, block: Block) -> None:
        self.block = block
        super().__init__(message)


class _Failure(Exception):
    """A call that failed before or while running; ``retry`` says whether trying again may help."""

    def __init__(self, message: str, *, retry: bool, asked: bool = False) -> None:
        self.retry = retry
        self.asked = asked  # the tool raised Retry: the model is asked to try again
        super().__init__(message)


class _Raised(Exception):
    """What a sync tool raised in its worker thread, carried back to the loop. A wrapper because a
    future refuses ``StopIteration`` (``set_exception`` raises ``TypeError`` inside the loop's callback,
    so the call would hang until its timeout) and must not deliver ``SystemExit``/``KeyboardInterrupt``,
    which would escape the event loop."""

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(original)


_sleep = asyncio.sleep
"""The backoff sleep (a module attribute so tests can record the schedule)."""


@dataclass
class _Options:
    timeout_s: float
    on_error: OnError
    metadata: EventMetadata
    max_result_chars: int | None = None
    turn: Turn | None = None


DEFAULT_MAX_RESULT_CHARS = 100_000
"""The longest tool result sent to a model unless told otherwise (about 25,000 tokens of English)."""


def bound_result(result: str, limit: int | None) -> str:
    """``result`` cut to ``limit`` characters with a closing line saying so, or as it is when it fits."""
    if limit is None or len(result) <= limit:
        return result
    return (
        f"{result[:limit]}\n[truncated: the tool returned {len(result):,} characters and only the first "
        f"{limit:,} are shown; ask for less, e.g. a narrower query or a page of the data]"
    )


def require_tool_results(turn: Turn) -> None:
    """:class:`UsageError` when ``turn`` ends with tool calls that have no result (a stateful engine has
    nothing new to send after its last answer then)."""
    pending = pending_tool_calls(turn)
    if pending:
        ids = ", ".join(str(b.payload.get(PAYLOAD_ID)) for b in pending)
        raise UsageError(
            f"the Turn ends with tool calls that have no result ({ids}): append Block.tool_use(call_id, "
            "result) for each, or run the engine under tool_loop(...) / Session(engine, tools=[...])"
        )


async def execute_tool_calls(
    registry: ToolRegistry,
    calls: Sequence[Block],
    *,
    timeout_s: float = 30.0,
    max_parallel: int = 4,
    on_error: OnError = "continue",
    metadata: EventMetadata | None = None,
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    turn: Turn | None = None,
) -> list[Block]:
    """Run ``calls`` (``tool_call`` blocks) and return one ``tool_use`` block per call, in call order.

    At most ``max_parallel`` run at once; each is bounded by ``timeout_s`` (or the tool's own
    ``timeout_s``): an async tool is cancelled, a sync tool runs in a worker thread whose result is
    abandoned (the thread runs on; it no longer counts against ``max_parallel``). ``on_error``:
    ``"continue"`` (failures become error results), ``"retry"`` (every tool is retried like a
    ``retryable`` one), ``"raise"`` (once all calls have ended, raise :class:`ToolCallError` for the
    first failed one). Retries wait ``backoff_s * 2**attempt``; a sync tool that timed out is not
    retried, since its abandoned thread may still be running and a retry would run a second copy.

    ``turn`` is the Turn the calls were made in: a tool taking a :class:`~geppetto.ToolContext` gets a view
    of it. A tool raising :class:`~geppetto.Retry` answers with its message as the error; more than the
    tool's ``max_retries`` of those in one inference raise :class:`ToolCallError` for the call.
    """
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    if max_result_chars is not None and max_result_chars < 1:
        raise ValueError("max_result_chars must be at least 1 (or None for no bound)")
    opts = _Options(timeout_s, on_error, metadata or EventMetadata(), max_result_chars, turn)
    gate = asyncio.Semaphore(max_parallel)

    async def one(call: Block) -> Block:
        async with gate:
            return await _execute_one(registry, call, opts)

    # One call (the common case) is awaited directly: gather would make a task for it.
    blocks = [await one(calls[0])] if len(calls) == 1 else list(await asyncio.gather(*(one(c) for c in calls)))
    if (over := over_the_bound(turn, registry, blocks)) is not None:
        name = TOOL_RETRY.get(over.metadata)
        raise ToolCallError(
            f"tool {name} asked the model to try again more than its max_retries allow "
            f"(@tool(max_retries=...)); the last call, {over.payload[PAYLOAD_ID]}: {over.payload['error']}",
            block=over,
        )
    if on_error == "raise":
        failed = next((b for b in blocks if b.payload.get("error") is not None), None)
        if failed is not None:
            raise ToolCallError(
                f"tool call {failed.payload[PAYLOAD_ID]} failed: {failed.payload['error']}", block=failed
            )
    return blocks


async def _execute_one(registry: ToolRegistry, call: Block, opts: _Options) -> Block:
    call_id = str(call.payload.get(PAYLOAD_ID, ""))
    name = str(call.payload.get(PAYLOAD_NAME, ""))
    journal = JOURNAL.get()
    if journal is not None and (journaled := journal.result(call_id)) is not None:
        # it ran before this process picked the inference up: not again; its event again only if it never went out
        if not journal.was_published(call_id):
            failed = journaled.payload.get(PAYLOAD_ERROR)
            _answer(call_id, name, None if failed else journaled.payload.get(PAYLOAD_RESULT), failed, opts.metadata)
            if MARKS_PUBLISHED.get():
                await journal.published(call_id)
        return journaled
    result: str | None = None
    error: str | None = None
    asked = False
    try:
        t = registry.get(name)
        if t is None:
            known = ", ".join(registry.names()) or "(none)"
            raise _Failure(f"unknown tool {name!r}; available tools: {known}", retry=False)
        kwargs = _arguments(t, call.payload.get(PAYLOAD_ARGS))
        if journal is not None and journal.interrupted(call_id) and not may_run_again(t, call):
            raise _Failure(INTERRUPTED_ERROR, retry=False)
        if t.context_param is not None:
            kwargs = {t.context_param: context_for(opts.turn, call_id, name), **kwargs}
        publish(EventToolCallStarted(opts.metadata, call_id=call_id, name=name))
        if journal is not None:
            await journal.started(call_id, name)
        result = bound_result(await _with_retries(t, kwargs, opts), opts.max_result_chars)
    except _Failure as exc:
        error, asked = str(exc), exc.asked
    answer = Block.tool_use(call_id, result if error is None else "", error)
    if asked:
        TOOL_RETRY.set(answer.metadata, name)  # on the journaled block too: a picked-up run counts the same tries
    if journal is not None:
        # journaled before its event: a stop in between loses the event, never runs the tool twice
        await journal.finished(call_id, name, answer)
    out = _answer(call_id, name, result, error, opts.metadata, answer)
    if journal is not None and MARKS_PUBLISHED.get():
        await journal.published(call_id)  # the sinks have its event
    return out


def _answer(
    call_id: str, name: str, result: str | None, error: str | None, metadata: EventMetadata, block: Block | None = None
) -> Block:
    publish(EventToolResult(metadata, call_id=call_id, name=name, result=result, error=error))
    # On failure the result is empty and ``error`` says why; engines show the error to the model.
    return block if block is not None else Block.tool_use(call_id, result if error is None else "", error)


def refuse_tool_calls(calls: Sequence[Block], error: str, *, metadata: EventMetadata | None = None) -> list[Block]:
    """One ``tool_use`` with ``error`` per call, in call order, without running anything (e.g. the
    turn disabled tools but the model called one anyway). Publishes ``tool_result`` for each."""
    meta = metadata or EventMetadata()
    return [
        _answer(str(c.payload.get(PAYLOAD_ID, "")), str(c.payload.get(PAYLOAD_NAME, "")), None, error, meta)
        for c in calls
    ]


def _json_problem(raw: str, exc: ValueError) -> str:
    """What is wrong with ``raw`` in json's words ("Expecting ',' delimiter at char 12")."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at char {exc.pos}"
    try:
        json.loads(raw)
    except json.JSONDecodeError as decode_error:
        return f"{decode_error.msg} at char {decode_error.pos}"
    except (ValueError, RecursionError):
        pass
    return str(exc)


def _arguments(t: Tool, raw: Any) -> dict[str, Any]:
    if raw is None or raw == "":
        raw = {}
    if isinstance(raw, str):
        try:
            raw = parse_json(raw)
        except JSONTooDeep as exc:
            raise _Failure(
                f"arguments for {t.name} are refused: {exc}; send a flatter JSON object", retry=False
            ) from None
        except ValueError as exc:
            raise _Failure(
                f"arguments for {t.name} are not valid JSON ({_json_problem(raw, exc)})", retry=False
            ) from None
    if not isinstance(raw, dict):
        raise _Failure(f"arguments for {t.name} must be a JSON object, got {type(raw).__name__}", retry=False)
    try:
        return t.validate(raw)
    except Exception as exc:
        from pydantic_core import ValidationError  # loaded with the tool's pydantic model

        if not isinstance(exc, ValidationError):
            raise
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors())
        raise _Failure(f"invalid arguments for {t.name}: {problems}", retry=False) from exc


async def _with_retries(t: Tool, kwargs: dict[str, Any], opts: _Options) -> str:
    retries = t.max_retries if (t.retryable or opts.on_error == "retry") else 0
    attempt = 0
    while True:
        try:
            return await _run_once(t, kwargs, t.timeout_s if t.timeout_s is not None else opts.timeout_s)
        except _Failure as exc:
            if attempt >= retries or not exc.retry:
                if attempt:
                    raise _Failure(f"{exc} (after {attempt + 1} attempts)", retry=False, asked=exc.asked) from exc
                raise
        await _sleep(t.backoff_s * 2**attempt)
        attempt += 1


async def _run_once(t: Tool, kwargs: dict[str, Any], timeout_s: float) -> str:
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            value = await (t.call(kwargs) if t.is_async else _in_thread(t, kwargs))
    except TimeoutError as exc:
        if not deadline.expired():  # the tool's own TimeoutError, e.g. from a network call
            raise _Failure(_raised(t, exc), retry=True) from exc
        # A cancelled async tool has stopped. A sync tool's abandoned thread may still be running: a
        # retry would run a second copy beside it, so a sync tool is not retried after a timeout.
        raise _Failure(f"tool {t.name} timed out after {timeout_s:g}s", retry=t.is_async) from exc
    except _Raised as exc:
        if isinstance(exc.original, Retry):
            raise _Failure(retry_error(t.name, exc.original.message), retry=False, asked=True) from exc.original
        if isinstance(exc.original, ToolReportedError):
            raise _Failure(f"tool {t.name} reported an error: {exc.original}", retry=False) from exc.original
        raise _Failure(_raised(t, exc.original), retry=True) from exc.original
    except Retry as exc:
        raise _Failure(retry_error(t.name, exc.message), retry=False, asked=True) from exc
    except ToolReportedError as exc:
        raise _Failure(f"tool {t.name} reported an error: {exc}", retry=False) from exc
    except Exception as exc:
        raise _Failure(_raised(t, exc), retry=True) from exc
    try:
        return serialize_result(value)
    except Exception as exc:
        raise _Failure(
            f"tool {t.name} returned a {type(value).__name__}, which is not JSON ({exc})", retry=False
        ) from exc


def _raised(t: Tool, exc: BaseException) -> str:
    detail = str(exc)
    return f"tool {t.name} raised {type(exc).__name__}" + (f": {detail}" if detail else "")


def _in_thread(t: Tool, kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a sync tool on a worker thread (see ``_workers``). On timeout or cancellation the future
    is dropped and the thread's eventual result is discarded; whatever the tool raises comes back
    wrapped in :class:`_Raised`."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(_Raised(error))

    def work() -> Callable[[], None]:
        value: Any = None
        error: BaseException | None = None
        try:
            value = ctx.run(t.call, kwargs)
        except BaseException as exc:  # everything a tool raises is its failure
            error = exc

        def deliver() -> None:
            # A closed loop means nobody waits for this result any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, value, error)

        return deliver  # run once the worker is idle again, so the next call can reuse it

    WORKERS.submit(work, name=f"geppetto-tool-{t.name}")
    return future
