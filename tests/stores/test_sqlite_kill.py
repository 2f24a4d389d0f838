"""A writer SIGKILLed mid-run loses nothing it had reported saved, and the file still opens."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from geppetto.session.stores import SQLiteTurnStore
from geppetto.turns import Block, Turn

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from geppetto.session.stores import SQLiteTurnStore
    from geppetto.turns import Block, Turn

    async def main():
        store = SQLiteTurnStore(sys.argv[1])
        i = 0
        while True:
            t = Turn(id=f"t{i}")
            t.append(Block.user(f"n{i}"))
            t.blocks[0].id = f"b{i}"
            await store.save_snapshot("s", t)
            print(i, flush=True)
            i += 1

    asyncio.run(main())
    """
)


def expected(i: int) -> Turn:
    t = Turn(id=f"t{i}")
    t.append(Block.user(f"n{i}"))
    t.blocks[0].id = f"b{i}"
    return t


def test_sigkill_loses_nothing_completed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    done = -1
    try:
        while done < 20:
            line = proc.stdout.readline()
            assert line, "writer exited early"
            done = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    saved = asyncio.run(SQLiteTurnStore(path).load_session("s"))
    assert len(saved) >= done + 1
    assert saved == [expected(i) for i in range(len(saved))]
