"""Fixtures of the fault suite: the streams recorded once per provider and the misbehaving server (see
``faultserver.py``, which also maps the fault matrix's cells to their tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faultserver import MisbehavingServer, Script, record_streams


@pytest.fixture(scope="session")
def recorded_streams() -> dict[str, bytes]:
    return record_streams()


@pytest.fixture(scope="module")
def misbehaving_server() -> Iterator[MisbehavingServer]:
    server = MisbehavingServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bad_server(misbehaving_server: MisbehavingServer) -> Iterator[MisbehavingServer]:
    misbehaving_server.script = Script()
    misbehaving_server.paths.clear()
    yield misbehaving_server
