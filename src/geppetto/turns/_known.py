"""The typed keys geppetto itself reads and writes.

Turn metadata (facts about one inference), turn data (settings that travel with a turn) and block
metadata (provenance stamps). Provider packages define their own keys next to their code; the
OpenAI Responses conversation state lives in :mod:`geppetto.providers.openai_responses`.
"""

from __future__ import annotations

from ._keys import block_meta_key, turn_data_key, turn_meta_key

__all__ = [
    "BLOCK_META_INFERENCE_ID",
    "BLOCK_META_MIDDLEWARE",
    "BLOCK_META_PREFIX_FINGERPRINT",
    "BLOCK_META_PROVIDER",
    "BLOCK_META_RESPONSE_ID",
    "TURN_META_INFERENCE_ID",
    "TURN_META_MODEL",
    "TURN_META_PROVIDER",
    "TURN_META_SESSION_ID",
    "TURN_META_STOP_REASON",
    "TURN_META_USAGE",
]

TURN_META_SESSION_ID = turn_meta_key("geppetto", "session_id", 1, str)
"""The session a turn belongs to."""
TURN_META_INFERENCE_ID = turn_meta_key("geppetto", "inference_id", 1, str)
"""The inference that produced this turn snapshot."""
TURN_META_PROVIDER = turn_meta_key("geppetto", "provider", 1, str)
TURN_META_MODEL = turn_meta_key("geppetto", "model", 1, str)
TURN_META_USAGE = turn_meta_key("geppetto", "usage", 1, dict)
"""Token usage of the last provider call: input_tokens, output_tokens, cached_tokens, reasoning_tokens."""
TURN_META_STOP_REASON = turn_meta_key("geppetto", "stop_reason", 1, str)
"""Why the last provider call stopped, in one vocabulary across providers (see geppetto.events)."""
PREFIX_POLICIES = ("drop", "rewrite", "error", "append")
"""What an engine does with replayed reasoning whose prefix changed (``prefix_policy=``; see
:mod:`geppetto.providers._prefix_guard`)."""

TURN_DATA_PREFIX_POLICY = turn_data_key("geppetto", "prefix_policy", 1, str)
"""``geppetto.prefix_policy@v1``: the prefix policy a middleware asked for (``system_prompt(text,
policy="append")``); it overrides the engine's ``prefix_policy`` for this Turn's requests."""

TURN_META_HISTORY_EDIT = turn_meta_key("geppetto", "history_edit", 1, dict)
"""On a snapshot a history edit made (``Session.rewind/fork/edit/remove``): ``{"op": ..., ...}`` (see
``geppetto.session._edits``)."""

BLOCK_META_INFERENCE_ID = block_meta_key("geppetto", "inference_id", 1, str)
"""The inference that created the block; reused blocks keep theirs."""
BLOCK_META_RESPONSE_ID = block_meta_key("geppetto", "response_id", 1, str)
"""The provider response that produced the block. Engine-owned: middleware never sets it."""
BLOCK_META_PREFIX_FINGERPRINT = block_meta_key("geppetto", "prefix_fingerprint", 1, str)
"""Digest of the wire form of everything the server held after the response that produced the block."""
BLOCK_META_MIDDLEWARE = block_meta_key("geppetto", "middleware", 1, str)
"""The middleware that created or last edited the block."""
BLOCK_META_PROVIDER = block_meta_key("geppetto", "provider", 1, str)
"""The provider whose engine produced the block."""
