"""Helpers shared by the Responses tests: OpenAPI validation, context normalization, engine factory."""

from __future__ import annotations

import json
import time
from typing import Any

from geppetto.providers.openai_responses import ResponsesEngine, blocks_to_items
from geppetto.simulator import Simulator
from geppetto.simulator._validate import validate as _sim_validate
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}

SCHEMAS = {
    "/v1/responses": "CreateResponse",
    "/v1/responses/compact": "CompactResponseMethodPublicBody",
    "/v1/responses/input_tokens": "TokenCountsBody",
    "/v1/conversations": "CreateConversationBody",
}


def assert_valid_requests(sim: Simulator) -> None:
    """Every JSON body the engine sent validates against the official OpenAPI spec."""
    for req in sim.requests:
        schema = SCHEMAS.get(req.path)
        if schema is None and req.path.endswith("/items"):
            schema = "CreateConversationItemsBody"
        if schema is not None and req.body is not None:
            _sim_validate(schema, req.body)


def engine(sim: Simulator, **kw: Any) -> ResponsesEngine:
    return ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, tools=[WEATHER_TOOL], **kw)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text") or p.get("refusal") or "") for p in content or [] if isinstance(p, dict))


def normalize(items: list[Any]) -> list[tuple[Any, ...]]:
    """Items reduced to what the model reads (ids, statuses and content shapes dropped)."""
    out: list[tuple[Any, ...]] = []
    for item in items:
        kind = item.get("type") or "message"
        if kind == "message":
            out.append(("message", item.get("role"), _text(item.get("content"))))
        elif kind == "function_call":
            out.append(("function_call", item["call_id"], item["name"], json.loads(item["arguments"] or "{}")))
        elif kind == "function_call_output":
            out.append(("function_call_output", item["call_id"], item["output"]))
        elif kind in ("reasoning", "item_reference"):  # the engine references reasoning items only
            out.append(("reasoning", item.get("id")))
        else:
            out.append((kind,))
    return out


def wire_before_last_response(turn: Turn) -> tuple[str, list[tuple[Any, ...]]]:
    """The last response id and the Turn's wire form up to (not including) that response's blocks."""
    key = str(BLOCK_META_RESPONSE_ID)
    last = max(i for i, b in enumerate(turn.blocks) if b.metadata.get(key))
    rid = turn.blocks[last].metadata[key]
    first = min(i for i, b in enumerate(turn.blocks) if b.metadata.get(key) == rid)
    return rid, normalize(blocks_to_items(turn.blocks[:first]))


def forget(sim: Simulator, response_id: str, timeout: float = 5.0) -> None:
    """``sim.forget(response_id)`` once the simulator has stored it: it commits a streamed response only
    after sending the last frame, so a forget right after the engine returned could come first."""
    settle(sim, response_id, timeout)
    sim.forget(response_id)


def settle(sim: Simulator, response_id: str, timeout: float = 5.0) -> None:
    """Wait until the simulator has committed ``response_id`` (see ``forget``)."""
    deadline = time.monotonic() + timeout
    while response_id not in sim.state.responses:
        assert time.monotonic() < deadline, f"the simulator never stored {response_id}"
        time.sleep(0.001)
