"""Running a model's tool calls: in parallel, each under a timeout, every failure as data.

Each call becomes exactly one ``tool_use`` block, in call order. An unknown tool, arguments that are
not JSON or fail validation, an exception and a timeout all become a ``tool_use`` with ``error`` so the
model can see what went wrong and try again; only cancellation escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from .._exceptions import GeppettoError
from ..events import EventMetadata, EventToolCallStarted, EventToolResult, publish
from ..turns import PAYLOAD_ARGS, PAYLOAD_ID, PAYLOAD_NAME, Block, BlockKind, Turn
from ._registry import ToolRegistry
from ._tool import Tool, serialize_result

__all__ = ["OnError", "ToolCallError", "execute_tool_calls", "pending_tool_calls"]

OnError = Literal["continue", "retry", "raise"]


class ToolCallError(GeppettoError):
    """A tool call failed under ``on_error="raise"``. ``block`` is the failed ``tool_use``."""

    def __init__(self, message: str, *, block: Block) -> None:
        self.block = block
        super().__init__(message)


class _Failure(Exception):
    """A call that failed before or while running; ``retry`` says whether trying again may help."""

    def __init__(self, message: str, *, retry: bool) -> None:
        self.retry = retry
        super().__init__(message)


@dataclass
class _Options:
    timeout_s: float
    on_error: OnError
    metadata: EventMetadata


def pending_tool_calls(turn: Turn) -> list[Block]:
    """The ``tool_call`` blocks with no ``tool_use`` of the same payload id, in turn order."""
    answered = {str(b.payload.get(PAYLOAD_ID, "")) for b in turn.blocks if b.kind is BlockKind.TOOL_USE}
    return [
        b for b in turn.blocks if b.kind is BlockKind.TOOL_CALL and str(b.payload.get(PAYLOAD_ID, "")) not in answered
    ]


async def execute_tool_calls(
    registry: ToolRegistry,
    calls: Sequence[Block],
    *,
    timeout_s: float = 30.0,
    max_parallel: int = 4,
    on_error: OnError = "continue",
    metadata: EventMetadata | None = None,
) -> list[Block]:
    """Run ``calls`` (``tool_call`` blocks) and return one ``tool_use`` block per call, in call order.

    At most ``max_parallel`` run at once; each is bounded by ``timeout_s`` (or the tool's own
    ``timeout_s``): an async tool is cancelled, a sync tool runs in a worker thread whose result is
    abandoned. ``on_error``: ``"continue"`` (failures become error results), ``"retry"`` (every tool
    is retried like a ``retryable`` one), ``"raise"`` (once all calls have ended, raise :class:`ToolCallError` for the first failed one).
    """
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    opts = _Options(timeout_s, on_error, metadata or EventMetadata())
    gate = asyncio.Semaphore(max_parallel)

    async def one(call: Block) -> Block:
        async with gate:
            return await _execute_one(registry, call, opts)

    blocks = list(await asyncio.gather(*(one(c) for c in calls)))
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
    publish(EventToolCallStarted(opts.metadata, call_id=call_id, name=name))
    result: str | None = None
    error: str | None = None
    try:
        t = registry.get(name)
        if t is None:
            known = ", ".join(registry.names()) or "(none)"
            raise _Failure(f"unknown tool {name!r}; available tools: {known}", retry=False)
        kwargs = _arguments(t, call.payload.get(PAYLOAD_ARGS))
        result = await _with_retries(t, kwargs, opts)
    except _Failure as exc:
        error = str(exc)
    publish(EventToolResult(opts.metadata, call_id=call_id, name=name, result=result, error=error))
    # On failure the result is empty and ``error`` says why; engines show the error to the model.
    return Block.tool_use(call_id, result if error is None else "", error)


def _arguments(t: Tool, raw: Any) -> dict[str, Any]:
    if raw is None or raw == "":
        raw = {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _Failure(
                f"arguments for {t.name} are not valid JSON ({exc.msg} at char {exc.pos})", retry=False
            ) from exc
    if not isinstance(raw, dict):
        raise _Failure(f"arguments for {t.name} must be a JSON object, got {type(raw).__name__}", retry=False)
    try:
        return t.validate(raw)
    except pydantic.ValidationError as exc:
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
                    raise _Failure(f"{exc} (after {attempt + 1} attempts)", retry=False) from exc
                raise
        await asyncio.sleep(t.backoff_s * 2**attempt)
        attempt += 1


async def _run_once(t: Tool, kwargs: dict[str, Any], timeout_s: float) -> str:
    try:
        if t.is_async:
            value = await asyncio.wait_for(t.fn(**kwargs), timeout_s)
        else:
            value = await asyncio.wait_for(_in_thread(t, kwargs), timeout_s)
    except TimeoutError as exc:
        raise _Failure(f"tool {t.name} timed out after {timeout_s:g}s", retry=True) from exc
    except Exception as exc:
        raise _Failure(f"tool {t.name} raised {type(exc).__name__}: {exc}", retry=True) from exc
    try:
        return serialize_result(value)
    except Exception as exc:
        raise _Failure(
            f"tool {t.name} returned a {type(value).__name__}, which is not JSON ({exc})", retry=False
        ) from exc


def _in_thread(t: Tool, kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a sync tool in a daemon thread. On timeout or cancellation the future is dropped and the
    thread's eventual result is discarded; a daemon thread never holds up interpreter or loop shutdown,
    which the default executor would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            ok, value = True, ctx.run(t.fn, **kwargs)
        except BaseException as exc:
            ok, value = False, exc
        # A closed loop means nobody waits for this result any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, ok, value)

    threading.Thread(target=work, name=f"geppetto-tool-{t.name}", daemon=True).start()
    return future
