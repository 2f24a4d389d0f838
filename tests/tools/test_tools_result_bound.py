"""One huge tool result: cut to ``max_result_chars`` with a line telling the model so, and when the provider
still refuses a request as too large (413), the error names the fix and keeps the tool results."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import geppetto as gp
from geppetto.providers._retry import RetryPolicy
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import DEFAULT_MAX_RESULT_CHARS
from geppetto.tools._executor import bound_result

NO_RETRY = RetryPolicy(max_retries=0)
BIG = 60_000


def dump() -> str:
    """Dump the whole database."""
    return "x" * BIG


def test_a_long_result_is_cut_with_a_line_saying_how_much() -> None:
    assert bound_result("abc", 3) == "abc"
    assert bound_result("abc", None) == "abc"
    cut = bound_result("abcdef", 4)
    assert cut == (
        "abcd\n[truncated: the tool returned 6 characters and only the first 4 are shown; ask for less, "
        "e.g. a narrower query or a page of the data]"
    )
    assert DEFAULT_MAX_RESULT_CHARS == 100_000


async def test_the_tool_loop_bounds_results_it_sends() -> None:
    engine = gp.ScriptedEngine([[gp.Block.tool_call("c1", "dump", {})], [gp.Block.llm_text("Done.")]])
    session = gp.Session(engine, tools=[dump], tool_loop_options={"max_result_chars": 1000})
    out = await session.run("Dump it.")
    result = next(b for b in out.blocks if b.kind is gp.BlockKind.TOOL_USE).payload["result"]
    assert result.startswith("x" * 1000 + "\n[truncated: the tool returned 60,000 characters")
    assert len(engine.turns[-1].blocks[-1].payload["result"]) < 1200  # what the model was sent


@pytest.fixture(scope="module")
def small_sim() -> Iterator[Simulator]:
    with serve(max_body=30_000) as sim:  # a server that refuses requests over 30 kB, as services refuse theirs
        yield sim


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini"])
async def test_a_413_names_the_bound_and_keeps_the_tool_results(provider: str, small_sim: Simulator) -> None:
    small_sim.reset()
    async with small_sim.engine(provider, retry=NO_RETRY) as engine:
        session = gp.Session(engine, tools=[dump], tool_loop_options={"max_result_chars": None})
        small_sim.queue(Reply(tool_calls=[ToolCall("dump", {}, call_id="call_1")]), Reply(text="Done."))
        with pytest.raises(gp.BadRequestError) as err:
            await session.run("Dump it.")
        assert err.value.status == 413
        assert "tool_loop(max_result_chars=...)" in str(err.value)
        kept = err.value.turn
        assert kept is not None
        assert [b.kind for b in kept.blocks][-2:] == [gp.BlockKind.TOOL_CALL, gp.BlockKind.TOOL_USE]
        assert len(kept.blocks[-1].payload["result"]) == BIG

        small_sim.reset()  # the refused request left its reply queued
        bounded = gp.Session(engine, tools=[dump], tool_loop_options={"max_result_chars": 10_000})
        small_sim.queue(Reply(tool_calls=[ToolCall("dump", {}, call_id="call_2")]), Reply(text="Done."))
        out = await bounded.run("Dump it.")
        assert out.blocks[-1].text == "Done."
        assert len(small_sim.requests) == 2  # the tool ran and its cut result was accepted
