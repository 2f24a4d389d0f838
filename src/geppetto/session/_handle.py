"""``ExecutionHandle``: one running inference of a session."""

from __future__ import annotations

import asyncio

from .._exceptions import InferenceCancelled
from ..turns import Turn

__all__ = ["ExecutionHandle"]


class ExecutionHandle:
    """One running inference. ``await wait()`` returns the output turn (or raises what the inference
    raised; :class:`~geppetto.InferenceCancelled` after :meth:`cancel`). ``running`` is true until it ends.

    The task that awaits :meth:`wait` owns the inference: cancelling that task (``task.cancel()``,
    ``asyncio.wait_for`` or ``asyncio.timeout`` running out) cancels the inference exactly as
    :meth:`cancel` does, waits for it to unwind, and then lets the caller's cancellation go on, so the
    session is idle again by the time the caller sees its ``CancelledError`` or ``TimeoutError``.
    """

    def __init__(self, task: asyncio.Task[Turn], *, inference_id: str, turn_id: str) -> None:
        self._task = task
        self.inference_id = inference_id
        self.turn_id = turn_id

    @property
    def running(self) -> bool:
        return not self._task.done()

    def cancel(self) -> bool:
        """Ask the inference to stop (a streaming request and running tools included). Returns
        ``False`` when it had already finished."""
        return self._task.cancel()

    async def wait(self) -> Turn:
        """The output turn, once the inference ends. Cancelling the caller cancels the inference."""
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if self._task.cancelled():
                raise InferenceCancelled(
                    f"inference {self.inference_id} was cancelled; the session still holds the turn it started from"
                ) from None
            await self._settle()
            raise  # the waiter was cancelled: the inference is over, the caller's cancellation goes on

    async def _settle(self) -> None:
        """Cancel the inference for a cancelled waiter and wait until it has unwound (its events recorded,
        a save that had begun finished). What it raised while unwinding is retrieved here, never left
        for the event loop to report; the caller's cancellation is the outcome."""
        self._task.add_done_callback(_retrieve)
        self._task.cancel()
        await asyncio.wait({self._task})


def _retrieve(task: asyncio.Task[Turn]) -> None:
    if not task.cancelled():
        task.exception()
