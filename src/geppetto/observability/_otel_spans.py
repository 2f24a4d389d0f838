"""The spans :class:`~._otel.Instrumentation` keeps open: a session inference's ``invoke_agent`` span and a
provider call's ``chat`` span, and the attributes read from a request URL and a turn."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry.trace import Status, StatusCode

from ..turns import BlockKind, Turn

__all__ = ["Call", "RunSpan", "messages_attribute", "server_attributes"]


class RunSpan:
    """The ``invoke_agent`` span of one session inference, current while it runs (a plain context manager:
    a generator-based one costs several more calls a run)."""

    __slots__ = ("context", "span", "token")

    def __init__(self, span: Any, context: Any) -> None:
        self.span = span
        self.context = context
        self.token: Any = None

    def __enter__(self) -> None:
        self.token = otel_context.attach(self.context)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        span = self.span
        if exc is not None:
            span.set_attributes({"error.type": type(exc).__name__})
            span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
        otel_context.detach(self.token)  # logs, never raises, if the run ended in another context
        span.end()


class Call:
    """A provider call in flight: its span, when it started, what its request said, and the context
    tokens that made the span current."""

    __slots__ = ("mine", "request", "span", "started", "token")

    def __init__(self, span: Any, started: float) -> None:
        self.span = span
        self.started = started
        self.request: dict[str, Any] | None = None
        self.token: Any = None
        self.mine: Any = None


def server_attributes(url: str) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of a request URL."""
    parts = urlsplit(url)
    out: dict[str, Any] = {"server.address": parts.hostname or ""}
    if parts.port:
        out["server.port"] = parts.port
    return out


def messages_attribute(turn: Turn) -> str:
    """The turn's messages in the conventions' shape (role and text parts), as JSON."""
    out = []
    for block in turn.blocks:
        if block.kind in (BlockKind.SYSTEM, BlockKind.USER, BlockKind.LLM_TEXT) and block.text:
            out.append({"role": block.role, "parts": [{"type": "text", "content": block.text}]})
    return json.dumps(out)
