"""What the server and bus tests share: broker URLs and skips when a broker is absent."""

from __future__ import annotations

import os
import socket
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
