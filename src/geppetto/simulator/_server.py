"""Running the simulator: a uvicorn server in a background thread on a free loopback port."""

from __future__ import annotations

import copy
import importlib
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from .._asgi import ThreadedServer
from ._anthropic_diagnostics import plant
from ._app import DEFAULT_MAX_BODY, build_app
from ._faults import Fault
from ._model import Reply
from ._openai import chain_items
from ._openai_compaction import prune
from ._quirks import parse_quirks
from ._state import RecordedRequest, SimState


class Simulator:
    """A running simulator. Create it with `serve()`; every method is safe to call from the test thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        quirks: str | Iterable[str] | None = None,
    ) -> None:
        self.state = SimState()
        self.state.base_quirks = self.state.quirks = parse_quirks(quirks)
        self.app = build_app(self.state, max_body=max_body)
        self._host = host
        self._port = port
        self._server: ThreadedServer | None = None
        self.url = ""

    @property
    def openai_url(self) -> str:
        """Base URL for OpenAI clients (the root plus "/v1"); Anthropic and Gemini clients use `url`."""
        return self.url + "/v1"

    def engine(self, provider: str = "openai-responses", *, model: str = "sim-1", **options: Any) -> Any:
        """An engine of ``provider`` (``openai-responses``, ``openai-chat``, ``anthropic`` or ``gemini``, as
        the command line names them) pointed at this simulator with a test key; ``options`` go to the
        engine's constructor (``retry=``, ``timeout=``, ``http=``, ``mode=``, another ``api_key=``...).

        >>> with serve() as sim:                                   # doctest: +SKIP
        ...     async with sim.engine("anthropic") as engine: ...
        """
        from ..profiles import ENGINE_CLASSES

        if provider not in ENGINE_CLASSES:
            raise ValueError(f"unknown provider {provider!r}; use one of {', '.join(ENGINE_CLASSES)}")
        module, name = ENGINE_CLASSES[provider]
        cls = getattr(importlib.import_module(module), name)
        base_url = self.openai_url if provider.startswith("openai") else self.url
        return cls(model=model, **{"api_key": "sk-sim", "base_url": base_url, **options})

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self.state.lock:
            return list(self.state.requests)

    @property
    def compat_mode(self) -> bool:
        """When True, behave like OpenAI-compatible servers that ignore `previous_response_id` and `store`."""
        return self.state.compat_mode

    @compat_mode.setter
    def compat_mode(self, value: bool) -> None:
        self.state.compat_mode = value

    @property
    def quirks(self) -> frozenset[str]:
        """The third-party server quirks in force (docs/simulator.md, "Quirks"); none by default. Set it to
        a list of names or a comma-separated string; ``reset()`` goes back to those given to ``serve``.
        Raises ValueError (``QuirkError``) listing the valid names for an unknown one."""
        return self.state.quirks

    @quirks.setter
    def quirks(self, value: str | Iterable[str] | None) -> None:
        self.state.quirks = parse_quirks(value)

    @property
    def reject_empty_input(self) -> bool:
        """When True, an empty or absent `input` gets a 400 (strict); by default it continues the chain."""
        return self.state.reject_empty_input

    @reject_empty_input.setter
    def reject_empty_input(self, value: bool) -> None:
        self.state.reject_empty_input = value

    @property
    def claude_prefix_mismatch(self) -> str:
        """What Claude does with thinking replayed after a changed prefix when a request does not say
        (``thinking.block_binding``): ``"error"`` (default: a 400), ``"drop_block"`` (silently dropped,
        listed in the response's ``input_transformations``) or ``"allow"`` (an older account: shown to the
        model all the same, listed as ``thinking_mismatch_allowed``)."""
        return self.state.claude_prefix_mismatch

    @claude_prefix_mismatch.setter
    def claude_prefix_mismatch(self, value: str) -> None:
        if value not in ("error", "drop_block", "allow"):
            raise ValueError(f"claude_prefix_mismatch={value!r}: use 'error', 'drop_block' or 'allow'")
        self.state.claude_prefix_mismatch = value

    @property
    def background_pace(self) -> float:
        """Seconds between two events of a background response (``background: true``); the run goes on
        server-side at this pace whatever its streams do. Raises ValueError for a negative value."""
        return float(self.state.background_pace)

    @background_pace.setter
    def background_pace(self, value: float) -> None:
        if not 0 <= value < float("inf"):
            raise ValueError(f"background_pace must be a finite number of seconds, 0 or more, got {value}")
        self.state.background_pace = value

    @property
    def background_resume_window(self) -> float | None:
        """Seconds after its creation during which a background response's events can be streamed again
        (``GET /v1/responses/{id}?stream=true``); later such a request gets a 400 and the response can only
        be retrieved (polled). None (the default): no limit. Raises ValueError for a negative value."""
        window = self.state.background_resume_window
        return None if window is None else float(window)

    @background_resume_window.setter
    def background_resume_window(self, value: float | None) -> None:
        if value is not None and not 0 <= value < float("inf"):
            raise ValueError(f"background_resume_window must be None or a finite number of seconds, got {value}")
        self.state.background_resume_window = value

    def queue(self, *replies: Reply) -> None:
        """Answer the next generation requests (any API) with these replies, in order."""
        with self.state.lock:
            self.state.replies.extend(replies)

    def fail_next(
        self,
        status: int | None = None,
        *,
        retry_after: float | None = None,
        times: int = 1,
        drop_after: int | None = None,
        malformed_after: int | None = None,
        deep_after: int | None = None,
        huge_after: int | None = None,
        huge_bytes: int = 1 << 20,
        slow_first_byte: float | None = None,
        stall_after: int | None = None,
        stall_seconds: float = 30.0,
        error_after: int | None = None,
        forget: str | None = None,
        compat: bool = False,
        finish_after_cut: bool = False,
        finish_delay: float = 0.0,
    ) -> None:
        """Inject a fault into each of the next `times` generation requests (see `Fault`).

        `forget` drops that stored response just before the request is handled; `compat` handles the
        request in compat mode; `finish_after_cut` lets the server finish and store what a dropped or stalled
        stream was generating (`finish_delay` seconds later). Raises ValueError for a status outside 400-599 or a negative setting.
        """
        fault = Fault(
            status=status,
            retry_after=retry_after,
            drop_after=drop_after,
            malformed_after=malformed_after,
            deep_after=deep_after,
            huge_after=huge_after,
            huge_bytes=huge_bytes,
            slow_first_byte=slow_first_byte,
            stall_after=stall_after,
            stall_seconds=stall_seconds,
            error_after=error_after,
            forget=forget,
            compat=compat,
            finish_after_cut=finish_after_cut,
            finish_delay=finish_delay,
        )
        with self.state.lock:
            self.state.faults.extend([fault] * times)

    def context_items(self, response_id: str) -> list[Any]:
        """The effective context (input items, messages or contents) the model saw for a response id.

        Raises KeyError naming the id when no request produced it.
        """
        with self.state.lock:
            if response_id not in self.state.contexts:
                raise KeyError(f"no response {response_id!r} was produced by this simulator")
            return copy.deepcopy(self.state.contexts[response_id])

    def held_items(self, response_id: str) -> list[dict[str, Any]]:
        """The context a request chained on the stored response ``response_id`` starts from: the chain's
        inputs and outputs up to its end, from the latest item an in-request compaction made.

        Raises KeyError naming the id when no stored response has it."""
        with self.state.lock:
            if response_id not in self.state.responses:
                raise KeyError(f"no stored response {response_id!r} in this simulator")
            return prune(self.state, chain_items(self.state, response_id))

    def held_steps(self, interaction_id: str) -> list[dict[str, Any]]:
        """The history a Gemini interaction chained on the stored interaction ``interaction_id`` starts from:
        the steps it saw (earlier history, then its own input) followed by its output steps.

        Raises KeyError naming the id when no stored interaction has it (never stored, deleted or expired)."""
        with self.state.lock:
            if interaction_id not in self.state.interactions:
                raise KeyError(f"no stored interaction {interaction_id!r} in this simulator")
            return copy.deepcopy(self.state.interactions[interaction_id].held)

    def forget(self, response_id: str) -> None:
        """Drop a stored response or interaction as if it expired: chaining on it now fails (a response with
        previous_response_not_found, an interaction with the Interactions API's 404)."""
        self.state.forget(response_id)

    @property
    def websocket_url(self) -> str:
        """The Responses WebSocket endpoint (``ws://.../v1/responses``)."""
        return "ws" + self.url[4:] + "/v1/responses"

    @property
    def ws_idle_timeout(self) -> float | None:
        """Seconds a Responses WebSocket connection may stay idle before the server closes it (None: never)."""
        return self.state.ws_idle_timeout

    @ws_idle_timeout.setter
    def ws_idle_timeout(self, value: float | None) -> None:
        self.state.ws_idle_timeout = value

    @property
    def ws_max_age(self) -> float:
        """Seconds a Responses WebSocket connection lasts before a request on it is refused with
        ``websocket_connection_limit_reached`` and the connection closed (default 3600)."""
        return self.state.ws_max_age

    @ws_max_age.setter
    def ws_max_age(self, value: float) -> None:
        self.state.ws_max_age = value

    @property
    def websockets(self) -> list[str]:
        """The ids of the open Responses WebSocket connections (a recorded ``WS`` request names its
        connection in ``query["connection"]``)."""
        with self.state.lock:
            return list(self.state.sockets)

    def drop_websockets(self, code: int = 1001, reason: str = "server closed the connection") -> int:
        """Close every open Responses WebSocket connection from the server's side (their connection-local
        state is gone); returns how many were open."""
        with self.state.lock:
            sockets = list(self.state.sockets.values())
        for conn in sockets:
            conn.drop(code, reason)
        return len(sockets)

    def plant_divergence(self, message_id: str, part: str) -> None:
        """Make the fingerprint Claude's cache diagnostics hold for the answer ``message_id`` differ in
        ``part`` (``model``, ``tools``, ``system`` or ``messages``): the next request naming it in
        ``diagnostics.previous_message_id`` is told that part changed, whatever the client sent.

        Raises KeyError when the request that produced it did not ask for diagnostics."""
        plant(self.state, message_id, part)

    def reset(self) -> None:
        """Forget all state (stored responses, conversations, queued replies and faults, requests); compat mode
        off, the quirks back to those the simulator started with."""
        self.state.reset()

    def start(self) -> None:
        """Start serving in a background thread; returns once the port accepts connections."""
        self._server = ThreadedServer(self.app, self._host, self._port, name="geppetto-sim")
        try:
            self._server.start()
        except RuntimeError:
            raise RuntimeError("the simulator server did not start; see the log above for the cause") from None
        self.url = self._server.url

    def stop(self) -> None:
        """Stop serving and wait for the server thread (stalled streams are cut short)."""
        self.state.closing = True
        if self._server is not None:
            self._server.stop()

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    compat_mode: bool = False,
    max_body: int = DEFAULT_MAX_BODY,
    quirks: str | Iterable[str] | None = None,
) -> Iterator[Simulator]:
    """Run the simulator for the duration of a `with` block: `with serve() as sim: ... sim.openai_url ...`.

    `port=0` picks a free port. `compat_mode=True` ignores `previous_response_id` and `store`. `quirks`:
    names of third-party server behaviours to reproduce (``["no-echo", "no-usage"]``, docs/simulator.md);
    raises ValueError (``QuirkError``) listing the valid names for an unknown one, before anything starts.
    """
    sim = Simulator(host, port, max_body=max_body, quirks=quirks)
    sim.compat_mode = compat_mode
    with sim:
        yield sim


def run(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    compat_mode: bool = False,
    quirks: str | Iterable[str] | None = None,
) -> None:
    """Serve in the foreground until Ctrl-C; prints the base URLs first."""
    with serve(host, port, compat_mode=compat_mode, quirks=quirks) as sim:
        print(f"geppetto simulator on {sim.url} (OpenAI base URL {sim.openai_url}); Ctrl-C stops it", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
