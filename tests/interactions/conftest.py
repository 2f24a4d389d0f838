"""Every request body an Interactions test builds is validated against the google-genai types, strictly
(``tests/interactions_types.py``), whether it reaches the simulator or an ``httpx.MockTransport``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from geppetto.providers.gemini import InteractionPlan, InteractionsEngine
from geppetto.turns import Turn
from interactions_types import validate_request


@pytest.fixture(autouse=True)
def _bodies_follow_the_types(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    checked: list[dict[str, Any]] = []
    build_body = InteractionsEngine.build_body

    def checked_build_body(self: InteractionsEngine, turn: Turn, plan: InteractionPlan) -> dict[str, Any]:
        body = build_body(self, turn, plan)
        validate_request(body)
        checked.append(body)
        return body

    monkeypatch.setattr(InteractionsEngine, "build_body", checked_build_body)
    yield checked
