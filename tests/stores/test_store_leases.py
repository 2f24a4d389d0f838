"""One inference per session across processes: leases, sessions made ahead of a snapshot, inference records."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from geppetto import UsageError
from geppetto.session.stores import open_store

HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from geppetto.session.stores import open_store

    async def main():
        store = open_store(sys.argv[1])
        lease = await store.try_lock(sys.argv[2])
        print("held" if lease else "refused", flush=True)
        sys.stdin.readline()

    asyncio.run(main())
    """
)


async def test_one_lease_per_session_in_a_process(store_target: str) -> None:
    store = open_store(store_target)
    try:
        lease = await store.try_lock("s1")
        assert lease is not None
        assert await store.try_lock("s1") is None, "a second holder in the same process"
        other = await store.try_lock("s2")
        assert other is not None, "another session is independent"
        await lease.release()
        await lease.release()  # twice is harmless
        again = await store.try_lock("s1")
        assert again is not None
        await again.release()
        await other.release()
    finally:
        store.close()


async def test_a_lease_held_by_another_process_is_freed_when_it_is_killed(store_target: str) -> None:
    holder = subprocess.Popen(  # noqa: ASYNC220  (a holder process the test kills)
        [sys.executable, "-c", HOLDER, store_target, "busy"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    store = open_store(store_target)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert await store.try_lock("busy") is None, "the other process holds it"
        holder.kill()
        holder.wait(10)
        lease = await store.try_lock("busy")
        assert lease is not None, "a killed holder frees the session"
        await lease.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        store.close()


async def test_sessions_made_ahead_keep_their_settings(store_target: str) -> None:
    store = open_store(store_target)
    try:
        await store.create_session("made", {"model": "sim-2", "system": "be brief"})
        assert await store.session_settings("made") == {"model": "sim-2", "system": "be brief"}
        assert await store.session_settings("missing") is None
        with pytest.raises(UsageError, match="already exists"):
            await store.create_session("made", {})
        assert await store.list_sessions() == [], "listed only once it has a snapshot"
        [info] = await store.session_infos(include_empty=True)
        assert (info.session_id, info.snapshots) == ("made", 0)
        assert info.updated_at is not None
        await store.delete_session("made")
        assert await store.session_settings("made") is None
    finally:
        store.close()


async def test_inference_records(store_target: str) -> None:
    store = open_store(store_target)
    try:
        await store.create_session("s", {})
        await store.begin_inference("s", "i1", worker="w1", prompt="hello")
        [running] = await store.inferences("s", status="running")
        assert (running.inference_id, running.worker, running.prompt) == ("i1", "w1", "hello")
        await store.end_inference("s", "i1", "failed", "worker exited")
        await store.end_inference("s", "i1", "completed")  # only a running one changes
        [ended] = await store.inferences("s")
        assert (ended.status, ended.error) == ("failed", "worker exited")
        assert ended.ended_at is not None
        assert await store.inferences("s", status="running") == []
    finally:
        store.close()
