"""Fixtures for the simulator tests: plain httpx clients against a running simulator."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from geppetto.simulator import Simulator


@pytest.fixture
def oai(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    """An OpenAI-style client (bearer auth, base URL ending in /v1)."""
    with httpx.Client(
        base_url=geppetto_sim.openai_url, headers={"authorization": "Bearer sk-test"}, timeout=10
    ) as client:
        yield client


@pytest.fixture
def gem(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    """A Gemini-style client (API key header, the simulator's base URL)."""
    with httpx.Client(base_url=geppetto_sim.url, headers={"x-goog-api-key": "test-key"}, timeout=10) as client:
        yield client
