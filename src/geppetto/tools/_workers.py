"""Worker threads for sync tools: reused between calls, and never a fixed number.

A bounded pool (``ThreadPoolExecutor``) does not fit: a sync tool that hangs past its timeout is
abandoned but keeps its thread, so a few hung tools would occupy every worker and every later sync
call would wait in the queue until it timed out without having run. Here a call never waits for a
busy worker: it goes to an idle one if there is one, else a new thread starts. Reuse saves a thread
start per call in the common case; idle workers exit after ``idle_s``. All are daemon threads, so an
abandoned tool never holds up interpreter shutdown.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["WORKERS", "Workers"]

Job = Callable[[], "Callable[[], None] | None"]
"""Work for a thread. It may return a callback to run once the worker is back among the idle ones
(e.g. handing the result to the event loop), so a caller that submits again right away reuses it."""


class Workers:
    """Run jobs on daemon threads, reusing idle ones. ``submit`` never blocks.

    ``_idle`` counts waiting workers not yet promised a job: each ``submit`` that finds one takes the
    promise (under the lock) before queueing, so every queued job has a worker waiting for it. A worker
    whose wait times out takes a job queued meanwhile, if any, instead of leaving it stranded.
    """

    def __init__(self, idle_s: float = 30.0) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._idle = 0
        self.started = 0
        """Threads started so far (for tests and benchmarks)."""

    def submit(self, job: Job, name: str = "geppetto-tool") -> None:
        """Run ``job`` (which must not raise, nor the callback it returns) on an idle worker or a new
        thread; ``name`` names the thread."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._jobs.put(lambda: _named(name, job))
                return
            self.started += 1
        threading.Thread(target=self._work, args=(job,), name=name, daemon=True).start()

    def _work(self, job: Job) -> None:
        while True:
            then = job()
            with self._lock:
                self._idle += 1
            if then is not None:
                then()
            try:
                job = self._jobs.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return

    def _reset(self) -> None:
        """After ``fork`` the child has none of the parent's threads: forget them."""
        self._lock = threading.Lock()
        self._jobs = queue.SimpleQueue()
        self._idle = 0


def _named(name: str, job: Job) -> Callable[[], None] | None:
    threading.current_thread().name = name
    return job()


WORKERS = Workers()
"""The workers every sync tool call runs on."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WORKERS._reset)
