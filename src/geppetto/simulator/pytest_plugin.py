"""Pytest plugin: the `geppetto_sim` fixture gives a test a running simulator.

Enable it with `pytest_plugins = ["geppetto.simulator.pytest_plugin"]` in a conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._server import Simulator, serve


@pytest.fixture
def geppetto_sim() -> Iterator[Simulator]:
    """A simulator running on a free loopback port for the duration of one test."""
    with serve() as sim:
        yield sim
