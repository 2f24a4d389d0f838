"""Fixtures for the server and event-bus tests: the buses (Redis and NATS skipped, with the reason, when
their server does not answer on loopback) and PostgreSQL schemas from the store tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from server_support import bus_url

from geppetto.events.bus import EventBus, open_bus

pytest.importorskip("starlette")


@pytest.fixture(params=["memory", "redis", "nats"])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[EventBus]:
    bus = open_bus(bus_url(request.param))
    yield bus
    await bus.close()


@pytest.fixture
def topic() -> str:
    return f"test-{uuid.uuid4().hex}"
