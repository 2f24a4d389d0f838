"""Pytest plugin: the `geppetto_sim` fixture gives a test a running simulator with fresh state.

Enable it with `pytest_plugins = ["geppetto.simulator.pytest_plugin"]` in a conftest.py. One server runs
per test session; each test gets it reset (no stored responses, conversations, queued replies or faults,
recorded requests, compat mode off, no quirks). Mark a test `@pytest.mark.geppetto_sim_quirks("no-echo",
"no-usage")` to run it against a simulator with those quirks (docs/simulator.md, "Quirks").
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._server import Simulator, serve

_MARK = "geppetto_sim_quirks"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{_MARK}(*names): run the geppetto_sim fixture with these simulator quirks")


@pytest.fixture(scope="session")
def geppetto_sim_server() -> Iterator[Simulator]:
    """The session's simulator server (prefer `geppetto_sim`, which also resets it)."""
    with serve() as sim:
        yield sim


@pytest.fixture
def geppetto_sim(geppetto_sim_server: Simulator, request: pytest.FixtureRequest) -> Iterator[Simulator]:
    """A running simulator with all state reset for this test (and the quirks its marker names)."""
    geppetto_sim_server.reset()
    mark = request.node.get_closest_marker(_MARK)
    if mark is not None:
        geppetto_sim_server.quirks = list(mark.args)
    yield geppetto_sim_server
    geppetto_sim_server.reset()
