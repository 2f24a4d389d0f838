"""ResponsesEngine against the simulator: the seed's integration scenarios and the fallbacks."""

from __future__ import annotations

import logging

import pytest
from responses_support import WEATHER_TOOL, assert_valid_requests, engine, forget, normalize, wire_before_last_response

import geppetto as gp
from geppetto.providers.openai_responses import (
    ConversationState,
    ResponsesEngine,
    find_best_anchor,
    get_state,
    metrics,
    set_state,
)
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_STOP_REASON, TURN_META_USAGE, Block, BlockKind, Turn

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        **{k: v for k, v in WEATHER_TOOL.items() if k != "name"},
        "strict": False,
    }
]


def _start() -> Turn:
    turn = Turn()
    turn.append(Block.system("be terse"))
    turn.append(Block.user("weather in Paris?"))
    return turn


def _answer_pending(turn: Turn, result: str = "sunny") -> None:
    call = turn.blocks[-1]
    assert call.kind is BlockKind.TOOL_CALL
    turn.append(Block.tool_use(call.payload["id"], result))


async def test_end_to_end_chained_request(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    call = turn.blocks[2]
    rid_a = call.metadata[str(BLOCK_META_RESPONSE_ID)]
    _answer_pending(turn)
    turn = await eng.run_inference(turn)
    first, second = (r.body for r in sim.requests)
    assert first == {
        "model": "sim-1",
        "input": [{"role": "system", "content": "be terse"}, {"role": "user", "content": "weather in Paris?"}],
        "tools": TOOLS,
        "stream": True,
    }
    assert second == {
        "model": "sim-1",
        "input": [{"type": "function_call_output", "call_id": call.payload["id"], "output": "sunny"}],
        "previous_response_id": rid_a,
        "tools": TOOLS,
        "stream": True,
    }
    assert [b.kind for b in turn.blocks] == [
        BlockKind.SYSTEM,
        BlockKind.USER,
        BlockKind.TOOL_CALL,
        BlockKind.TOOL_USE,
        BlockKind.LLM_TEXT,
    ]
    rid_b = turn.blocks[4].metadata[str(BLOCK_META_RESPONSE_ID)]
    assert (turn.blocks[4].text, find_best_anchor(turn)) == ("Sunny.", rid_b)
    assert get_state(turn) == ConversationState("chained", None, rid_b)
    assert call.payload["args"] == {"city": "Paris"}
    _, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid_b)) == wire
    assert TURN_META_STOP_REASON.get(turn.metadata) == "end_turn"
    usage = TURN_META_USAGE.get(turn.metadata)
    assert usage is not None and usage["input_tokens"] > 0
    assert_valid_requests(sim)


async def test_fallback_to_stateless_when_middleware_reorders(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="Hi."), Reply(text="Again."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    turn.blocks[0], turn.blocks[1] = turn.blocks[1], turn.blocks[0]
    turn.append(Block.user("and now?"))
    before = metrics.snapshot()["counters"].get("fallback", 0)
    with caplog.at_level(logging.WARNING, logger="geppetto.providers.openai_responses"):
        turn = await eng.run_inference(turn)
    body = sim.requests[1].body
    assert "previous_response_id" not in body
    assert normalize(body["input"]) == [
        ("message", "user", "weather in Paris?"),
        ("message", "system", "be terse"),
        ("message", "assistant", "Hi."),
        ("message", "user", "and now?"),
    ]
    assert "no valid anchor" in caplog.text and "fingerprint mismatch" in caplog.text
    assert metrics.snapshot()["counters"]["fallback"] == before + 1
    assert turn.blocks[-1].text == "Again."
    assert_valid_requests(sim)


async def test_multiple_middleware_iterations(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Lyon"})]),
        Reply(text="Both sunny."),
    )
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    rids = []
    for result in ("sunny", "also sunny"):
        rids.append(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
        _answer_pending(turn, result)
        turn = await eng.run_inference(turn)
    bodies = [r.body for r in sim.requests]
    assert [b.get("previous_response_id") for b in bodies] == [None, *rids]
    assert [normalize(b["input"]) for b in bodies[1:]] == [
        [("function_call_output", turn.blocks[2].payload["id"], "sunny")],
        [("function_call_output", turn.blocks[4].payload["id"], "also sunny")],
    ]
    tagged = [b.metadata.get(str(BLOCK_META_RESPONSE_ID)) for b in turn.blocks]
    assert tagged[:2] == [None, None] and tagged[3] is None and tagged[5] is None
    assert tagged[2] == rids[0] and tagged[4] == rids[1] and tagged[6] not in (None, *rids)
    rid, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == wire
    assert_valid_requests(sim)


async def test_tool_loop_middleware_chains(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))

    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    from geppetto.middleware import tool_loop

    eng = gp.with_middleware(engine(sim), tool_loop(gp.ToolRegistry([get_weather])))
    turn = await eng.run_inference(_start())
    assert turn.blocks[-1].text == "Sunny."
    second = sim.requests[1].body
    assert second["previous_response_id"] == turn.blocks[2].metadata[str(BLOCK_META_RESPONSE_ID)]
    assert normalize(second["input"]) == [("function_call_output", turn.blocks[2].payload["id"], "sunny in Paris")]


async def test_previous_response_not_found_resends_whole_turn(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    forget(sim, str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]))
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    bodies = [r.body for r in sim.requests if r.path == "/v1/responses"]
    assert len(bodies) == 3 and "previous_response_id" in bodies[1] and "previous_response_id" not in bodies[2]
    assert len(bodies[2]["input"]) == 4 and turn.blocks[-1].text == "Two."
    assert_valid_requests(sim)


async def test_previous_response_not_found_can_raise(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."))
    eng = engine(sim, on_previous_not_found="raise")
    turn = await eng.run_inference(_start())
    forget(sim, str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]))
    turn.append(Block.user("more"))
    with pytest.raises(gp.PreviousResponseNotFoundError, match="not found"):
        await eng.run_inference(turn)


async def test_server_ignoring_previous_response_id_goes_stateless(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="ignored"), Reply(text="Two."), Reply(text="Three."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    sim.compat_mode = True
    turn.append(Block.user("more"))
    with caplog.at_level(logging.WARNING, logger="geppetto.providers.openai_responses"):
        turn = await eng.run_inference(turn)
    turn.append(Block.user("again"))
    turn = await eng.run_inference(turn)
    bodies = [r.body for r in sim.requests]
    assert [("previous_response_id" in b, len(b["input"])) for b in bodies] == [
        (False, 2),
        (True, 1),
        (False, 4),
        (False, 6),
    ]
    assert eng.server_ignores_state is True and "ignores server-side state" in caplog.text
    assert [b.text for b in turn.blocks if b.kind is BlockKind.LLM_TEXT] == ["One.", "Two.", "Three."]


def skip_without_conversations(sim: Simulator) -> None:
    """The Conversations API landed in the simulator after this engine; skip cleanly on older builds."""
    import httpx

    answer = httpx.post(f"{sim.openai_url}/conversations", json={}, headers={"authorization": "Bearer sk-test"})
    sim.reset()
    if answer.status_code == 404:
        pytest.skip("this simulator build does not serve POST /v1/conversations yet")


async def test_conversation_mode_sends_delta_and_reseeds_on_system_change(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    skip_without_conversations(sim)
    sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    eng = engine(sim, mode="conversation")
    turn = await eng.run_inference(_start())
    conv = get_state(turn).conversation_id  # type: ignore[union-attr]
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    assert get_state(turn).conversation_id == conv  # type: ignore[union-attr]
    turn.blocks[0].payload["text"] = "be verbose"
    turn.append(Block.user("again"))
    turn = await eng.run_inference(turn)
    paths = [(r.method, r.path) for r in sim.requests]
    assert paths == [
        ("POST", "/v1/conversations"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/responses"),
        ("GET", f"/v1/conversations/{conv}/items"),  # is the old conversation empty? (it is not)
        ("POST", "/v1/conversations"),
        ("POST", "/v1/responses"),
    ]
    resp = [r.body for r in sim.requests if r.path == "/v1/responses"]
    assert [normalize(b["input"]) for b in resp] == [
        [("message", "user", "weather in Paris?")],
        [("message", "user", "more")],
        [("message", "user", "again")],
    ]
    assert resp[0]["conversation"] == resp[1]["conversation"] == conv != resp[2]["conversation"]
    assert normalize(sim.requests[4].body["items"]) == [
        ("message", "system", "be verbose"),
        ("message", "user", "weather in Paris?"),
        ("message", "assistant", "One."),
        ("message", "user", "more"),
        ("message", "assistant", "Two."),
    ]
    rid, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == wire
    assert_valid_requests(sim)


async def test_instructions_mode_resends_system_and_keeps_chain(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim, instructions_mode=True)
    turn = await eng.run_inference(_start())
    turn.blocks[0].payload["text"] = "be kind"
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    first, second = (r.body for r in sim.requests)
    assert (first["instructions"], normalize(first["input"])) == (
        "be terse",
        [("message", "user", "weather in Paris?")],
    )
    assert (second["instructions"], normalize(second["input"])) == ("be kind", [("message", "user", "more")])
    assert "previous_response_id" in second


async def test_reasoning_replayed_with_encrypted_content_when_stateless(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One.", reasoning="thinking"), Reply(text="Two."))
    eng = engine(sim, store=False)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    second = sim.requests[1].body
    assert second["store"] is False and second["include"] == ["reasoning.encrypted_content"]
    kinds = [i.get("type", "message") for i in second["input"]]
    assert kinds == ["message", "message", "reasoning", "message", "message"]
    reasoning = second["input"][2]
    assert set(reasoning) == {"type", "id", "summary", "encrypted_content"} and reasoning["encrypted_content"]
    assert second["input"][3]["id"] == turn.blocks[3].payload["item_id"]
    assert_valid_requests(sim)


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(gp.ConfigurationError, match="store=True"):
        gp.providers.openai_responses.ResponsesEngine("m", api_key="k", store=False, mode="chained")  # type: ignore[attr-defined]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(gp.ConfigurationError, match=r"pass api_key=\.\.\. or set the OPENAI_API_KEY"):
        gp.providers.openai_responses.ResponsesEngine("m")  # type: ignore[attr-defined]


async def test_a_compatible_server_needs_no_key_and_a_refused_key_names_the_variable(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = ResponsesEngine("gpt-4.1", base_url=geppetto_sim.openai_url)  # e.g. a local server: no key
    assert "authorization" not in {k.lower() for k in keyless._headers}
    geppetto_sim.fail_next(status=401)
    with pytest.raises(
        gp.AuthenticationError, match=r"no API key was sent: pass api_key=\.\.\. or set the OPENAI_API_KEY"
    ):
        await keyless.run_inference(_start())
    geppetto_sim.fail_next(status=401)
    with pytest.raises(gp.AuthenticationError, match="check the key passed as api_key= or set in OPENAI_API_KEY"):
        await engine(geppetto_sim).run_inference(_start())


async def test_turn_state_chained_with_store_false_engine_is_refused(geppetto_sim: Simulator) -> None:
    turn = _start()
    set_state(turn, ConversationState(mode="chained"))
    with pytest.raises(gp.ConfigurationError, match="store=False"):
        await engine(geppetto_sim, store=False).run_inference(turn)


async def test_request_bodies_with_every_option_validate_against_the_spec(geppetto_sim: Simulator) -> None:
    """Images (URL, inline, file id), a developer message, include, a tool_choice object, reasoning and
    structured output in one body, checked against the official OpenAPI schema."""
    sim = geppetto_sim
    sim.queue(Reply(text='{"x":1}', reasoning="thinking"), Reply(text='{"x":2}'))
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    eng = engine(
        sim,
        tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_weather"}]},
        parallel_tool_calls=False,
        reasoning_effort="low",
        reasoning_summary="auto",
        text_format={"type": "json_schema", "name": "answer", "schema": schema, "strict": True},
        max_output_tokens=256,
        include=["message.output_text.logprobs", "reasoning.encrypted_content"],
    )
    turn = Turn()
    turn.append(Block(BlockKind.SYSTEM, {"text": "answer in JSON"}, role="developer"))
    images = [
        {"url": "https://example.com/a.png", "detail": "low"},
        {"data": "iVBORw0KGgo=", "media_type": "image/png"},
        {"file_id": "file-abc"},
    ]
    turn.append(Block.user("what is in these?", images=images))
    turn = await eng.run_inference(turn)
    turn.append(Block.user("and now?"))
    await eng.run_inference(turn)
    first, second = (r.body for r in sim.requests)
    assert first["input"] == [
        {"role": "developer", "content": "answer in JSON"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "what is in these?"},
                {"type": "input_image", "detail": "low", "image_url": "https://example.com/a.png"},
                {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0KGgo="},
                {"type": "input_image", "detail": "auto", "file_id": "file-abc"},
            ],
        },
    ]
    for body in (first, second):
        assert body["tool_choice"]["type"] == "allowed_tools" and body["include"][0] == "message.output_text.logprobs"
        assert body["reasoning"] == {"effort": "low", "summary": "auto"} and body["text"]["format"]["name"] == "answer"
    assert second["previous_response_id"] and normalize(second["input"]) == [("message", "user", "and now?")]
    assert_valid_requests(sim)
