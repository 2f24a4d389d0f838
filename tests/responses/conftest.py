"""Every request body a Responses test builds is checked against the official OpenAPI schema.

The simulator already refuses invalid bodies, but tests that answer with ``httpx.MockTransport`` or call
``build_body`` directly never reach it: this fixture validates whatever the engine builds or sends, in
every test of this folder, before it goes out.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest

from geppetto.providers._sse import SSEEvent
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.providers.openai_responses._request import Plan
from geppetto.providers.openai_responses._send import Api
from geppetto.simulator._validate import validate
from geppetto.turns import Turn


def schema_for(path: str) -> str | None:
    """The spec's request schema for an engine request path (None for a path without a JSON body)."""
    path = path.strip("/")
    if path == "responses":
        return "CreateResponse"
    if path == "responses/compact":
        return "CompactResponseMethodPublicBody"
    if path == "responses/input_tokens":
        return "TokenCountsBody"
    if path == "conversations":
        return "CreateConversationBody"
    if path.startswith("conversations/") and path.endswith("/items"):
        return "CreateConversationItemsBody"
    return None


@pytest.fixture(autouse=True)
def _bodies_follow_the_spec(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    checked: list[tuple[str, Any]] = []
    build_body, post, stream = ResponsesEngine.build_body, Api.post, Api.stream

    def check(path: str, body: Any) -> None:
        schema = schema_for(path)
        assert schema is not None, f"no OpenAPI schema known for a body sent to {path!r}"
        validate(schema, body)  # raises SimError naming the offending field
        checked.append((schema, body))

    def checked_build_body(self: ResponsesEngine, turn: Turn, plan: Plan) -> dict[str, Any]:
        body = build_body(self, turn, plan)
        check("responses", body)
        return body

    async def checked_post(self: Api, path: str, body: Any, landed: Any = None) -> Any:
        check(path, body)
        return await post(self, path, body, landed)

    def checked_stream(self: Api, path: str, body: Any, landed: Any = None) -> AsyncGenerator[SSEEvent, None]:
        check(path, body)
        return stream(self, path, body, landed)

    monkeypatch.setattr(ResponsesEngine, "build_body", checked_build_body)
    monkeypatch.setattr(Api, "post", checked_post)
    monkeypatch.setattr(Api, "stream", checked_stream)
    yield checked
