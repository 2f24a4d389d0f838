"""A small misbehaving HTTP server on loopback that replays each provider's real stream (recorded once from
the bundled simulator) as a script tells it to: whole, a few bytes at a time, cut after N bytes, stalled, with
a huge event first, or after error statuses. It speaks plain HTTP/1.1 over asyncio streams in a thread of
its own, so the engines meet it on a real socket.

Where the cells of the fault matrix live (all on real loopback sockets):
- dripped, cut mid-body at 10/50/90 %, stalled after the first event, one huge event under and over the
  bound, 429/503 with ``retry-after: 0`` then served, 500s past the retries: ``test_faults_socket.py``
- cut inside the headers, not one byte, headers then silence, a clean end halfway, a malformed event, a JSON
  200, a valid stream under another content type, 429s past the retries, an error body that breaks off:
  ``test_faults_socket_broken.py``
- hostile JSON (events and tool arguments nested 10,000 deep), one event past the size bound, a stall past
  the read timeout, NaN in tool results: ``tests/engines/test_engines_hostile_input.py``
- cancelling a running inference every way asyncio can: ``tests/session/test_session_cancel.py``
- retries with ``retry-after``, malformed events, mid-stream errors on the simulator:
  ``tests/engines/test_engines_simulator.py`` and ``tests/simulator/test_sim_fault_streams.py``
- expired chains, 200 concurrent sessions: ``tests/faults/test_faults_sim.py`` (and the Responses fallbacks in
  ``tests/responses/test_engine_sim.py``)
- SIGKILL mid-chat on SQLite and PostgreSQL, nothing lost: ``tests/stores/test_store_processes.py``
- no key leaks anywhere: ``tests/cli/test_secrets.py``
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx

import geppetto as gp
from geppetto.profiles import ENGINE_CLASSES
from geppetto.providers._retry import RetryPolicy
from geppetto.simulator import Reply, serve

PROVIDERS = ["openai-responses", "openai-chat", "anthropic", "gemini"]
ANSWER = "All good on this side."

_REQUESTS = {
    "openai-responses": ("/v1/responses", {"model": "sim-1", "input": "Hi", "stream": True}),
    "openai-chat": (
        "/v1/chat/completions",
        {"model": "sim-1", "messages": [{"role": "user", "content": "Hi"}], "stream": True},
    ),
    "anthropic": (
        "/v1/messages",
        {"model": "sim-1", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}], "stream": True},
    ),
    "gemini": (
        "/v1beta/models/sim-1:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]},
    ),
}
_KEYS = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sk-sim"}


def record_streams() -> dict[str, bytes]:
    """Each provider's streamed answer of ``ANSWER``, byte for byte as the simulator sent it."""
    streams: dict[str, bytes] = {}
    with serve() as sim:
        for provider, (path, body) in _REQUESTS.items():
            sim.queue(Reply(text=ANSWER))
            response = httpx.post(sim.url + path, json=body, headers={**_KEYS, "anthropic-version": "2023-06-01"})
            response.raise_for_status()
            streams[provider] = response.content
    return streams


@dataclass
class Script:
    """How the server answers, request by request: ``statuses`` first (one per request, with ``retry-after:
    0``), then the stream with the ``mode`` given: "whole", "drip" (7 bytes at a time), "drop" (cut after
    ``drop_after`` body bytes), "drop_head" (cut inside the status line's headers), "silent" (not one byte),
    "stall_head" (after the headers), "stall" (after the first event), "huge" (one long event first), "truncate" (the first half of the
    events, then a clean end), "malformed" (an event of broken JSON after the first), "json" (a
    non-SSE JSON document). ``content_type`` is what the 200 says it carries; ``cut_errors`` cuts each error
    status's body halfway."""

    mode: str = "whole"
    statuses: list[int] = field(default_factory=list)
    drop_after: int = 0
    huge_bytes: int = 0
    body: bytes = b""
    content_type: str = "text/event-stream"
    cut_errors: bool = False


class MisbehavingServer:
    """The server; ``script`` is what the next requests get, ``paths`` every request line it received."""

    def __init__(self) -> None:
        self.script = Script()
        self.paths: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def url(self, provider: str) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if provider.startswith("openai") else root

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the misbehaving server did not start")

    def stop(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(30)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopping.wait()
            server.close()
            for task in list(self._handlers):  # a stalled answer would otherwise outlive the loop
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            self.paths.append(head.split(b" ", 2)[1].decode())
            await self._answer(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    async def _answer(self, writer: asyncio.StreamWriter) -> None:
        script = self.script
        if script.statuses:
            status = script.statuses.pop(0)
            body = b'{"error": {"message": "try again", "type": "server_error"}}'
            writer.write(
                f"HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\nretry-after: 0\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body[: len(body) // 2 if script.cut_errors else len(body)]
            )
            await writer.drain()
            if script.cut_errors:
                writer.transport.abort()  # the error's body breaks off halfway
            return
        if script.mode == "silent":
            await asyncio.sleep(30)  # ended sooner by the client's read timeout
            return
        if script.mode == "drop_head":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-ty")
            await writer.drain()
            writer.transport.abort()
            return
        body = script.body
        if script.mode == "json":
            body = b'{"id": "resp_1", "object": "response", "status": "completed"}'
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: {script.content_type}\r\nconnection: close\r\n\r\n".encode())
        if script.mode == "stall_head":
            await writer.drain()
            await asyncio.sleep(30)  # ended sooner by the client's read timeout
            return
        if script.mode == "truncate":
            body = body[: body.rindex(b"\n\n", 0, len(body) // 2) + 2]  # the first half of the events
        if script.mode == "malformed":
            first = body.index(b"\n\n") + 2
            body = body[:first] + b'data: {"type": "oops", "delta": \n\n' + body[first:]
        if script.mode == "huge":
            body = b": " + b"x" * script.huge_bytes + b"\n\n" + body  # one long comment line, then the stream
        if script.mode == "drop":
            writer.write(body[: script.drop_after])
            await writer.drain()
            writer.transport.abort()  # no clean end: the peer sees the connection cut
            return
        if script.mode == "stall":
            first = body.index(b"\n\n") + 2
            writer.write(body[:first])
            await writer.drain()
            await asyncio.sleep(30)  # ended sooner by the client's read timeout
            return
        if script.mode == "drip":
            for i in range(0, len(body), 7):
                writer.write(body[i : i + 7])
                await writer.drain()
                await asyncio.sleep(0.001)
            return
        writer.write(body)
        await writer.drain()


RETRY = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05)
TIMEOUT = httpx.Timeout(10.0, read=3.0)
LABEL = {"openai-responses": "openai", "openai-chat": "openai_chat", "anthropic": "anthropic", "gemini": "gemini"}


def engine_for(provider: str, server: MisbehavingServer, **options: Any) -> Any:
    """``provider``'s engine pointed at ``server``, with short retries and a 3 s read timeout unless told."""
    module, name = ENGINE_CLASSES[provider]
    cls = getattr(importlib.import_module(module), name)
    options.setdefault("retry", RETRY)
    options.setdefault("timeout", TIMEOUT)
    return cls(model="sim-1", api_key="sk-sim", base_url=server.url(provider), **options)


async def answers_again(session: gp.Session, server: MisbehavingServer, body: bytes) -> None:
    """The same session answers the next prompt once the server behaves."""
    server.script = Script(body=body)
    out = await session.run("Again?")
    assert out.blocks[-1].text == ANSWER
    assert out.blocks[-1].kind is gp.BlockKind.LLM_TEXT
