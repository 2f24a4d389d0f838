"""Extract the request schemas the simulator validates from OpenAI's OpenAPI spec into a compact bundle.

Usage: python scripts/prune_openapi.py [SPEC] [OUT]
Defaults: ../shared/reference/openai-openapi.json -> src/geppetto/simulator/openapi/openai-requests.json

Keeps only the component schemas reachable from the roots below, rewrites every `oneOf` to `anyOf` (the
spec's overlapping alternatives, e.g. EasyInputMessage vs InputMessage, make `oneOf` reject valid input)
and drops descriptions and examples to keep the file small. Then applies `LENIENCE`: the places where the
real service accepts what the spec marks required (found by sending recorded real requests and an independent
compliance suite to the simulator; docs/simulator.md lists them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOTS = [
    "CreateResponse",
    "CreateConversationBody",
    "UpdateConversationBody",
    "CreateChatCompletionRequest",
    "CompactResponseMethodPublicBody",
    "TokenCountsBody",
]
CONVERSATION_ITEMS_BODY = "CreateConversationItemsBody"
_DROP = frozenset({"description", "example", "examples", "x-oaiMeta", "x-oaiTypeLabel", "x-stainless-const", "title"})
PREFIX = "#/components/schemas/"
_NULLABLE_STATUS = {"anyOf": [{"enum": ["in_progress", "completed", "incomplete"], "type": "string"}, {"type": "null"}]}
LENIENCE: dict[str, dict[str, Any]] = {
    # An assistant message replayed without its type, id, status or the parts' logprobs/annotations.
    "OutputMessage": {"required": ["role", "content"]},
    "OutputTextContent": {"required": ["type", "text"]},
    # A function call replayed with `status: null`.
    "FunctionToolCall": {"properties.status": _NULLABLE_STATUS},
    # A function tool without `strict`, an image without `detail` (the service defaults them).
    "FunctionTool": {"required": ["type", "name", "parameters"]},
    "InputImageContent": {"required": ["type"]},
    # An image generation call replayed without its `status`.
    "ImageGenToolCall": {"required": ["type", "id", "result"]},
    # A hosted tool forced as `{"type": "web_search"}` (the Open Responses spec's WebSearchToolChoice).
    "ToolChoiceTypes": {
        "properties.type.enum": [
            "file_search",
            "web_search",
            "web_search_preview",
            "computer",
            "computer_use_preview",
            "computer_use",
            "web_search_preview_2025_03_11",
            "image_generation",
            "code_interpreter",
        ]
    },
    # A web search call sent back with the sources it read, an API's as well as a page's.
    "WebSearchActionSearch": {
        "properties.sources.items": {
            "anyOf": [
                {
                    "properties": {
                        "type": {"enum": ["url"], "type": "string"},
                        "url": {"format": "uri", "type": "string"},
                    },
                    "required": ["type", "url"],
                    "type": "object",
                },
                {
                    "properties": {"type": {"enum": ["api"], "type": "string"}, "name": {"type": "string"}},
                    "required": ["type"],
                    "type": "object",
                },
            ]
        }
    },
}


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(PREFIX):
            out.add(ref[len(PREFIX) :])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _clean(node: Any) -> Any:
    if isinstance(node, dict):
        cleaned = {}
        for key, value in node.items():
            if (key in _DROP and not isinstance(value, dict | list)) or key in ("x-oaiMeta", "examples", "example"):
                continue
            cleaned["anyOf" if key == "oneOf" else key] = _clean(value)
        return cleaned
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def _lenient(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    for path, value in LENIENCE.get(name, {}).items():
        *parents, last = path.split(".")
        node = schema
        for key in parents:
            node = node[key]
        node[last] = value
    return schema


def prune(spec: dict[str, Any]) -> dict[str, Any]:
    """The bundle: reachable component schemas (oneOf rewritten to anyOf) under components/schemas."""
    schemas = spec["components"]["schemas"]
    items_body = spec["paths"]["/conversations/{conversation_id}/items"]["post"]["requestBody"]["content"]
    extra = {CONVERSATION_ITEMS_BODY: items_body["application/json"]["schema"]}
    pending = list(ROOTS)
    _refs(extra, found := set())
    pending.extend(found)
    keep: dict[str, Any] = {}
    while pending:
        name = pending.pop()
        if name in keep:
            continue
        keep[name] = schemas[name]
        found = set()
        _refs(schemas[name], found)
        pending.extend(found - keep.keys())
    keep.update(extra)
    return {
        "info": {"source": "openai/openai-openapi openapi.json", "version": spec.get("info", {}).get("version")},
        "components": {"schemas": {name: _lenient(name, _clean(keep[name])) for name in sorted(keep)}},
    }


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    spec_path = Path(argv[1]) if len(argv) > 1 else root.parent / "shared" / "reference" / "openai-openapi.json"
    out_path = (
        Path(argv[2]) if len(argv) > 2 else root / "src" / "geppetto" / "simulator" / "openapi" / "openai-requests.json"
    )
    bundle = prune(json.loads(spec_path.read_text()))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(bundle, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {len(bundle['components']['schemas'])} schemas to {out_path} ({out_path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
