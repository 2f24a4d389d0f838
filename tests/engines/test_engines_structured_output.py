"""Structured output on all four engines against the simulator, which honours and enforces each schema.

Every request the simulator received is validated with the official SDK's request types (and the OpenAI
ones also against the OpenAPI spec, inside the simulator).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
import pydantic
import pytest
from conformance_support import check_sent

from geppetto import BadRequestError, OutputValidationError, Session, output_config, output_of
from geppetto.events import EventTextDelta, with_sinks
from geppetto.output import BLOCK_META_OUTPUT, BLOCK_META_OUTPUT_ERRORS, STRUCTURED_OUTPUT
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry
from geppetto.turns import BLOCK_META_MIDDLEWARE, BlockKind, Turn
from sim_engines import PROVIDERS, engine


class City(pydantic.BaseModel):
    name: str
    population: int
    country: str | None = None
    kind: Literal["capital", "town"]


PROMPT = "Describe Paris, a capital of 2100000 people"


def sent(sim: Simulator) -> list[dict[str, Any]]:
    """The bodies of the inference requests, each checked against the provider SDK's request type."""
    bodies = []
    for r in sim.requests:
        if (
            r.method == "POST"
            and isinstance(r.body, dict)
            and ("input" in r.body or "messages" in r.body or "contents" in r.body)
        ):
            check_sent(r.path, r.body)
            bodies.append(r.body)
    return bodies


def native_schema(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    if provider == "openai-responses":
        fmt = body["text"]["format"]
        assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "City", True)
        return dict(fmt["schema"])
    if provider == "openai-chat":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        return dict(fmt["json_schema"]["schema"])
    if provider == "anthropic":
        assert body["output_config"]["format"]["type"] == "json_schema"
        return dict(body["output_config"]["format"]["schema"])
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    return dict(body["generationConfig"]["responseJsonSchema"])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_session_run_returns_the_validated_value_through_the_native_mechanism(
    geppetto_sim: Simulator, provider: str
) -> None:
    async with engine(geppetto_sim, provider) as eng:
        turn = await Session(eng).run(PROMPT, output=City)
    city = output_of(turn, City)
    assert city == City(name="Paris", population=2100000, country=city.country, kind="capital")
    (body,) = sent(geppetto_sim)
    schema = native_schema(provider, body)
    assert set(schema["properties"]) == set(City.model_fields)
    assert schema.get("additionalProperties") is (None if provider == "gemini" else False)
    assert BLOCK_META_OUTPUT.get(turn.blocks[-1].metadata)["population"] == 2100000


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_invalid_answer_is_retried_with_the_errors_told_to_the_model(
    geppetto_sim: Simulator, provider: str
) -> None:
    geppetto_sim.queue(Reply(text='{"name": "Paris", "kind": "village"}'))
    async with engine(geppetto_sim, provider) as eng:
        turn = await Session(eng).run(PROMPT, output=output_config(City, require_valid=True))
    assert output_of(turn, City).kind in ("capital", "town")  # the second answer matches
    retry = next(b for b in turn.blocks if BLOCK_META_MIDDLEWARE.get(b.metadata) == "structured_output")
    assert retry.kind is BlockKind.USER
    assert "- population: Field required" in retry.text and "- kind: Input should be 'capital' or 'town'" in retry.text
    first, second = sent(geppetto_sim)
    assert "population: Field required" in json.dumps(second) and "population: Field required" not in json.dumps(first)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retries_run_out_with_an_error_carrying_the_raw_text_and_the_session_stays_usable(
    geppetto_sim: Simulator, provider: str
) -> None:
    geppetto_sim.queue(*[Reply(text="not json") for _ in range(2)])
    async with engine(geppetto_sim, provider) as eng:
        session = Session(eng)
        with pytest.raises(OutputValidationError) as caught:
            await session.run(PROMPT, output=output_config(City, require_valid=True, max_retries=1))
        assert caught.value.text == "not json"
        assert caught.value.errors[0].startswith("the answer is not valid JSON")
        assert "after 2 attempts" in str(caught.value)
        assert caught.value.turn is not None and len(caught.value.turn.blocks) == 4  # user, bad, retry, bad
        assert session.latest is not None and not session.running
        again = await session.run("and now plain text")
        assert again.blocks[-1].text.startswith("You said: ")  # the next run asks for no schema
        assert STRUCTURED_OUTPUT.get(again.data) is None


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_without_require_valid_the_raw_text_and_errors_are_kept(geppetto_sim: Simulator, provider: str) -> None:
    geppetto_sim.queue(Reply(text='{"name": "Paris"}'))
    async with engine(geppetto_sim, provider) as eng:
        turn = await Session(eng).run(PROMPT, output=City)
    last = turn.blocks[-1]
    assert last.text == '{"name": "Paris"}'
    assert BLOCK_META_OUTPUT_ERRORS.get(last.metadata) == ["population: Field required", "kind: Field required"]
    with pytest.raises(OutputValidationError, match="population: Field required"):
        output_of(turn, City)
    assert len(sent(geppetto_sim)) == 1


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C and sunny in {city}"


class Weather(pydantic.BaseModel):
    city: str
    summary: str


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai-responses", "sim-1"),
        ("openai-chat", "sim-1"),
        ("anthropic", "claude-opus-4-6"),
        ("gemini", "gemini-3-pro-preview"),
    ],
)
async def test_the_answer_after_the_tool_loop_is_the_structured_one(
    geppetto_sim: Simulator, provider: str, model: str
) -> None:
    async with engine(geppetto_sim, provider, model=model) as eng:
        session = Session(eng, tools=ToolRegistry([get_weather]))
        turn = await session.run("What is the weather in Paris?", output=output_config(Weather, require_valid=True))
    kinds = [b.kind for b in turn.blocks]
    assert kinds == [BlockKind.USER, BlockKind.TOOL_CALL, BlockKind.TOOL_USE, BlockKind.LLM_TEXT]
    weather = output_of(turn, Weather)
    assert "18C and sunny in Paris" in weather.summary
    bodies = sent(geppetto_sim)
    assert len(bodies) == 2 and all("Weather" in json.dumps(b) for b in bodies)


async def test_gemini_before_3_asks_for_json_in_the_system_instruction_when_tools_are_offered(
    geppetto_sim: Simulator,
) -> None:
    async with engine(geppetto_sim, "gemini", model="gemini-2.5-flash") as eng:
        session = Session(eng, tools=ToolRegistry([get_weather]))
        turn = await session.run("What is the weather in Paris?", output=Weather)
    first = sent(geppetto_sim)[0]
    assert "responseMimeType" not in first.get("generationConfig", {})
    instruction = first["systemInstruction"]["parts"][-1]["text"]
    assert "JSON schema (named Weather)" in instruction and '"summary"' in instruction
    # The scripted model does not read instructions: its plain answer is recorded as not matching.
    assert BLOCK_META_OUTPUT_ERRORS.get(turn.blocks[-1].metadata)


async def test_the_simulator_refuses_json_with_function_calling_on_gemini_2(geppetto_sim: Simulator) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "description": "", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object"}},
    }
    async with httpx.AsyncClient(base_url=geppetto_sim.url) as client:
        reply = await client.post(
            "/v1beta/models/gemini-2.5-flash:generateContent", json=body, headers={"x-goog-api-key": "k"}
        )
    assert reply.status_code == 400
    assert (
        reply.json()["error"]["message"]
        == "Function calling with a response mime type: 'application/json' is unsupported"
    )


async def test_claude_models_without_native_output_answer_through_a_forced_tool(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim, "anthropic", model="claude-3-5-haiku-20241022") as eng:
        turn = await Session(eng).run(PROMPT, output=City)
    (body,) = sent(geppetto_sim)
    assert "output_config" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "City"}
    assert [t["name"] for t in body["tools"]] == ["City"]
    assert [b.kind for b in turn.blocks] == [BlockKind.USER, BlockKind.LLM_TEXT]  # the call became the answer
    assert output_of(turn, City).population == 2100000


async def test_claude_tool_mode_with_other_tools_forces_any_tool_and_ends_on_the_answer(
    geppetto_sim: Simulator,
) -> None:
    async with engine(geppetto_sim, "anthropic", model="claude-sonnet-4-0") as eng:
        session = Session(eng, tools=ToolRegistry([get_weather]))
        turn = await session.run("What is the weather in Paris?", output=output_config(Weather, name="final_answer"))
    bodies = sent(geppetto_sim)
    assert [b["tool_choice"] for b in bodies] == [{"type": "any"}, {"type": "any"}]
    assert [b.kind for b in turn.blocks][:3] == [BlockKind.USER, BlockKind.TOOL_CALL, BlockKind.TOOL_USE]
    assert [b.kind for b in turn.blocks][-1] is BlockKind.LLM_TEXT
    assert "18C" in output_of(turn, Weather).summary


@pytest.mark.parametrize(
    ("model", "field"), [("gemini-2.0-flash", "responseSchema"), ("gemini-2.5-pro", "responseJsonSchema")]
)
async def test_gemini_picks_the_schema_field_its_model_takes(geppetto_sim: Simulator, model: str, field: str) -> None:
    async with engine(geppetto_sim, "gemini", model=model) as eng:
        turn = await Session(eng).run(PROMPT, output=City)
    (body,) = sent(geppetto_sim)
    config = body["generationConfig"]
    assert field in config and {"responseSchema", "responseJsonSchema"} - {field} - set(config)
    if field == "responseSchema":
        assert config["responseSchema"]["type"] == "OBJECT"
        assert config["responseSchema"]["properties"]["country"]["nullable"] is True
    assert output_of(turn, City).kind == "capital"


@pytest.mark.parametrize("mode", ["chained", "conversation"])
async def test_retries_and_later_runs_keep_chaining_on_responses(geppetto_sim: Simulator, mode: str) -> None:
    geppetto_sim.queue(Reply(text='{"name": "Paris"}'))
    async with engine(geppetto_sim, "openai-responses", mode=mode) as eng:
        session = Session(eng)
        await session.run(PROMPT, output=output_config(City, require_valid=True))
        await session.run("Now Lyon, a town of 500000 people", output=City)
    bodies = sent(geppetto_sim)
    assert len(bodies) == 3
    selector = "previous_response_id" if mode == "chained" else "conversation"
    assert all(selector in b for b in bodies[1:])
    assert [len(b["input"]) for b in bodies[1:]] == [1, 1]  # only the new user block each time


async def test_streamed_json_arrives_as_text_deltas_and_is_parsed_once(geppetto_sim: Simulator) -> None:
    deltas: list[str] = []
    async with engine(geppetto_sim, "openai-chat") as eng:
        with with_sinks(lambda e: deltas.append(e.delta) if isinstance(e, EventTextDelta) else None):
            turn = await Session(eng).run(PROMPT, output=City)
    assert "".join(deltas) == turn.blocks[-1].text
    assert json.loads("".join(deltas)) == BLOCK_META_OUTPUT.get(turn.blocks[-1].metadata)


async def test_middleware_sees_and_changes_the_config_at_the_engine_level(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim, "openai-responses", mode="stateless") as eng:
        turn = Turn()
        from geppetto.turns import Block

        turn.append(Block.user(PROMPT))
        STRUCTURED_OUTPUT.set(turn.data, output_config(City, name="city_answer"))
        out = await eng.run_inference(turn)
    assert sent(geppetto_sim)[0]["text"]["format"]["name"] == "city_answer"
    assert output_of(out, City).name == "Paris"


async def test_a_json_schema_dict_works_like_a_type(geppetto_sim: Simulator) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "title": "count"}
    async with engine(geppetto_sim, "openai-responses") as eng:
        turn = await Session(eng).run("Count to 7", output=schema)
    assert output_of(turn) == {"n": 7}
    assert sent(geppetto_sim)[0]["text"]["format"]["name"] == "count"


async def test_the_simulator_refuses_a_schema_strict_mode_refuses(geppetto_sim: Simulator) -> None:
    loose = {"type": "json_schema", "name": "x", "strict": True, "schema": {"type": "object", "properties": {}}}
    async with engine(geppetto_sim, "openai-responses", mode="stateless", text_format=loose) as eng:
        turn = Turn()
        from geppetto.turns import Block

        turn.append(Block.user("hi"))
        with pytest.raises(BadRequestError, match="'additionalProperties' is required to be supplied and to be false"):
            await eng.run_inference(turn)


async def test_the_simulator_refuses_an_open_object_in_claude_output_config(geppetto_sim: Simulator) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}},
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(base_url=geppetto_sim.url) as client:
        reply = await client.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 400
    assert "'additionalProperties' must be explicitly set to false" in reply.json()["error"]["message"]


async def test_claude_thinking_with_tool_mode_output_digests_the_schema_and_replays_the_reasoning(
    geppetto_sim: Simulator,
) -> None:
    # The forced tool's schema is held encoded once (EncodedJSON): the prefix guard's digest of the tools
    # must read it as the dict it is, or the answer's thinking cannot be stamped (TypeError after the answer).
    city = {"name": "Paris", "population": 2100000, "kind": "capital"}
    town = {"name": "Lyon", "population": 500000, "kind": "town"}
    geppetto_sim.queue(Reply(reasoning="Paris.", tool_calls=[ToolCall("City", city)]))
    geppetto_sim.queue(Reply(reasoning="Lyon.", tool_calls=[ToolCall("City", town)]))
    async with engine(geppetto_sim, "anthropic", model="claude-3-7-sonnet-latest", thinking_budget=2048) as eng:
        session = Session(eng)
        first = await session.run(PROMPT, output=City)
        second = await session.run("And Lyon, a town of 500000 people", output=City)
    assert output_of(first, City).population == 2100000
    assert output_of(second, City).kind == "town"
    bodies = sent(geppetto_sim)
    assert [b["tool_choice"] for b in bodies] == [{"type": "auto"}, {"type": "auto"}]  # thinking forbids forcing
    replayed = [c for m in bodies[1]["messages"] for c in m["content"] if c["type"] == "thinking"]
    assert [c["thinking"] for c in replayed] == ["Paris."]  # stamped after the first answer, so kept
