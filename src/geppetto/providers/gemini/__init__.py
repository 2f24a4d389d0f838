"""Gemini API: ``GeminiEngine`` (endpoint), ``build_request`` and ``GeminiStreamReducer`` (dialect)."""

from . import _server_tools as server_tools
from ._dialect import (
    FOREIGN_CALL_SIGNATURE,
    PROVIDER,
    build_contents,
    build_request,
    model_path,
    needs_signed_calls,
    sign_current_turn,
)
from ._engine import API_VERSION, DEFAULT_BASE_URL, GeminiEngine
from ._stream import GeminiStreamReducer, gemini_stop_reason, gemini_usage

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "FOREIGN_CALL_SIGNATURE",
    "PROVIDER",
    "GeminiEngine",
    "GeminiStreamReducer",
    "build_contents",
    "build_request",
    "gemini_stop_reason",
    "gemini_usage",
    "model_path",
    "needs_signed_calls",
    "server_tools",
    "sign_current_turn",
]
