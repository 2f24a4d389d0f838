"""Tools from MCP servers, beside Python tools in one :class:`~geppetto.tools.ToolRegistry`.

Needs the ``mcp`` extra (``pip install 'geppetto[mcp]'``), which brings the official ``mcp`` SDK::

    async with McpServers(["python -m mcp_server_time", "http://127.0.0.1:8000/mcp"]) as servers:
        registry = servers.registry.merge(ToolRegistry([my_function]))
        turn = await Session(engine, tools=registry).run("What time is it in Tokyo?")

A server is a command line (started over stdio, stopped when the block ends) or a streamable-HTTP URL.
Its tools are listed once (every page) and cached; a ``notifications/tools/list_changed`` from the server
refreshes them. Calls go through the same executor as Python tools: the same timeouts, parallelism,
events and errors as data. A result's text parts become the tool result; ``structuredContent`` is used
when there is no text; images and audio become a line naming their type and size; an ``isError`` result
reaches the model as the tool's error. A server that died is an error naming it and the end of its stderr.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import IO, Any

from .._exceptions import ConfigurationError, GeppettoError
from .._extras import install_hint
from ._config import MCP_SERVER_KEYS
from ._registry import ToolRegistry
from ._tool import Tool, ToolDefinition, ToolReportedError

try:
    import mcp.types as mcp_types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
except ImportError as _missing:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"geppetto.tools.mcp needs the 'mcp' extra ({_missing.name} is not installed): {install_hint('mcp')}",
        name=_missing.name,
    ) from None

__all__ = ["McpError", "McpServer", "McpServers", "McpTool", "ToolReportedError"]

log = logging.getLogger("geppetto.tools.mcp")


class McpError(GeppettoError):
    """An MCP server could not be started, listed or reached."""


class McpServer:
    """One MCP server: a command line run over stdio, or a streamable-HTTP ``url``.

    ``command`` is a list of arguments or a string split like a shell would (``"uvx mcp-server-time"``);
    ``env`` adds variables for it; ``prefix`` goes in front of its tool names (to tell two servers' tools
    apart). Enter it (``async with``) to start and initialize it; leaving stops it.
    """

    def __init__(
        self,
        command: str | Sequence[str] | None = None,
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefix: str = "",
        name: str | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ConfigurationError("an MCP server needs either a command line or a url (not both)")
        self.argv = shlex.split(command) if isinstance(command, str) else list(command or [])
        if command is not None and not self.argv:
            raise ConfigurationError("the MCP server's command line is empty; give the program to run")
        self.url = url
        self.env = dict(env or {})
        self.cwd = cwd
        self.headers = dict(headers or {})
        self.prefix = prefix
        self.name = name or (url if url else " ".join(self.argv))
        self._stack: contextlib.AsyncExitStack | None = None
        self._session: ClientSession | None = None
        self._stderr: IO[str] | None = None
        self._tools: list[Any] | None = None
        self.on_tools_changed: Any = None
        """Called (no arguments) when the server says its tool list changed; :class:`McpServers` sets it."""

    @classmethod
    def from_spec(cls, spec: str | Mapping[str, Any]) -> McpServer:
        """A server from a command-line or profile entry: a URL (``http://``/``https://``), a command line,
        or a mapping with ``command`` (string or list), ``url``, ``env``, ``cwd``, ``headers``, ``prefix``, ``name``."""
        if isinstance(spec, str):
            if spec.startswith(("http://", "https://")):
                return cls(url=spec)
            return cls(spec)
        unknown = sorted(set(spec) - set(MCP_SERVER_KEYS))
        if unknown:
            raise ConfigurationError(
                f"unknown key(s) {', '.join(unknown)} in an MCP server entry; use {', '.join(MCP_SERVER_KEYS)}"
            )
        return cls(
            spec.get("command"),
            url=spec.get("url"),
            env=spec.get("env"),
            cwd=spec.get("cwd"),
            headers=spec.get("headers"),
            prefix=str(spec.get("prefix") or ""),
            name=spec.get("name"),
        )

    def __repr__(self) -> str:
        return f"McpServer({self.name!r})"

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> McpServer:
        stack = contextlib.AsyncExitStack()
        try:
            if self.url is not None:
                read, write = await stack.enter_async_context(streamable_http_client(self.url))
            else:
                self._stderr = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))  # noqa: SIM115
                params = StdioServerParameters(
                    command=self.argv[0], args=self.argv[1:], env=self.env or None, cwd=self.cwd
                )
                read, write = await stack.enter_async_context(stdio_client(params, errlog=self._stderr))
            session = await stack.enter_async_context(ClientSession(read, write, message_handler=self._on_message))
            await session.initialize()
        except BaseException as exc:
            await stack.aclose()
            if isinstance(exc, Exception):
                raise McpError(
                    f"MCP server {self.name!r} did not start: {_describe(exc)}{self._stderr_tail()}"
                ) from exc
            raise
        self._stack, self._session = stack, session
        return self

    async def __aexit__(self, *exc: object) -> None:
        stack, self._stack, self._session = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools = None
            if self.on_tools_changed is not None:
                self.on_tools_changed()

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            lines = [line for line in self._stderr.read().splitlines() if line.strip()][-5:]
        except (OSError, ValueError):
            return ""
        return ("; its stderr ended with:\n  " + "\n  ".join(lines)) if lines else ""

    def _live(self) -> ClientSession:
        if self._session is None:
            raise McpError(f"MCP server {self.name!r} is not running; use it inside `async with`")
        return self._session

    # -- tools ----------------------------------------------------------------------------------------
    async def list_tools(self) -> list[Any]:
        """The server's tools (every page), cached until the server says they changed."""
        if self._tools is not None:
            return self._tools
        session = self._live()
        tools: list[Any] = []
        cursor: str | None = None
        try:
            while True:
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            raise McpError(f"MCP server {self.name!r} could not list its tools: {_describe(exc)}") from exc
        self._tools = tools
        return tools

    async def tools(self) -> list[McpTool]:
        """The server's tools as geppetto tools (named with :attr:`prefix`)."""
        return [McpTool(self, t) for t in await self.list_tools()]

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call tool ``name``; its result as the text the model reads. :class:`ToolReportedError` for an
        ``isError`` result, :class:`McpError` when the server is gone."""
        session = self._live()
        try:
            result = await session.call_tool(name, arguments)
        except Exception as exc:
            raise McpError(f"MCP server {self.name!r} failed on {name}: {_describe(exc)}{self._stderr_tail()}") from exc
        text = result_text(result)
        if result.is_error:
            raise ToolReportedError(text or f"{name} failed (the MCP server gave no detail)")
        return text


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def result_text(result: Any) -> str:
    """An MCP tool result as one text: its text parts; ``structuredContent`` as JSON when it has none;
    an image, audio or resource as a line naming it (the model cannot see the bytes in a tool result)."""
    parts: list[str] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            size = len(base64.b64decode(item.data, validate=False)) if item.data else 0
            parts.append(f"[{kind}: {item.mime_type}, {size:,} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource: {item.uri}]")
        elif kind == "resource":
            inner = item.resource
            parts.append(getattr(inner, "text", None) or f"[resource: {inner.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def is_destructive(spec: Any) -> bool:
    """Whether an MCP tool's annotations mark it destructive: it has annotations, ``readOnlyHint`` is not
    true and ``destructiveHint`` is not false (the protocol's default for it is true). A tool without
    annotations says nothing and is not asked about; ``McpTool.requires_approval`` can be set either way."""
    notes = getattr(spec, "annotations", None)
    if notes is None:
        return False
    read_only = getattr(notes, "read_only_hint", getattr(notes, "readOnlyHint", None))
    destructive = getattr(notes, "destructive_hint", getattr(notes, "destructiveHint", None))
    return read_only is not True and destructive is not False


class McpTool(Tool):
    """A tool of an MCP server, callable like any :class:`~geppetto.tools.Tool` by the executor.

    Its definition is the server's (name with the server's prefix, description, input schema); arguments
    go to the server as the model sent them (the server validates them). A tool whose annotations mark it
    destructive (see :func:`is_destructive`) requires approval by default."""

    def __init__(self, server: McpServer, spec: Any) -> None:
        # Not Tool.__init__: there is no Python function to inspect; the server describes the tool.
        self.server = server
        self.remote_name = str(spec.name)
        self.name = f"{server.prefix}{spec.name}"
        self.fn = self.__call__
        self.is_async = True
        self.retryable = False
        self.max_retries = 0
        self.backoff_s = 0.0
        self.timeout_s = None
        self.requires_approval = is_destructive(spec)
        self.client_side = False
        self._positional = ()
        schema = dict(spec.input_schema or {"type": "object", "properties": {}})
        schema.pop("title", None)
        self.definition = ToolDefinition(name=self.name, description=spec.description or "", parameters=schema)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r} of {self.server.name!r})"

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        return args

    def call(self, arguments: dict[str, Any]) -> Any:
        return self.server.call(self.remote_name, arguments)


class McpServers:
    """Several MCP servers started and stopped together, their tools in one :attr:`registry`.

    ``async with McpServers(["python -m mcp_server_time", "http://host/mcp"]) as servers:`` starts every
    server (a spec is what :meth:`McpServer.from_spec` takes, or an :class:`McpServer`) and fills
    ``servers.registry``. Two servers offering the same tool name is a :class:`~geppetto.ConfigurationError`
    naming both unless one has a ``prefix``. When a server's tool list changes, the registry follows."""

    def __init__(
        self, servers: Sequence[str | Mapping[str, Any] | McpServer], *, registry: ToolRegistry | None = None
    ) -> None:
        self.servers = [s if isinstance(s, McpServer) else McpServer.from_spec(s) for s in servers]
        self.registry = registry if registry is not None else ToolRegistry()
        """The registry the servers' tools are in: ``registry`` when given (its other tools stay), else a new one."""
        self._mine: set[str] = set()
        self._stack: contextlib.AsyncExitStack | None = None
        self._refreshing: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> McpServers:
        stack = contextlib.AsyncExitStack()
        try:
            for server in self.servers:
                await stack.enter_async_context(server)
                server.on_tools_changed = self._changed
            await self.refresh()
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._refreshing):
            task.cancel()
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    def _changed(self) -> None:
        task = asyncio.get_running_loop().create_task(self.refresh())
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def refresh(self) -> None:
        """List every server's tools again (from cache where unchanged) and rebuild :attr:`registry` in place."""
        owners: dict[str, McpServer] = {}
        tools: list[McpTool] = []
        for server in self.servers:
            for t in await server.tools():
                if t.name in owners:
                    raise ConfigurationError(
                        f"MCP servers {owners[t.name].name!r} and {server.name!r} both offer a tool named {t.name!r}; "
                        "give one of them a prefix (McpServer(..., prefix='time_'), or `prefix:` in a profile entry)"
                    )
                if t.name in self.registry and t.name not in self._mine:
                    raise ConfigurationError(
                        f"MCP server {server.name!r} offers a tool named {t.name!r}, like a tool already registered; "
                        "give the server a prefix (McpServer(..., prefix='mcp_'), or `prefix:` in a profile entry)"
                    )
                owners[t.name] = server
                tools.append(t)
        for name in self._mine:
            if name in self.registry:
                self.registry.remove(name)
        for t in tools:
            self.registry.add(t)
        self._mine = {t.name for t in tools}


def _main() -> None:  # pragma: no cover - a manual check: python -m geppetto.tools.mcp COMMAND...
    async def show() -> None:
        async with McpServers([" ".join(sys.argv[1:])]) as servers:
            for d in servers.registry.list():
                print(f"{d.name}: {d.description}")

    asyncio.run(show())


if __name__ == "__main__":  # pragma: no cover
    _main()
