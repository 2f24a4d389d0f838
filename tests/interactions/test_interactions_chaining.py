"""The Interactions engine under the shared anchor proof, against the simulator's Interactions API: deltas
after the latest proven interaction, whole-Turn fallbacks with their reasons, an expired interaction
recovered once, store off, thought signatures kept exactly, structured output."""

from __future__ import annotations

import asyncio
import json

import pytest
from interactions_support import (
    THINKING,
    assert_server_holds_the_turn,
    creates,
    engine,
    last_interaction,
)

import geppetto as gp
from geppetto._exceptions import NotFoundError
from geppetto.events import EventFinal, EventLog, with_sinks
from geppetto.middleware import tool_loop, with_middleware
from geppetto.output import STRUCTURED_OUTPUT, StructuredOutputConfig
from geppetto.providers.gemini import InteractionsEngine, get_interactions_state
from geppetto.providers.openai_responses import ResponsesMetrics
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry
from geppetto.turns import (
    BLOCK_META_PREFIX_FINGERPRINT,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_THOUGHT_SIGNATURE,
    Block,
    BlockKind,
    Turn,
)


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _start() -> Turn:
    return Turn(blocks=[Block.system("Be brief."), Block.user("hello")])


async def test_the_second_request_sends_only_the_new_user_step(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    turn = await eng.run_inference(_start())
    first = last_interaction(turn)
    assert all(BLOCK_META_PREFIX_FINGERPRINT.get(b.metadata) for b in turn.blocks[2:])
    turn.append(Block.user("and again"))
    turn = await eng.run_inference(turn)
    second = creates(geppetto_sim)[-1]
    assert second["previous_interaction_id"] == first
    assert second["input"] == [{"type": "user_input", "content": [{"type": "text", "text": "and again"}]}]
    assert second["system_instruction"] == "Be brief."  # interaction-scoped: sent every time
    assert_server_holds_the_turn(geppetto_sim, turn)
    state = get_interactions_state(turn)
    assert state is not None and state.previous_interaction_id == last_interaction(turn)
    assert eng.metrics.snapshot()["counters"] == {"stateless": 1, "chained": 1}


async def test_a_twenty_step_tool_loop_sends_each_steps_delta_only(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    calls = [Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{i}"})]) for i in range(20)]
    sim.queue(*calls, Reply(text="all sunny"))
    looped = with_middleware(engine(sim), tool_loop(ToolRegistry([get_weather]), max_iterations=25))
    out = await looped.run_inference(Turn(blocks=[Block.user("weather in twenty cities?")]))
    bodies = creates(sim)
    assert len(bodies) == 21
    assert "previous_interaction_id" not in bodies[0]
    for i, body in enumerate(bodies[1:]):
        assert body["previous_interaction_id"]
        assert [s["type"] for s in body["input"]] == ["function_result"]
        assert body["input"][0]["result"] == f"sunny in c{i}"
        assert body["input"][0]["name"] == "get_weather"
    assert out.blocks[-1].text == "all sunny"
    assert_server_holds_the_turn(sim, out)


async def test_an_edit_before_the_anchor_sends_the_whole_turn_with_its_reason(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("second"))
    turn = await eng.run_inference(turn)
    finals: list[EventFinal] = []
    turn.blocks[1].payload["text"] = "hello, edited"  # middleware rewrote the first question
    turn.append(Block.user("third"))
    with with_sinks(lambda e: finals.append(e) if isinstance(e, EventFinal) else None):
        turn = await eng.run_inference(turn)
    body = creates(geppetto_sim)[-1]
    assert "previous_interaction_id" not in body and len(body["input"]) == 5
    extra = finals[-1].metadata.extra
    assert extra["responses.fallback"] == "fingerprint_mismatch" and extra["responses.full"] is True
    assert eng.metrics.snapshot()["counters"]["fallback:fingerprint_mismatch"] == 1
    assert_server_holds_the_turn(geppetto_sim, turn)
    turn.append(Block.user("fourth"))  # the new chain is proven again
    turn = await eng.run_inference(turn)
    assert creates(geppetto_sim)[-1]["previous_interaction_id"]


async def test_a_later_valid_anchor_is_taken_after_an_edit_past_it(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("second"))
    turn = await eng.run_inference(turn)
    anchor = last_interaction(turn)
    turn.append(Block.user("third"))
    turn = await eng.run_inference(turn)
    turn.blocks[-1].payload["text"] = "the last answer, edited"  # only the newest interaction is broken
    turn.append(Block.user("fourth"))
    turn = await eng.run_inference(turn)
    body = creates(geppetto_sim)[-1]
    assert body["previous_interaction_id"] == anchor
    assert [s["type"] for s in body["input"]] == ["user_input", "model_output", "user_input"]
    assert_server_holds_the_turn(geppetto_sim, turn)


async def test_an_expired_interaction_is_recovered_once_with_the_whole_turn(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    sim.forget(last_interaction(turn))  # as if it expired
    turn.append(Block.user("still there?"))
    logs: list[EventLog] = []
    finals: list[EventFinal] = []
    with with_sinks(lambda e: (logs if isinstance(e, EventLog) else finals).append(e)):
        turn = await eng.run_inference(turn)
    first, second = creates(sim)[-2:]
    assert first["previous_interaction_id"] and len(first["input"]) == 1
    assert "previous_interaction_id" not in second and len(second["input"]) == 3
    assert [e.fields.get("fallback") for e in logs if isinstance(e, EventLog)] == ["interaction_not_found"]
    final = [e for e in finals if isinstance(e, EventFinal)][-1]
    assert final.metadata.extra["responses.fallback"] == "interaction_not_found"
    assert eng.metrics.snapshot()["counters"]["fallback:interaction_not_found"] == 1
    assert_server_holds_the_turn(sim, turn)


async def test_an_expired_interaction_can_be_an_error_instead(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim, on_previous_not_found="raise")
    turn = await eng.run_inference(_start())
    geppetto_sim.forget(last_interaction(turn))
    turn.append(Block.user("still there?"))
    with pytest.raises(NotFoundError):
        await eng.run_inference(turn)


async def test_store_off_sends_the_whole_turn_every_time(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim, store=False, mode="chained")
    turn = await eng.run_inference(_start())
    turn.append(Block.user("second"))
    turn = await eng.run_inference(turn)
    first, second = creates(geppetto_sim)
    assert first["store"] is False and second["store"] is False
    assert "previous_interaction_id" not in second and len(second["input"]) == 3
    assert not any(BLOCK_META_PREFIX_FINGERPRINT.get(b.metadata) for b in turn.blocks)
    assert eng.metrics.snapshot()["counters"]["fallback:store_off"] == 2


async def test_stateless_mode_never_chains(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim, mode="stateless")
    turn = await eng.run_inference(_start())
    turn.append(Block.user("second"))
    await eng.run_inference(turn)
    assert not any("previous_interaction_id" in b for b in creates(geppetto_sim))
    assert eng.metrics.snapshot()["counters"] == {"stateless": 2}


async def test_thought_signatures_are_kept_and_replayed_exactly(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(
        Reply(reasoning="Let me think.", tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]), Reply(text="Sunny.")
    )
    session = gp.Session(engine(sim, model=THINKING, mode="stateless"), tools=[get_weather])
    out = await session.run("weather in Oslo?")
    thoughts = [b for b in out.blocks if b.kind is BlockKind.REASONING]
    assert thoughts and thoughts[0].payload.get(PAYLOAD_THOUGHT_SIGNATURE)
    sent = [s for s in creates(sim)[-1]["input"] if s["type"] == "thought"]
    assert sent and sent[0]["signature"] == thoughts[0].payload[PAYLOAD_THOUGHT_SIGNATURE]


async def test_structured_output_goes_as_the_response_format(geppetto_sim: Simulator) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    turn = _start()
    STRUCTURED_OUTPUT.set(turn.data, StructuredOutputConfig(name="city", schema=schema))
    out = await engine(geppetto_sim).run_inference(turn)
    body = creates(geppetto_sim)[-1]
    assert body["response_format"]["schema"]["properties"] == schema["properties"]
    assert isinstance(json.loads(out.blocks[-1].text), dict)


def test_settings_that_cannot_work_are_refused() -> None:
    from geppetto._exceptions import ConfigurationError

    for kw in ({"mode": "conversation"}, {"background": True, "store": False}, {"on_previous_not_found": "x"}):
        with pytest.raises(ConfigurationError):
            InteractionsEngine("m", api_key="k", **kw)  # type: ignore[arg-type]


def test_the_metrics_default_to_the_shared_chain_metrics() -> None:
    from geppetto.providers.openai_responses import metrics

    assert InteractionsEngine("m", api_key="k").metrics is metrics
    assert isinstance(InteractionsEngine("m", api_key="k", metrics=ResponsesMetrics()).metrics, ResponsesMetrics)


async def test_images_go_as_image_content(geppetto_sim: Simulator) -> None:
    image = {"data": "iVBORw0KGgo=", "media_type": "image/png"}
    turn = Turn(blocks=[Block.user("what is this?", images=[image, {"url": "https://example.com/a.png"}])])
    await engine(geppetto_sim).run_inference(turn)
    content = creates(geppetto_sim)[-1]["input"][0]["content"]
    assert content == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"},
        {"type": "image", "uri": "https://example.com/a.png"},
    ]


async def test_two_inferences_at_once_on_one_turn_leave_the_later_answer_unanchored(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    turn = _start()
    await asyncio.gather(eng.run_inference(turn), eng.run_inference(turn))
    answers = [b for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]
    assert len(answers) == 2
    assert BLOCK_META_PREFIX_FINGERPRINT.get(answers[0].metadata)
    assert not BLOCK_META_PREFIX_FINGERPRINT.get(answers[1].metadata), "its context on the server is not the Turn"
    turn.append(Block.user("next"))
    await eng.run_inference(turn)
    body = creates(geppetto_sim)[-1]
    assert body["previous_interaction_id"] == answers[0].metadata[str(BLOCK_META_RESPONSE_ID)]
    assert_server_holds_the_turn(geppetto_sim, turn)


async def test_a_404_about_something_else_is_not_taken_for_an_expired_interaction(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("again"))
    geppetto_sim.fail_next(404)  # the service's generic not-found text, naming no interaction
    with pytest.raises(NotFoundError):
        await eng.run_inference(turn)
    assert len(creates(geppetto_sim)) == 2, "no whole-Turn resend"


async def test_the_kill_switch_sends_every_request_stateless(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = engine(geppetto_sim)
    turn = await eng.run_inference(_start())
    monkeypatch.setenv("GEPPETTO_CHAINING", "off")
    turn.append(Block.user("again"))
    turn = await eng.run_inference(turn)
    assert "previous_interaction_id" not in creates(geppetto_sim)[-1]
    monkeypatch.setenv("GEPPETTO_CHAINING", "on")  # the stateless interaction was stored: it anchors
    anchor = last_interaction(turn)
    turn.append(Block.user("and on"))
    turn = await eng.run_inference(turn)
    assert creates(geppetto_sim)[-1]["previous_interaction_id"] == anchor
    assert_server_holds_the_turn(geppetto_sim, turn)


def test_tool_choice_and_generation_settings_follow_the_types() -> None:
    weather = {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {}}}
    turn = _start()
    bodies = []
    for choice, wire in (
        ("required", "any"),
        ("none", "none"),
        ("get_weather", {"allowed_tools": {"mode": "any", "tools": ["get_weather"]}}),
    ):
        eng = InteractionsEngine(
            "gemini-3-flash-preview", api_key="k", tools=[weather], tool_choice=choice, temperature=0.2,
            max_output_tokens=128, reasoning_effort="high", thinking_summaries="auto",
            builtin_tools=[{"type": "google_search"}],
        )  # fmt: skip
        body = eng.build_body(turn, eng.plan(turn))  # validated against the google-genai types by conftest
        assert body["generation_config"]["tool_choice"] == wire
        bodies.append(body)
    config = bodies[0]["generation_config"]
    assert (config["thinking_level"], config["max_output_tokens"], config["temperature"]) == ("high", 128, 0.2)
    assert [t["type"] for t in bodies[0]["tools"]] == ["function", "google_search"]
