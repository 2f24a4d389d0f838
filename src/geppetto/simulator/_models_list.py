"""The model list endpoints: OpenAI and Anthropic ``GET /v1/models`` (told apart by Anthropic's
``anthropic-version`` header, as the two share the path) and Gemini ``GET /v1beta/models`` (and
``/v1/models`` with a Gemini key). The simulator
answers any model name; these are the names it lists, each API's in its own shape."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._call import Call

__all__ = ["MODELS", "list_gemini_models", "list_models"]

MODELS: dict[str, tuple[str, ...]] = {
    "openai": ("sim-1", "sim-reasoner", "gpt-4.1", "gpt-4.1-mini", "o4-mini", "gpt-5"),
    "anthropic": ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "claude-sim"),
    "gemini": ("gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro"),
}
_CREATED = 1_735_689_600  # 2025-01-01, the same for every listed model


async def list_models(call: Call) -> ASGIApp:
    """GET /v1/models: OpenAI's list object, or Anthropic's page when the request carries its header."""
    if "anthropic-version" in call.request.headers:
        claude = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in MODELS["anthropic"]
        ]
        return JSONResponse(
            {"data": claude, "has_more": False, "first_id": claude[0]["id"], "last_id": claude[-1]["id"]}
        )
    data = [
        {"id": m, "object": "model", "created": _CREATED, "owned_by": "geppetto-simulator"} for m in MODELS["openai"]
    ]
    return JSONResponse({"object": "list", "data": data})


async def list_gemini_models(call: Call) -> ASGIApp:
    """GET /v1beta/models: Gemini's list, with the methods each model supports."""
    methods = ["generateContent", "streamGenerateContent", "countTokens"]
    models = [
        {"name": f"models/{m}", "displayName": m, "supportedGenerationMethods": methods} for m in MODELS["gemini"]
    ]
    return JSONResponse({"models": models})
