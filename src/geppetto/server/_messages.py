"""What the front-end protocols share about a request's messages: the prompt is the last user message, and
the messages before it are a history for a session the store does not know yet; a prompt's files are checked
before anything starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._exceptions import UsageError
from ..turns import Block, Turn, file_refs

__all__ = ["prompt_files", "split_messages"]

_BLOCKS = {"system": Block.system, "user": Block.user, "assistant": Block.llm_text}


def split_messages(messages: Sequence[tuple[str, str]], *, no_user: str, empty: str) -> tuple[str, Turn | None]:
    """The prompt (the last ``user`` message's text, stripped) and the earlier ``system``, ``user`` and
    ``assistant`` messages with text as a turn (None when there are none), from ``(role, text)`` pairs.
    ValueError ``no_user`` when there is no user message, ``empty`` when its text is blank."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i][0] == "user"), None)
    if last is None:
        raise ValueError(no_user)
    prompt = messages[last][1].strip()
    if not prompt:
        raise ValueError(empty)
    blocks = [_BLOCKS[role](text) for role, text in messages[:last] if text and role in _BLOCKS]
    return prompt, (Turn(blocks=blocks) if blocks else None)


def prompt_files(files: Any) -> list[dict[str, Any]] | None:
    """A prompt's attachments, checked before anything starts: dicts with a ``media_type`` and one of
    ``data`` (base64), ``url`` or ``file_id``, never a path (the server reads no file of its own).
    ValueError names what is wrong."""
    if files is None:
        return None
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise ValueError(
            'files is a list of {"media_type": ..., one of "data" (base64), "url" or "file_id", "filename": ...}'
        )
    try:
        file_refs(Block.user("", files=files))
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    return files
