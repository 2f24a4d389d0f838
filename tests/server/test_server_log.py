"""What a worker logs and counts when an inference fails (``geppetto serve`` shows it with --log-level)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from geppetto.events.bus import MemoryBus
from geppetto.server._metrics import server_metrics
from geppetto.server._runner import Runner
from geppetto.session.stores import open_store
from geppetto.testing import FunctionEngine
from geppetto.turns import Turn


async def test_a_failed_inference_is_logged_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def broken(turn: Turn) -> Turn:
        raise KeyError("no such thing")

    store, bus = open_store(tmp_path / "store.db"), MemoryBus()
    runner = Runner(store, bus, lambda settings: FunctionEngine(broken))
    before = server_metrics.snapshot().get("inferences_failed:KeyError", 0)
    try:
        await store.create_session("s1", {})
        with caplog.at_level(logging.WARNING, logger="geppetto.server"):
            started = await runner.start("s1", "Hello")
            async with asyncio.timeout(10):
                await runner._running["s1"].done.wait()
    finally:
        await runner.close()
        store.close()
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == f"inference {started.inference_id} of session s1 failed: KeyError: 'no such thing'"
    assert server_metrics.snapshot()["inferences_failed:KeyError"] == before + 1
