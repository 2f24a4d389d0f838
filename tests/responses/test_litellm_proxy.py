"""A real third-party Responses server: the LiteLLM proxy (its ``openai`` provider, a passthrough to the
simulator's Responses API) between the engine and the simulator. A chained tool loop and a multi-prompt
session through it chain every request after the first, and the model receives exactly the Turn on every
request (checked at the simulator). The wire facts docs/responses.md records are asserted here, so a
LiteLLM release that changes them fails this file rather than the docs going stale."""

from __future__ import annotations

import json
from typing import Any

import httpx
from responses_support import WEATHER_TOOL, normalize, wire_before_last_response

import geppetto as gp
from geppetto.engine import Handler
from geppetto.middleware import with_middleware
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.providers.openai_responses._context import probe
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn
from litellm_peer import BRIDGE_MODEL, MODEL, Proxy, upstream_response

PROMPTS = 6


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _engine(proxy: Proxy, **kw: Any) -> ResponsesEngine:
    return ResponsesEngine(MODEL, api_key=proxy.key, base_url=proxy.base_url, mode="chained", **kw)


def _posts(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests if r.method == "POST" and r.path == "/v1/responses"]


def _simulator_id(sim: Simulator, turn: Turn) -> str:
    """The simulator's id of the Turn's last response (the Turn holds the proxy's id for it)."""
    key = str(BLOCK_META_RESPONSE_ID)
    last = next(b.metadata[key] for b in reversed(turn.blocks) if b.metadata.get(key))
    items = [b.payload.get("item_id") for b in turn.blocks if b.metadata.get(key) == last]
    return upstream_response(sim, next(i for i in items if i))


def _context_checker(sim: Simulator, answered: list[str]) -> Any:
    """Middleware right above the engine: after every call, the context the simulator's model received for
    the answer is the Turn before it (the simulator's id of each answer is appended to ``answered``)."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            turn = await next_handler(turn)
            sim_id = _simulator_id(sim, turn)
            _, wire = wire_before_last_response(turn)
            assert normalize(sim.context_items(sim_id)) == wire
            answered.append(sim_id)
            return turn

        return handler

    return middleware


def _fallbacks(engine: ResponsesEngine) -> dict[str, int]:
    """The process-wide fallback counters (other tests in the process count into them too)."""
    counters: dict[str, int] = engine.metrics.snapshot()["counters"]
    return {name: n for name, n in counters.items() if name.startswith("fallback")}


def _assert_chained(sim: Simulator, engine: ResponsesEngine, answered: list[str], before: dict[str, int]) -> None:
    posts = _posts(sim)
    # one request per model call, none answered twice, each after the first chained on the one before it
    assert len(posts) == len(answered)
    assert "previous_response_id" not in posts[0].body
    assert [p.body.get("previous_response_id") for p in posts[1:]] == answered[:-1]
    assert _fallbacks(engine) == before  # no fallback while this session ran
    assert not engine.server_ignores_state
    # the echo names the upstream id: the answer's usage decided, free, with no extra request
    verdict = engine.endpoint_verdict
    assert verdict is not None and (verdict.previous_response_id, verdict.evidence) == ("kept", "usage")


async def test_a_chained_tool_loop_through_litellm_chains_and_the_model_receives_the_turn(
    litellm_proxy: Proxy, geppetto_sim: Simulator
) -> None:
    sim, answered = geppetto_sim, []
    engine = _engine(litellm_proxy)
    before = _fallbacks(engine)
    session = gp.Session(with_middleware(engine, _context_checker(sim, answered)), tools=[get_weather])
    for i in range(PROMPTS):
        sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"city {i}"})]), Reply(text=f"sunny {i}"))
        out = await session.run(f"weather in city {i}?")
        assert out.blocks[-1].payload["text"] == f"sunny {i}"
    assert len(answered) == 2 * PROMPTS
    _assert_chained(sim, engine, answered, before)
    # the last request's context is the whole conversation: six prompts, their calls, results and answers
    assert len(sim.context_items(answered[-1])) == 4 * PROMPTS - 1


async def test_a_multi_prompt_session_through_litellm_chains_and_the_model_receives_the_turn(
    litellm_proxy: Proxy, geppetto_sim: Simulator
) -> None:
    sim, answered = geppetto_sim, []
    engine = _engine(litellm_proxy, tools=[WEATHER_TOOL])
    before = _fallbacks(engine)
    session = gp.Session(with_middleware(engine, _context_checker(sim, answered)))
    for i in range(PROMPTS):
        out = await session.run(f"prompt {i}")
        assert out.blocks[-1].payload["text"] == f"You said: prompt {i}"
    _assert_chained(sim, engine, answered, before)
    # each request sent only its own prompt (a delta), the stored context did the rest
    sent = [normalize(r.body["input"]) for r in _posts(sim)]
    assert sent == [[("message", "user", f"prompt {i}")] for i in range(PROMPTS)]


def _client(proxy: Proxy) -> httpx.Client:
    return httpx.Client(base_url=proxy.base_url, headers={"Authorization": f"Bearer {proxy.key}"}, timeout=60)


def _stream(client: httpx.Client, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The events of a streamed request (parsed), and the data lines that were not JSON."""
    events, other = [], []
    with client.stream("POST", "/responses", json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                events.append(json.loads(line.removeprefix("data: ")))
            elif line.startswith("data:"):
                other.append(line)
    return events, other


def test_what_litellm_sends_on_the_wire(litellm_proxy: Proxy, geppetto_sim: Simulator) -> None:
    """docs/responses.md ("Servers and services") records these; each is what the engine's evidence meets."""
    sim = geppetto_sim
    with _client(litellm_proxy) as client:
        first = client.post("/responses", json={"model": MODEL, "input": "hello there", "store": True}).json()
        upstream = upstream_response(sim, first["output"][0]["id"])
        # its own response ids, mapped back to the simulator's when they return as previous_response_id
        assert first["id"] != upstream and first["id"].startswith("resp_")
        second = client.post(
            "/responses", json={"model": MODEL, "input": "second", "previous_response_id": first["id"], "store": True}
        ).json()
        assert _posts(sim)[-1].body["previous_response_id"] == upstream
        # the echo names the upstream id, not the one the client sent; usage counts the stored history
        assert second["previous_response_id"] == upstream != first["id"]
        assert second["usage"]["input_tokens"] > first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
        # the same response gets a new id each time it is returned
        again = client.get(f"/responses/{first['id']}").json()
        assert again["id"] != first["id"] and again["output"][0]["id"] == first["output"][0]["id"]
        # streams: the output_item events, usage on response.completed, then a trailing [DONE]
        events, other = _stream(client, {"model": MODEL, "input": "third", "previous_response_id": second["id"]})
        kinds = [e["type"] for e in events]
        assert {"response.output_item.added", "response.output_item.done"} <= set(kinds)
        assert kinds[-1] == "response.completed" and events[-1]["response"]["usage"]["input_tokens"] > 0
        assert other == ["data: [DONE]"]
        # an upstream error is re-wrapped: its code and param survive only inside the message
        gone = client.post("/responses", json={"model": MODEL, "input": "x", "previous_response_id": "resp_gone"})
        assert gone.status_code == 400
        error = gone.json()["error"]
        assert error["code"] == "400" and error["param"] is None
        assert "previous_response_not_found" in error["message"]
        # no /conversations; the other routes pass through
        conversations = client.post("/conversations", json={})
        assert conversations.status_code == 404 and conversations.json() == {"detail": "Not Found"}
        count = client.post("/responses/input_tokens", json={"model": MODEL, "input": "x"})
        assert count.status_code == 200 and count.json()["input_tokens"] > 0
        compact = client.post("/responses/compact", json={"model": MODEL, "input": "x"})
        assert compact.status_code == 200 and compact.json()["object"] == "response.compaction"


async def test_a_stateless_engine_through_litellm_sends_the_whole_turn(
    litellm_proxy: Proxy, geppetto_sim: Simulator
) -> None:
    sim = geppetto_sim
    engine = ResponsesEngine(MODEL, api_key=litellm_proxy.key, base_url=litellm_proxy.base_url, mode="stateless")
    session = gp.Session(engine)
    for i in range(3):
        await session.run(f"prompt {i}")
    posts = _posts(sim)
    assert [len(p.body["input"]) for p in posts] == [1, 3, 5]
    assert not any("previous_response_id" in p.body for p in posts)


async def test_probe_through_litellm_finds_it_keeps_state_without_an_echo(
    litellm_proxy: Proxy, geppetto_sim: Simulator
) -> None:
    report = (await probe(litellm_proxy.base_url, MODEL, litellm_proxy.key)).to_dict()
    assert (report["previous_response_id"], report["echo"], report["echo_seen"]) == ("kept", False, "other")
    assert report["evidence"] == "usage"
    assert report["conversations"] is False and any("POST /conversations: 404" in n for n in report["notes"])
    assert report["input_tokens"] is report["compact"] is report["background"] is report["retrieve"] is True
    # DELETE /responses/{id} passes through the proxy too
    assert report["delete"] is True


async def test_a_parent_the_upstream_lost_is_recovered_through_litellm(
    litellm_proxy: Proxy, geppetto_sim: Simulator
) -> None:
    # the proxy re-wraps the upstream's previous_response_not_found as a 400 with code "400"
    sim = geppetto_sim
    engine = _engine(litellm_proxy)
    before = _fallbacks(engine).get("fallback:previous_response_not_found", 0)
    session = gp.Session(engine)
    first = await session.run("prompt 0")
    sim.forget(_simulator_id(sim, first))
    out = await session.run("prompt 1")
    assert out.blocks[-1].payload["text"] == "You said: prompt 1"
    assert _fallbacks(engine).get("fallback:previous_response_not_found", 0) == before + 1
    # the retry sent the whole Turn, not chained on the lost parent
    last = _posts(sim)[-1].body
    assert "previous_response_id" not in last and len(last["input"]) == 3


def _said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Chat Completions messages as (role, text)."""
    out = []
    for m in messages:
        content = m.get("content")
        text = content if isinstance(content, str) else "".join(str(p.get("text") or "") for p in content or [])
        out.append((str(m["role"]), text))
    return out


async def test_the_bridge_without_a_database_forgets_and_the_engine_falls_back(
    litellm_proxy: Proxy, geppetto_sim: Simulator
) -> None:
    # the proxy's Responses-to-Chat bridge with no database accepts previous_response_id and forwards the new
    # input alone, echoing an id of its own: the engine must catch it before the answer reaches the Turn
    sim = geppetto_sim
    engine = ResponsesEngine(BRIDGE_MODEL, api_key=litellm_proxy.key, base_url=litellm_proxy.base_url, mode="chained")
    before = _fallbacks(engine).get("fallback:server_ignores_state", 0)
    session = gp.Session(engine)
    for i in range(PROMPTS):
        out = await session.run(f"prompt {i}")
        assert out.blocks[-1].payload["text"] == f"You said: prompt {i}"
    assert _fallbacks(engine).get("fallback:server_ignores_state", 0) == before + 1
    verdict = engine.endpoint_verdict
    assert engine.server_ignores_state and verdict is not None and verdict.previous_response_id == "ignored"
    chats = [_said(r.body["messages"]) for r in sim.requests if r.path == "/v1/chat/completions"]
    # one request answered twice (the forgotten one, dropped), then the whole Turn every time
    assert len(chats) == PROMPTS + 1
    assert chats[1] == [("user", "prompt 1")]
    for i, said in enumerate(chats[2:], start=1):
        history = [t for j in range(i) for t in (("user", f"prompt {j}"), ("assistant", f"You said: prompt {j}"))]
        assert said == [*history, ("user", f"prompt {i}")]
    assert [b.text for b in out.blocks][-2:] == [f"prompt {PROMPTS - 1}", f"You said: prompt {PROMPTS - 1}"]
    assert len(out.blocks) == 2 * PROMPTS


async def test_probe_through_the_bridge_finds_it_ignores_state(litellm_proxy: Proxy, geppetto_sim: Simulator) -> None:
    report = (await probe(litellm_proxy.base_url, BRIDGE_MODEL, litellm_proxy.key)).to_dict()
    assert (report["previous_response_id"], report["evidence"], report["echo_seen"]) == ("ignored", "usage", "other")
    assert report["retrieve"] is False and report["compact"] is False  # the bridge has neither route
