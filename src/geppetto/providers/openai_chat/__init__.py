"""OpenAI Chat Completions, and every compatible server (Ollama, vLLM, LM Studio, OpenRouter) via ``base_url``.

``ChatEngine`` is the endpoint; ``build_messages`` / ``build_request`` and ``ChatStreamReducer`` are the
dialect, usable on their own (e.g. to inspect what would be sent).
"""

from ._dialect import PROVIDER, build_messages, build_request
from ._engine import DEFAULT_BASE_URL, ChatEngine
from ._stream import ChatStreamReducer, chat_stop_reason, chat_usage

__all__ = [
    "DEFAULT_BASE_URL",
    "PROVIDER",
    "ChatEngine",
    "ChatStreamReducer",
    "build_messages",
    "build_request",
    "chat_stop_reason",
    "chat_usage",
]
