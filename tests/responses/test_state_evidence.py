"""Whether a Responses server keeps state, judged from evidence that holds on real servers (issue 43).

Against the simulator's quirks, alone and combined as third-party servers combine them: a 6-prompt session
with a tool loop chains every request after the first where the server keeps state (no request answered
twice, the model's input equal to the Turn every time, checked at the simulator), and falls back with
``server_ignores_state`` where it forgets, with the final answer right in both cases.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from responses_support import engine, normalize, settle, wire_before_last_response

import geppetto as gp
from geppetto.engine import Handler
from geppetto.events import EventFinal, EventTextDelta
from geppetto.middleware import with_middleware
from geppetto.providers._stateful import ResponsesMetrics
from geppetto.providers.openai_responses import ResponsesEngine, Verdict, endpoint_verdicts
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.turns import BlockKind, Turn

PROMPTS = 6
REQUESTS = 2 * PROMPTS - 1


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


KEEPING = [
    (echo, *extra)
    for echo in ("no-echo", "null-echo", "foreign-echo")
    for extra in (
        (),
        ("no-usage",),
        ("no-item-events",),
        ("done-marker",),
        ("no-usage", "no-item-events", "done-marker"),
    )
]
"""Servers that keep state but do not echo it: each echo quirk, alone and with the stream quirks."""

FORGETTING = [("forgets",), ("forgets", "no-echo"), ("forgets", "null-echo"), ("forgets", "foreign-echo")]
"""Servers that accept previous_response_id and answer from the new input alone, with each echo quirk."""


@pytest.fixture
def quirky() -> Iterator[Simulator]:
    """A simulator of its own (the quirks are set per test); the session's shared one stays faithful."""
    with serve() as sim:
        yield sim


def _checker(sim: Simulator, checked: list[int]) -> Any:
    """Middleware right above the engine: after every call the context the model read equals the Turn."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            turn = await next_handler(turn)
            rid, wire = wire_before_last_response(turn)
            settle(sim, rid)
            assert normalize(sim.context_items(rid)) == wire
            checked.append(len(turn.blocks))
            return turn

        return handler

    return middleware


def _posts(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests if r.method == "POST" and r.path == "/v1/responses"]


def _extra(sim: Simulator) -> list[str]:
    """The requests that are not an answer: the settling ones."""
    return [f"{r.method} {r.path}" for r in sim.requests if not (r.method == "POST" and r.path == "/v1/responses")]


async def _session(
    sim: Simulator, eng: ResponsesEngine, *, tool_first: bool = False, forgotten: int | None = None, **kw: Any
) -> tuple[Turn, list[int], list[str]]:
    """Six prompts: the first answered in text (unless ``tool_first``), the others by a tool call and its
    text; prompt ``forgotten`` is first answered by a server that forgot (a reply no Turn may hold)."""
    checked: list[int] = []
    texts: list[str] = []

    def sink(event: Any) -> None:
        if isinstance(event, EventTextDelta):
            texts.append(event.delta)

    # the check sits right above the engine, below the tool loop: it sees every request
    session = gp.Session(with_middleware(eng, _checker(sim, checked)), tools=[get_weather], sinks=[sink], **kw)
    out: Turn | None = None
    for i in range(PROMPTS):
        if i == forgotten:
            sim.queue(Reply(text="FORGOTTEN ANSWER"))
        if i or tool_first:
            sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]))
        sim.queue(Reply(text=f"It is sunny {i}."))
        out = await session.run(f"weather in city{i}?")
    assert out is not None
    return out, checked, texts


def _answers(turn: Turn) -> list[str]:
    return [b.text for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]


@pytest.mark.parametrize("quirks", KEEPING, ids=",".join)
async def test_a_server_that_keeps_state_without_echoing_it_is_chained_every_request(
    quirky: Simulator, quirks: tuple[str, ...]
) -> None:
    sim = quirky
    sim.quirks = list(quirks)
    metrics = ResponsesMetrics()
    eng = engine(sim, metrics=metrics)
    out, checked, texts = await _session(sim, eng)
    posts = _posts(sim)
    # every request answered once, every one after the first chained, the model's input the Turn each time
    assert len(posts) == REQUESTS and len(checked) == REQUESTS
    assert "previous_response_id" not in posts[0].body
    assert all(p.body.get("previous_response_id") for p in posts[1:])
    assert eng.server_ignores_state is False
    assert metrics.counters["fallback"] == 0
    # at most one request settled what the answers did not show, for the whole session
    assert len(_extra(sim)) <= 1
    if "no-usage" not in quirks:
        # the usage or the server's count decided, never "unknown"
        verdict = eng.endpoint_verdict
        assert verdict is not None and verdict.previous_response_id == "kept"
        assert verdict.evidence in ("usage", "input_tokens")
    else:
        verdict = eng.endpoint_verdict
        assert verdict is not None and verdict.previous_response_id in ("kept", "unknown")
        # without usage, the answer read back is the one request that could settle it
        assert len(_extra(sim)) == 1 and _extra(sim)[0].startswith("GET /v1/responses/resp_")
    assert _answers(out) == [f"It is sunny {i}." for i in range(PROMPTS)]
    # the text the sinks saw is the session's answers, each once (held deltas were released, none twice)
    assert "".join(texts) == "".join(_answers(out))


@pytest.mark.parametrize("quirks", FORGETTING, ids=",".join)
async def test_a_server_that_forgets_is_caught_before_its_answer_reaches_the_turn(
    quirky: Simulator, quirks: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    sim = quirky
    sim.quirks = list(quirks)
    metrics = ResponsesMetrics()
    eng = engine(sim, metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="geppetto.providers.openai_responses"):
        out, checked, texts = await _session(sim, eng, forgotten=1)
    posts = _posts(sim)
    # the one chained request was answered from the tool result alone: caught, the whole Turn sent again,
    # and every later request stateless
    assert "previous_response_id" in posts[1].body
    assert not any("previous_response_id" in p.body for p in posts[2:])
    assert len(posts) == REQUESTS + 1 and len(checked) == REQUESTS
    assert metrics.counters["fallback"] == 1 and metrics.counters["fallback:server_ignores_state"] == 1
    assert eng.server_ignores_state is True
    verdict = eng.endpoint_verdict
    assert verdict is not None and verdict.previous_response_id == "ignored"
    assert verdict.evidence in ("usage", "input_tokens")
    assert "ignores server-side state" in caplog.text and f"evidence: {verdict.evidence}" in caplog.text
    assert len(_extra(sim)) <= 1
    assert _answers(out) == [f"It is sunny {i}." for i in range(PROMPTS)]
    # the forgotten answer reached neither the Turn nor the sinks
    assert "".join(texts) == "".join(_answers(out)) and "FORGOTTEN" not in "".join(texts)
    calls = [b for b in out.blocks if b.kind is BlockKind.TOOL_CALL]
    assert len(calls) == PROMPTS - 1


@pytest.mark.parametrize("quirks", FORGETTING, ids=",".join)
async def test_a_forgetting_server_that_refuses_the_tool_result_is_caught_too(
    quirky: Simulator, quirks: tuple[str, ...]
) -> None:
    # the chained request after a tool call sends only the tool's result: a server that forgot the call
    # refuses it (400 "No tool call found ..."), which shows it answers from the new input alone
    sim = quirky
    sim.quirks = list(quirks)
    metrics = ResponsesMetrics()
    eng = engine(sim, metrics=metrics)
    out, checked, _ = await _session(sim, eng, tool_first=True)
    posts = _posts(sim)
    assert "previous_response_id" in posts[1].body and posts[1].body["input"][0]["type"] == "function_call_output"
    assert not any("previous_response_id" in p.body for p in posts[2:])
    assert len(posts) == 2 * PROMPTS + 1 and len(checked) == 2 * PROMPTS
    assert metrics.counters["fallback:server_ignores_state"] == 1
    verdict = eng.endpoint_verdict
    assert verdict is not None and verdict.ignored and verdict.evidence == "error"
    assert _answers(out) == [f"It is sunny {i}." for i in range(PROMPTS)]


async def test_a_forgotten_text_answer_is_never_streamed(quirky: Simulator) -> None:
    sim = quirky
    sim.quirks = ["forgets", "no-echo"]
    eng = engine(sim)
    texts: list[str] = []
    finals: list[EventFinal] = []

    def sink(event: Any) -> None:
        if isinstance(event, EventTextDelta):
            texts.append(event.delta)
        elif isinstance(event, EventFinal):
            finals.append(event)

    session = gp.Session(eng, sinks=[sink])
    sim.queue(Reply(text="A long first answer that the model gives to the first question."))
    await session.run("Remember the number seven, please, and tell me something long about it.")
    sim.queue(Reply(text="FORGOTTEN"), Reply(text="Seven."))
    out = await session.run("Which number?")
    assert _answers(out)[-1] == "Seven."
    assert "FORGOTTEN" not in "".join(texts)
    extra = finals[-1].metadata.extra
    assert extra["responses.fallback"] == "server_ignores_state"
    assert extra["responses.evidence"].startswith("ignored (usage: ")


async def test_the_evidence_that_decided_reaches_the_final_event_and_the_log(
    quirky: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = quirky
    sim.quirks = ["null-echo"]
    eng = engine(sim)
    finals: list[EventFinal] = []
    session = gp.Session(eng, sinks=[lambda e: finals.append(e) if isinstance(e, EventFinal) else None])
    sim.queue(Reply(text="One, a fairly long answer to the first question that was asked here."))
    await session.run("q1")
    sim.queue(Reply(text="Two."))
    with caplog.at_level(logging.INFO, logger="geppetto.providers.openai_responses"):
        await session.run("q2")
    evidence = finals[-1].metadata.extra["responses.evidence"]
    assert evidence.startswith("kept (usage: a null echo; ") and "input tokens" in evidence
    assert "keeps state? kept (usage: a null echo" in caplog.text
    assert finals[-1].metadata.extra["responses.fallback"] == ""
    # an echo proves it: nothing is added to the final event
    assert "responses.evidence" not in finals[0].metadata.extra


async def test_an_echoing_server_costs_no_extra_request(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim)
    _, checked, _ = await _session(sim, eng)
    assert _extra(sim) == [] and len(_posts(sim)) == len(checked) == REQUESTS
    verdict = eng.endpoint_verdict
    assert verdict is not None and verdict.echo and verdict.evidence == "echo"


async def test_the_settling_request_is_made_once_per_endpoint_not_per_engine(quirky: Simulator) -> None:
    sim = quirky
    sim.quirks = ["no-echo", "no-usage"]
    for _ in range(2):
        eng = engine(sim)
        sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
        session = gp.Session(eng)
        for prompt in ("a", "b", "c"):
            await session.run(prompt)
    gets = [r for r in sim.requests if r.method == "GET"]
    assert len(gets) == 1  # the second engine of the same endpoint knew the verdict
    assert all(p.body.get("previous_response_id") for p in _posts(sim)[1:3])


async def test_a_seeded_verdict_is_used_without_evidence(quirky: Simulator) -> None:
    sim = quirky
    sim.quirks = ["forgets"]
    eng = engine(sim, endpoint_verdict=Verdict("ignored", evidence="probe", detail="geppetto probe"))
    assert eng.server_ignores_state is True
    sim.queue(Reply(text="One."), Reply(text="Two."))
    session = gp.Session(eng)
    await session.run("a")
    out = await session.run("b")
    assert not any("previous_response_id" in p.body for p in _posts(sim))
    assert _answers(out) == ["One.", "Two."] and _extra(sim) == []
    # seeding "kept" on a no-usage server spares the settling request and the held deltas
    other = engine(sim, endpoint_verdict=Verdict("kept", evidence="probe"))
    sim.quirks = ["no-echo", "no-usage"]
    before = len(sim.requests)
    sim.queue(Reply(text="One."), Reply(text="Two."))
    session = gp.Session(other)
    await session.run("a")
    await session.run("b")
    assert [f"{r.method} {r.path}" for r in sim.requests[before:]] == ["POST /v1/responses"] * 2


def test_a_verdict_names_the_valid_values() -> None:
    with pytest.raises(gp.ConfigurationError, match="use one of kept, ignored, rejected, unknown"):
        Verdict("maybe")
    with pytest.raises(gp.ConfigurationError, match="unknown evidence 'guess'"):
        Verdict("kept", evidence="guess")
    with pytest.raises(gp.ConfigurationError, match=r"endpoint_verdict= takes a .*Verdict"):
        ResponsesEngine("m", api_key="k", base_url="http://127.0.0.1:9/v1", endpoint_verdict="kept")  # type: ignore[arg-type]
    v = Verdict("kept", echo=False, conversations=True, evidence="usage", detail="d")
    assert Verdict.from_dict(json.loads(json.dumps(v.to_dict()))) == v


async def test_the_first_request_after_a_memory_clear_learns_again(quirky: Simulator) -> None:
    sim = quirky
    sim.quirks = ["no-echo"]
    eng = engine(sim)
    sim.queue(Reply(text="One, with a few more words in it than the question had."), Reply(text="Two."))
    session = gp.Session(eng)
    await session.run("a")
    await session.run("b")
    assert eng.endpoint_verdict is not None and eng.endpoint_verdict.kept
    endpoint_verdicts.clear()
    assert eng.endpoint_verdict is None
    eng.endpoint_verdict = Verdict("ignored", evidence="probe")
    assert eng.server_ignores_state is True
    eng.endpoint_verdict = None
    assert eng.server_ignores_state is False and eng.endpoint_verdict is None
