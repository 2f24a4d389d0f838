"""An ASGI app served by uvicorn in a background thread on loopback (the simulator, ``geppetto serve`` in
tests and embedding programs). Needs uvicorn (extras ``sim`` and ``server``)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Literal

import uvicorn

__all__ = ["ThreadedServer"]


class ThreadedServer:
    """Serve ``app`` in a daemon thread: :meth:`start` returns once the port accepts connections and sets
    ``url``; :meth:`stop` asks uvicorn to exit and joins the thread."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        lifespan: Literal["auto", "on", "off"] = "off",
        name: str = "geppetto-asgi",
    ) -> None:
        self.app, self.host, self.port, self.lifespan, self.name = app, host, port, lifespan, name
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this: without it Nagle + delayed ACKs add ~40 ms per request on loopback.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.host, self.port))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan=self.lifespan,
            loop="asyncio",
            http="h11",
            backlog=2048,
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True, name=self.name)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} server did not start; see the log above for the cause")
            time.sleep(0.005)
        self.url = f"http://{self.host}:{port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
