"""Gemini parts geppetto does not model as its own kinds, kept and replayed exactly as they came.

Code execution (``executableCode`` / ``codeExecutionResult``), server-side tool calls and responses
(``toolCall`` / ``toolResponse``: Google Search, URL context, file search), generated images and files
(``inlineData`` / ``fileData``), a bare ``thoughtSignature`` part and any part kind Gemini adds later
become ``other`` blocks holding the part, its own ``thoughtSignature`` on it (Google refuses a signature
moved to another part). Built-in tool ones are typed under ``payload["builtin"]``. The candidate's
``groundingMetadata`` / ``citationMetadata`` / ``urlContextMetadata`` become the ``citations`` of the
response's last text block, its ``logprobsResult`` / ``avgLogprobs`` that block's ``logprobs``.
"""

from __future__ import annotations

from typing import Any

from ...turns import BLOCK_META_PROVIDER, PAYLOAD_ITEM, Block, BlockKind, BuiltinTool, raw_block

__all__ = ["CITATION_FIELDS", "LOGPROB_FIELDS", "PROVIDER", "builtin_of_part", "kept_part", "replay_part"]

PROVIDER = "gemini"

CITATION_FIELDS = ("groundingMetadata", "citationMetadata", "urlContextMetadata")
LOGPROB_FIELDS = ("logprobsResult", "avgLogprobs")

_TOOL_TYPES = {
    "GOOGLE_SEARCH_WEB": "web_search",
    "GOOGLE_SEARCH": "web_search",
    "URL_CONTEXT": "web_fetch",
    "FILE_SEARCH": "file_search",
    "CODE_EXECUTION": "code_execution",
    "GOOGLE_MAPS": "maps",
}


def _server_tool(value: dict[str, Any], phase: str) -> BuiltinTool:
    kind = str(value.get("toolType") or "")
    info = BuiltinTool(tool=_TOOL_TYPES.get(kind, kind.lower()), phase="call" if phase == "call" else "result")
    info["call_id"] = str(value.get("id") or "")
    info["name"] = kind
    if phase == "call":
        info["input"] = value.get("args")
    else:
        info["output"] = value.get("response")
    return info


def builtin_of_part(part: dict[str, Any]) -> BuiltinTool | None:
    """The built-in tool call or result a Gemini part is, else None."""
    if isinstance(part.get("executableCode"), dict):
        code = part["executableCode"]
        return BuiltinTool(
            tool="code_execution", phase="call", call_id=str(code.get("id") or ""), input=code.get("code")
        )
    if isinstance(part.get("codeExecutionResult"), dict):
        result = part["codeExecutionResult"]
        info = BuiltinTool(
            tool="code_execution", phase="result", call_id=str(result.get("id") or ""), output=result.get("output")
        )
        if result.get("outcome") not in (None, "OUTCOME_OK"):
            info["error"] = True
        return info
    if isinstance(part.get("toolCall"), dict):
        return _server_tool(part["toolCall"], "call")
    if isinstance(part.get("toolResponse"), dict):
        return _server_tool(part["toolResponse"], "result")
    data = part.get("inlineData")
    if isinstance(data, dict) and str(data.get("mimeType") or "").startswith("image/"):
        return BuiltinTool(tool="image_generation", phase="result", call_id="")
    return None


def kept_part(part: dict[str, Any]) -> Block:
    """An ``other`` block holding the part ``part`` exactly."""
    return raw_block(part, builtin_of_part(part))


def replay_part(block: Block) -> dict[str, Any] | None:
    """The part an ``other`` block Gemini produced goes back as; None for anything else."""
    item = block.payload.get(PAYLOAD_ITEM)
    if block.kind is not BlockKind.OTHER or BLOCK_META_PROVIDER.get(block.metadata) != PROVIDER:
        return None
    return item if isinstance(item, dict) and item else None
