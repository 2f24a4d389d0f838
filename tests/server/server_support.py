"""What the server and bus tests share: broker URLs and skips when a broker is absent."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

REDIS_URL = os.environ.get("GEPPETTO_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
NATS_URL = os.environ.get("GEPPETTO_TEST_NATS_URL", "nats://127.0.0.1:4222")
BUS_URLS = {"memory": "memory://", "redis": REDIS_URL, "nats": NATS_URL}


def reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 0), timeout=2):
            return True
    except OSError:
        return False


def bus_url(kind: str) -> str:
    """The URL of a ``kind`` bus, or a skip naming the server to start when it does not answer."""
    url = BUS_URLS[kind]
    if kind != "memory" and not reachable(url):
        variable = f"GEPPETTO_TEST_{kind.upper()}_URL"
        pytest.skip(f"{kind} is not reachable at {url}; start it (see docs/server.md) or set {variable}")
    return url


def sse_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Server-Sent Events from a response's lines: dicts with ``id``, ``event`` and ``data`` (decoded JSON
    when it is JSON); comments are skipped."""
    event: dict[str, Any] = {}
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                text = "\n".join(data)
                try:
                    event["data"] = json.loads(text)
                except ValueError:
                    event["data"] = text
                yield event
            event, data = {}, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            else:
                event[name] = value


@contextlib.contextmanager
def running_app(app: Any) -> Iterator[str]:
    """``app`` served on a free loopback port (its lifespan run); yields the base URL."""
    from geppetto._asgi import ThreadedServer

    server = ThreadedServer(app, lifespan="on", name="geppetto-serve-test")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def sim_profile(sim: Any, provider: str = "openai-responses", **settings: Any) -> Any:
    from geppetto.profiles import Profile

    base = sim.openai_url if provider.startswith("openai") else sim.url
    return Profile(name="test", provider=provider, model="sim-1", base_url=base, simulator=True, **settings)
