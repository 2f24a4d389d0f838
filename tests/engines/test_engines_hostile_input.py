"""Hostile or broken input from a server, a tool or the caller, on every engine over real loopback HTTP:
JSON nested 10,000 deep (as an event, and as a tool call's arguments), an output schema that refers to
itself, nests 10,000 deep or names a URL or a file, one event past the transport's size bound, a stream
that stalls past the read timeout, and NaN or infinity in a tool result. Each ends in a clear error (or a
tool error the model reads), never a crash, a hang or invalid JSON on the wire, and the session runs its
next prompt."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import geppetto as gp
from geppetto._json import MAX_JSON_DEPTH, JSONTooDeep, dumps, parse_json
from geppetto.providers._http import HttpTransport
from geppetto.providers._http_errors import anthropic_error_info, gemini_error_info, openai_error_info
from geppetto.providers._retry import RetryPolicy
from geppetto.providers._sse import SSEDecoder
from geppetto.session.stores import open_store
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import serialize_result
from geppetto.turns import result_text

DEEP = '{"x": ' + "[" * 10_000 + "]" * 10_000 + "}"
NO_RETRY = RetryPolicy(max_retries=0)


def _engine(provider: str, sim: Simulator, **kw: Any) -> Any:
    return sim.engine(provider, retry=NO_RETRY, **kw)


def _transport(provider: str, sim: Simulator, **kw: Any) -> HttpTransport:
    """A transport of the engine's own shape (base URL, error parser), with options the test sets."""
    if provider.startswith("openai"):
        return HttpTransport(sim.openai_url, provider="openai", error_parser=openai_error_info, retry=NO_RETRY, **kw)
    parser = anthropic_error_info if provider == "anthropic" else gemini_error_info
    return HttpTransport(sim.url, provider=provider, error_parser=parser, retry=NO_RETRY, **kw)


PROVIDERS = ["openai-responses", "openai-chat", "anthropic", "gemini"]


async def _next_prompt_works(session: gp.Session, sim: Simulator) -> None:
    sim.queue(Reply(text="Still here."))
    out = await session.run("Again?")
    assert out.blocks[-1].text == "Still here."


# -- JSON nested too deep ---------------------------------------------------------------------------


def test_parse_json_refuses_deep_nesting_with_its_depth() -> None:
    with pytest.raises(JSONTooDeep, match=f"JSON nested 10001 levels deep; the limit is {MAX_JSON_DEPTH}"):
        parse_json(DEEP)
    assert parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    assert parse_json('{"a": "[[[[\\"["}') == {"a": '[[[["['}  # brackets in strings are no nesting
    assert parse_json('"\\ud800"') == "\ud800"  # what pydantic-core refuses for other reasons still parses


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_event_nested_too_deep_is_a_stream_error_naming_the_depth(
    provider: str, geppetto_sim: Simulator
) -> None:
    async with _engine(provider, geppetto_sim) as engine:
        session = gp.Session(engine)
        geppetto_sim.fail_next(deep_after=0)
        with pytest.raises(gp.StreamError, match=r"nested 10001 levels deep; the limit is 200"):
            await session.run("Hello?")
        assert not session.running
        await _next_prompt_works(session, geppetto_sim)


@pytest.mark.parametrize(
    "provider", ["openai-responses", "openai-chat"]
)  # arguments are a string on their wire; Claude's
# and Gemini's are an object inside the event, so arguments that deep are an event that deep (above)
async def test_tool_arguments_nested_too_deep_are_a_tool_error_the_model_reads(
    provider: str, geppetto_sim: Simulator, tmp_path: Path
) -> None:
    calls: list[str] = []

    def lookup(x: list[Any]) -> str:
        """Look something up."""
        calls.append("ran")
        return "found"

    store = open_store(str(tmp_path / "store.db"))
    try:
        async with _engine(provider, geppetto_sim) as engine:
            session = gp.Session(engine, tools=[lookup], store=store)
            geppetto_sim.queue(Reply(tool_calls=[ToolCall("lookup", DEEP, call_id="call_1")]), Reply(text="Done."))
            out = await session.run("Look it up.")
            answer = next(b for b in out.blocks if b.kind is gp.BlockKind.TOOL_USE)
            assert calls == []
            assert "refused: JSON nested 10001 levels deep; the limit is 200" in str(answer.payload["error"])
            assert out.blocks[-1].text == "Done."
            assert len(geppetto_sim.requests) == 2  # the error went back to the model, which answered
            saved = await store.load_session(session.session_id)
            assert saved[-1].blocks[-1].text == "Done."
            for name in ("turn.json", "turn.yaml"):
                gp.save_turn(tmp_path / name, out)
                assert gp.load_turn(tmp_path / name).blocks == out.blocks
            await _next_prompt_works(session, geppetto_sim)
    finally:
        store.close()


async def test_any_engine_s_too_deep_arguments_reach_the_tool_loop_as_a_tool_error() -> None:
    def lookup(x: list[Any]) -> str:
        """Look something up."""
        return "found"

    engine = gp.ScriptedEngine([[gp.Block.tool_call("call_1", "lookup", DEEP)], [gp.Block.llm_text("Done.")]])
    out = await gp.Session(engine, tools=[lookup]).run("Look it up.")
    answer = next(b for b in out.blocks if b.kind is gp.BlockKind.TOOL_USE)
    assert answer.payload["error"] == (
        "arguments for lookup are refused: JSON nested 10001 levels deep; the limit is 200; send a flatter JSON object"
    )
    assert out.blocks[-1].text == "Done."


# -- hostile output schemas -------------------------------------------------------------------------


def _schema_nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


HOSTILE_SCHEMAS = {
    "refers to itself": ({"$ref": "#"}, "refers back to itself through $ref '#'"),
    "nested 10,000 deep": (_schema_nested(5_000), "nests objects and arrays thousands of levels deep"),
    "an http reference": (
        {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/a.json"}}},
        "points outside the schema, and geppetto never fetches schemas",
    ),
    "a file reference": (
        {"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}},
        "points outside the schema, and geppetto never fetches schemas",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_SCHEMAS))
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_hostile_output_schema_is_refused_before_any_request(
    provider: str, case: str, geppetto_sim: Simulator
) -> None:
    schema, problem = HOSTILE_SCHEMAS[case]
    async with _engine(provider, geppetto_sim) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.ConfigurationError, match=f"^structured output: .*{re.escape(problem)}"):
            await session.run("Describe it.", output=schema)
        assert geppetto_sim.requests == []
        assert not session.running
        await _next_prompt_works(session, geppetto_sim)


# -- one event past the size bound ------------------------------------------------------------------


def test_the_decoder_joins_a_long_line_once_and_bounds_an_event() -> None:
    line = b'data: "' + b"x" * (3 << 20) + b'"\n\n'
    decoder = SSEDecoder()
    events = [e for i in range(0, len(line), 4096) for e in decoder.feed(line[i : i + 4096])]
    assert [len(e.data) for e in events] == [(3 << 20) + 2]
    bounded = SSEDecoder(max_event_size=1 << 20)
    with pytest.raises(ValueError, match=r"one event grew past 1,048,576 characters \(max_event_size\)"):
        for i in range(0, len(line), 4096):
            bounded.feed(line[i : i + 4096])
    many_lines = SSEDecoder(max_event_size=100)
    with pytest.raises(ValueError, match="grew past 100 characters"):
        many_lines.feed(b"data: " + b"y" * 60 + b"\ndata: " + b"y" * 60 + b"\n")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_event_past_the_bound_is_a_stream_error_naming_it(provider: str, geppetto_sim: Simulator) -> None:
    transport = _transport(provider, geppetto_sim, max_event_size=1 << 20)
    async with transport, _engine(provider, geppetto_sim, http=transport) as engine:
        session = gp.Session(engine)
        geppetto_sim.fail_next(huge_after=0, huge_bytes=2 << 20)
        with pytest.raises(gp.StreamError, match=r"grew past 1,048,576 characters.*HttpTransport\(max_event_size="):
            await session.run("Hello?")
        await _next_prompt_works(session, geppetto_sim)


# -- a stall past the read timeout ------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stalled_stream_says_it_timed_out_after_how_long_and_what_to_raise(
    provider: str, geppetto_sim: Simulator
) -> None:
    async with _engine(provider, geppetto_sim, timeout=httpx.Timeout(10.0, read=3.0)) as engine:
        session = gp.Session(engine)
        geppetto_sim.fail_next(stall_after=1, stall_seconds=30)
        with pytest.raises(gp.StreamError) as broke:
            await session.run("Hello?")
        message = str(broke.value)
        assert "broke off after" in message
        assert "no data for 3 s (read timeout); to wait longer pass the engine timeout=<seconds>" in message
        await _next_prompt_works(session, geppetto_sim)


# -- NaN and infinity -------------------------------------------------------------------------------


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_nan_and_infinity_are_written_as_strings() -> None:
    value = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": "NaN"}
    assert _strict(dumps(value)) == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": "NaN"}
    assert _strict(serialize_result(value)) == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": "NaN"}
    assert _strict(result_text(value)) == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": "NaN"}
    assert dumps({"a": 1.0}) == '{"a": 1.0}'


def _tool_use_with(result: Any) -> Callable[[gp.Turn], gp.Turn]:
    def add(turn: gp.Turn) -> gp.Turn:
        turn.append(gp.Block.tool_call("call_1", "measure", {}))
        turn.append(gp.Block.tool_use("call_1", result))
        return turn

    return add


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_nan_in_a_tool_result_never_makes_invalid_json(provider: str, geppetto_sim: Simulator) -> None:
    def measure() -> dict[str, float]:
        """Measure."""
        return {"mean": math.nan, "max": math.inf}

    async with _engine(provider, geppetto_sim) as engine:
        session = gp.Session(engine, tools=[measure])
        geppetto_sim.queue(Reply(tool_calls=[ToolCall("measure", {}, call_id="call_1")]), Reply(text="Measured."))
        out = await session.run("Measure.")
        assert out.blocks[-1].text == "Measured."
        # A tool_use a middleware or a caller wrote with raw floats is sent as valid JSON too.
        turn = _tool_use_with({"mean": math.nan})(gp.Turn(blocks=[gp.Block.user("Measure.")]))
        geppetto_sim.queue(Reply(text="Measured again."))
        again = await engine.run_inference(turn)
        assert again.blocks[-1].text == "Measured again."
    # The simulator refuses NaN and Infinity as the services do, so four accepted requests were valid JSON.
    assert len(geppetto_sim.requests) == 3
    assert all("NaN" in json.dumps(r.body) for r in geppetto_sim.requests[1:])  # it reached the model, as text


async def test_tool_arguments_given_in_code_nested_too_deep_are_a_clear_error() -> None:
    deep: dict[str, Any] = {}
    for _ in range(10_000):
        deep = {"x": deep}

    def lookup(x: Any) -> str:
        """Look something up."""
        return "found"

    engine = gp.ScriptedEngine([[gp.Block.tool_call("call_1", "lookup", deep)], [gp.Block.llm_text("Done.")]])
    session = gp.Session(engine, tools=[lookup])
    with pytest.raises(gp.MetadataTypeError) as refused:
        await session.run("Look it up.")
    assert str(refused.value) == (
        "a value is nested too deeply; a turn nests lists and mappings a few hundred levels at most; "
        "flatten it (it cannot be copied)"
    )
    assert not session.running
    assert (await session.run("Again?")).blocks[-1].text == "Done."  # the session runs the next step
