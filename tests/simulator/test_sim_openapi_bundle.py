"""The bundled OpenAPI schemas are exactly what scripts/prune_openapi.py extracts from the reference spec."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT.parent / "shared" / "reference" / "openai-openapi.json"


def test_bundle_matches_pruned_spec() -> None:
    if not SPEC.exists():
        pytest.skip(f"reference spec not found at {SPEC}; the bundle cannot be regenerated here")
    loader = importlib.util.spec_from_file_location("prune_openapi", ROOT / "scripts" / "prune_openapi.py")
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    bundled = json.loads(resources.files("geppetto.simulator").joinpath("openapi/openai-requests.json").read_text())
    assert module.prune(json.loads(SPEC.read_text())) == bundled
    schemas = bundled["components"]["schemas"]
    assert {
        "CreateResponse",
        "CreateChatCompletionRequest",
        "CreateConversationBody",
        "UpdateConversationBody",
    } <= schemas.keys()
    assert "oneOf" not in json.dumps(bundled)


def test_license_ships_next_to_bundle() -> None:
    license_text = resources.files("geppetto.simulator").joinpath("openapi/openai-openapi.LICENSE").read_text()
    assert "MIT" in license_text or "Permission" in license_text
