"""HTTP vs WebSocket transport of the Responses engine on a 20-step tool loop, against the simulator.

Workload: a 20-step tool loop (19 calls of one tool, each answered with a 2 KB result, then a text answer),
a one-line system prompt. Rows: `ResponsesEngine(transport="http" | "websocket", store=True | False)`.
Over HTTP `store=False` can only be stateless (the whole Turn on every request); over the socket it chains
on the connection's state (`previous_response_id` + the new tool result).

Columns, per run of the loop (median of `--repeats` runs):
  - `body bytes`: the request bodies (HTTP) or `response.create` messages (WebSocket) the engine sent;
  - `wire bytes`: plus each HTTP request's request line and headers, or the WebSocket handshake once and a
    frame header per message (client-to-server frames are masked: 2 + 4 bytes, 8 more past 125 bytes, 6 more
    past 64 KB);
  - `client CPU`: `time.thread_time()` of the client's thread (the event loop the engine runs on; the
    simulator and the latency proxy run in other threads);
  - `wall`: the loop's wall time through a TCP proxy that delays every chunk by half of `--rtt` each way.

The simulator does not model the service's own saving (a connection-local cache instead of reloading the
chain), so the wall column shows only what the client and the wire cost: compare bytes and CPU.

Run: `.venv/bin/python bench/websocket.py [--steps 20] [--rtt 0.02] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from typing import Any

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator, ToolCall, serve

RESULT = "x" * 2048
PROMPT = "Check the weather in many cities, one call at a time."


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"{city}: {RESULT}"


class LatencyProxy:
    """A TCP proxy on loopback that delays every chunk by ``delay`` seconds in each direction (in its own thread)."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.target_port, self.delay = target_port, delay
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                at, data = await queue.get()
                if not data:
                    writer.close()
                    return
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        task = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                await queue.put((time.monotonic() + self.delay, data))
                if not data:
                    break
        except ConnectionError:
            await queue.put((0.0, b""))
        await task

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def _frame_overhead(size: int) -> int:
    return 6 + (2 if size > 125 else 0) + (6 if size > 65535 else 0)


def wire_bytes(requests: list[Any]) -> tuple[int, int]:
    """(body bytes, wire bytes) of the requests that made responses."""
    body = wire = 0
    handshakes: set[str] = set()
    for r in requests:
        if r.path != "/v1/responses":
            continue
        body += r.size
        head = sum(len(k) + len(v) + 4 for k, v in r.headers.items())
        if r.method == "WS":
            conn = r.query.get("connection", "")
            if conn not in handshakes:  # the upgrade request, once per connection
                handshakes.add(conn)
                wire += len("GET /v1/responses HTTP/1.1\r\n") + head + 2
            wire += r.size + _frame_overhead(r.size)
        else:
            wire += len(f"POST {r.path} HTTP/1.1\r\n") + head + 2 + r.size
    return body, wire


async def one_run(sim: Simulator, base_url: str, steps: int, transport: str, store: bool) -> dict[str, Any]:
    sim.reset()
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{i}"})]) for i in range(steps - 1)])
    sim.queue(Reply(text="done"))
    engine = ResponsesEngine("sim-1", api_key="sk-bench", base_url=base_url, store=store, transport=transport)
    session = gp.Session(engine, tools=[get_weather], tool_loop_options={"max_iterations": steps + 1})
    session.append(gp.Turn(blocks=[gp.Block.system("You check the weather.")]))
    async with engine:
        cpu, wall = time.thread_time(), time.perf_counter()
        out = await session.run(PROMPT)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    made = [r for r in sim.requests if r.path == "/v1/responses"]
    assert out.blocks[-1].text == "done" and len(made) == steps, "the loop did not run its steps"
    chained = sum(1 for r in made if (r.body or {}).get("previous_response_id"))
    body, wire = wire_bytes(made)
    return {"body": body, "wire": wire, "cpu": cpu, "wall": wall, "chained": chained}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rtt", type=float, default=0.02, help="simulated round trip, seconds")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = [("http", True), ("http", False), ("websocket", True), ("websocket", False)]
    with serve() as sim:
        port = int(sim.url.rsplit(":", 1)[1])
        proxy = LatencyProxy(port, args.rtt / 2)
        try:
            results = {}
            for transport, store in rows:  # a first run of each row warms imports and connections up, not counted
                asyncio.run(one_run(sim, sim.openai_url, args.steps, transport, store))
                direct = [
                    asyncio.run(one_run(sim, sim.openai_url, args.steps, transport, store)) for _ in range(args.repeats)
                ]
                slow_url = f"http://127.0.0.1:{proxy.port}/v1"
                slow = [asyncio.run(one_run(sim, slow_url, args.steps, transport, store)) for _ in range(args.repeats)]
                results[(transport, store)] = (direct, slow)
        finally:
            proxy.stop()
    print(
        f"{args.steps}-step tool loop, 2 KB tool results; median of {args.repeats}; wall at {args.rtt * 1000:.0f} ms RTT\n"
    )
    print(
        "| transport | store | chained requests | body bytes | wire bytes | client CPU (ms) | wall, no latency (ms) | wall at RTT (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    base = results[("http", True)]
    for (transport, store), (direct, slow) in results.items():
        med = {k: statistics.median(r[k] for r in direct) for k in ("body", "wire", "cpu", "wall")}
        wall_rtt = statistics.median(r["wall"] for r in slow)
        print(
            f"| {transport} | {store} | {direct[0]['chained']}/{args.steps} | {med['body']:,.0f} | {med['wire']:,.0f} | "
            f"{med['cpu'] * 1000:.1f} | {med['wall'] * 1000:.1f} | {wall_rtt * 1000:.1f} |"
        )
    ws = results[("websocket", True)]
    ratio = statistics.median(r["wire"] for r in ws[0]) / statistics.median(r["wire"] for r in base[0])
    zdr = statistics.median(r["wire"] for r in results[("websocket", False)][0]) / statistics.median(
        r["wire"] for r in results[("http", False)][0]
    )
    print(f"\nSUMMARY: websocket/http wire bytes {ratio:.2f} (store=True), {zdr:.2f} (store=False)")


if __name__ == "__main__":
    main()
