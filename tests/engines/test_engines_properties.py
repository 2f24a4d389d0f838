"""Invariants of the Claude and Gemini dialects over random turns (hypothesis).

Whatever blocks a turn holds, in any order and from any provider: roles alternate, no message is
empty, system text goes only to the system field, tool results open their message, and every tool call
and result of the turn is sent exactly once.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto.providers.anthropic import build_messages as claude_messages
from geppetto.providers.gemini import build_contents
from geppetto.providers.openai_chat import build_messages as chat_messages
from geppetto.turns import BLOCK_META_PROVIDER, PAYLOAD_THOUGHT_SIGNATURE, Block, Turn

PROVIDERS = st.sampled_from(["openai", "openai_chat", "anthropic", "gemini"])
TEXT = st.text(alphabet="abc xyz", max_size=8)


@st.composite
def blocks(draw: Any) -> Block:
    n = draw(st.integers(0, 5))
    kind = draw(st.sampled_from(["system", "user", "llm_text", "tool_call", "tool_use", "reasoning"]))
    if kind == "system":
        block = Block.system(draw(TEXT))
    elif kind == "user":
        block = Block.user(draw(TEXT))
    elif kind == "llm_text":
        block = Block.llm_text(draw(TEXT))
    elif kind == "tool_call":
        block = Block.tool_call(f"call_{n}", "tool", {"n": n})
    elif kind == "tool_use":
        block = Block.tool_use(f"call_{n}", draw(TEXT))
    else:
        block = Block.reasoning(
            draw(TEXT),
            signature=draw(st.one_of(st.none(), st.just("sig"))),
            encrypted_content=draw(st.one_of(st.none(), st.just("gAAAA"))),
        )
        if draw(st.booleans()):
            block.payload[PAYLOAD_THOUGHT_SIGNATURE] = "tsig"
    BLOCK_META_PROVIDER.set(block.metadata, draw(PROVIDERS))
    return block


def make_turn(items: list[Block]) -> Turn:
    turn = Turn()
    turn.extend(items)
    return turn


def count(turn: Turn, kind: str) -> int:
    return sum(1 for b in turn.blocks if b.kind.value == kind)


@settings(max_examples=200, deadline=None)
@given(st.lists(blocks(), max_size=14))
def test_claude_messages_alternate_and_keep_every_call_and_result(items: list[Block]) -> None:
    turn = make_turn(items)
    system, messages = claude_messages(turn)
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in pairwise(roles))
    assert all(m["content"] for m in messages)
    assert len(system) == sum(1 for b in turn.blocks if b.kind.value == "system" and b.text)
    content = [c for m in messages for c in m["content"]]
    assert sum(c["type"] == "tool_use" for c in content) == count(turn, "tool_call")
    assert sum(c["type"] == "tool_result" for c in content) == count(turn, "tool_use")
    for m in messages:
        types = [c["type"] for c in m["content"]]
        assert types == sorted(types, key=lambda t: t != "tool_result")
    thinking = [c for c in content if c["type"] == "thinking"]
    assert all(c["signature"] for c in thinking)


@settings(max_examples=200, deadline=None)
@given(st.lists(blocks(), max_size=14))
def test_gemini_contents_alternate_and_name_every_response(items: list[Block]) -> None:
    turn = make_turn(items)
    system, contents = build_contents(turn)
    roles = [c["role"] for c in contents]
    assert all(a != b for a, b in pairwise(roles))
    assert all(c["parts"] for c in contents)
    assert system == [{"text": b.text} for b in turn.blocks if b.kind.value == "system" and b.text]
    parts = [p for c in contents for p in c["parts"]]
    assert sum("functionCall" in p for p in parts) == count(turn, "tool_call")
    responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
    assert len(responses) == count(turn, "tool_use")
    called = {b.payload["id"] for b in turn.blocks if b.kind.value == "tool_call"}
    assert all(r["name"] == ("tool" if r["id"] in called else "unknown_function") for r in responses)
    assert all(p.get("thoughtSignature") == "tsig" for p in parts if p.get("thought"))


@settings(max_examples=200, deadline=None)
@given(st.lists(blocks(), max_size=14))
def test_chat_messages_keep_every_call_and_send_foreign_reasoning_nowhere(items: list[Block]) -> None:
    turn = make_turn(items)
    messages = chat_messages(turn)
    calls = [c for m in messages for c in m.get("tool_calls", [])]
    assert len(calls) == count(turn, "tool_call")
    assert sum(m["role"] == "tool" for m in messages) == count(turn, "tool_use")
    chat_reasoning = "".join(
        b.text
        for b in turn.blocks
        if b.kind.value == "reasoning" and BLOCK_META_PROVIDER.get(b.metadata) == "openai_chat"
    )
    sent = "".join(m.get("reasoning_content", "") for m in messages)
    assert len(sent) <= len(chat_reasoning)
