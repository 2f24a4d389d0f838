"""Pytest plugin: the `geppetto_sim` fixture gives a test a running simulator with fresh state.

Enable it with `pytest_plugins = ["geppetto.simulator.pytest_plugin"]` in a conftest.py. One server runs
per test session; each test gets it reset (no stored responses, conversations, queued replies or faults,
recorded requests, and compat mode off).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._server import Simulator, serve


@pytest.fixture(scope="session")
def geppetto_sim_server() -> Iterator[Simulator]:
    """The session's simulator server (prefer `geppetto_sim`, which also resets it)."""
    with serve() as sim:
        yield sim


@pytest.fixture
def geppetto_sim(geppetto_sim_server: Simulator) -> Iterator[Simulator]:
    """A running simulator with all state reset for this test."""
    geppetto_sim_server.reset()
    yield geppetto_sim_server
    geppetto_sim_server.reset()
