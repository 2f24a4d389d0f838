"""Turn <-> chat messages: grouping of tool calls, tool results, reasoning left out, bad messages."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import geppetto as gp
from geppetto.turns import (
    PAYLOAD_IMAGES,
    Block,
    BlockKind,
    Turn,
    blocks_from_messages,
    messages_from_turn,
    result_text,
    turn_from_messages,
)


def _turn() -> Turn:
    turn = Turn(id="t")
    turn.extend(
        [
            Block.system("sys"),
            Block.user("weather?"),
            Block.reasoning("thinking", item_id="rs_1"),
            Block.llm_text("Let me check."),
            Block.tool_call("c1", "get_weather", {"city": "Paris"}),
            Block.tool_call("c2", "get_time", "{bad json"),
            Block.tool_use("c1", {"temp": 21}),
            Block.tool_use("c2", None, error="arguments are not JSON"),
            Block.tool_call("c3", "again", {}),
            Block.tool_use("c3", "plain text"),
            Block.llm_text("21 degrees."),
            Block(BlockKind.OTHER, {"x": 1}),
        ]
    )
    return turn


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}},
            {"id": "c2", "name": "get_time", "args": "{bad json"},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
    {"role": "tool", "tool_call_id": "c2", "content": "null", "error": "arguments are not JSON"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c3", "name": "again", "args": {}}]},
    {"role": "tool", "tool_call_id": "c3", "content": "plain text"},
    {"role": "assistant", "content": "21 degrees."},
]


def test_messages_from_turn_groups_tool_calls() -> None:
    assert messages_from_turn(_turn()) == MESSAGES


def test_blocks_from_messages_rebuilds_blocks() -> None:
    blocks = blocks_from_messages(MESSAGES)
    assert [(b.kind, b.role, b.payload) for b in blocks] == [
        (BlockKind.SYSTEM, "system", {"text": "sys"}),
        (BlockKind.USER, "user", {"text": "weather?"}),
        (BlockKind.LLM_TEXT, "assistant", {"text": "Let me check."}),
        (BlockKind.TOOL_CALL, "assistant", {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}),
        (BlockKind.TOOL_CALL, "assistant", {"id": "c2", "name": "get_time", "args": "{bad json"}),
        (BlockKind.TOOL_USE, "tool", {"id": "c1", "result": '{"temp": 21}'}),
        (BlockKind.TOOL_USE, "tool", {"id": "c2", "result": "null", "error": "arguments are not JSON"}),
        (BlockKind.TOOL_CALL, "assistant", {"id": "c3", "name": "again", "args": {}}),
        (BlockKind.TOOL_USE, "tool", {"id": "c3", "result": "plain text"}),
        (BlockKind.LLM_TEXT, "assistant", {"text": "21 degrees."}),
    ]
    assert all(b.turn_id == "" for b in blocks)
    assert len({b.id for b in blocks}) == len(blocks)
    # the delta form: only messages from `start` on
    assert [b.text for b in blocks_from_messages(MESSAGES, start=7)] == ["21 degrees."]
    assert blocks_from_messages(MESSAGES, start=len(MESSAGES)) == []
    # and back to the same messages
    assert messages_from_turn(Turn(blocks=blocks)) == MESSAGES


def test_turn_from_messages_stamps_blocks() -> None:
    turn = turn_from_messages(MESSAGES[:2])
    assert [(b.kind, b.text, b.turn_id) for b in turn.blocks] == [
        (BlockKind.SYSTEM, "sys", turn.id),
        (BlockKind.USER, "weather?", turn.id),
    ]


def test_tool_call_after_tool_message_starts_a_new_assistant_message() -> None:
    turn = Turn(
        blocks=[Block.user("u"), Block.tool_call("a", "f", {}), Block.tool_use("a", 1), Block.tool_call("b", "g", {})]
    )
    assert messages_from_turn(turn) == [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "name": "f", "args": {}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "b", "name": "g", "args": {}}]},
    ]


@pytest.mark.parametrize(
    ("messages", "field", "text"),
    [
        ([{"role": "user", "content": "a"}, "hello"], "messages[1]", "expected a message mapping, found a str"),
        ([{"role": "robot", "content": "a"}], "messages[0].role", "unknown role 'robot'"),
        ([{"role": "user", "content": ["parts"]}], "messages[0].content", "content must be text"),
        (
            [{"role": "user", "content": "a", "images": "https://example.com/a.png"}],
            "messages[0].images",
            "images must be a list of mappings, each {url: ...} or {data: <base64>, media_type: ...}",
        ),
        ([{"role": "user", "content": "a", "images": ["x.png"]}], "messages[0].images", "images must be a list"),
        (
            [{"role": "assistant", "content": "", "tool_calls": ["x"]}],
            "messages[0].tool_calls",
            "tool_calls must be a list of mappings",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": {"id": "a"}}],
            "messages[0].tool_calls",
            "tool_calls must be a list of mappings",
        ),
    ],
)
def test_bad_messages(messages: list[Any], field: str, text: str) -> None:
    with pytest.raises(gp.TurnFormatError) as info:
        blocks_from_messages(messages)
    assert info.value.field == field
    assert text in str(info.value)


_IMAGES = [{"url": "https://example.com/cat.png"}, {"data": "iVBORw0KGgo=", "media_type": "image/png"}]


def test_user_images_survive_both_directions() -> None:
    """Images live in the user block's payload["images"], the key every engine reads."""
    turn = Turn(id="t")
    turn.extend([Block.system("s"), Block.user("what is this?", images=_IMAGES), Block.user("and plain")])
    messages = messages_from_turn(turn)
    assert messages == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "what is this?", "images": _IMAGES},
        {"role": "user", "content": "and plain"},
    ]
    back = turn_from_messages(messages)
    assert [(b.kind, b.payload) for b in back.blocks] == [(b.kind, b.payload) for b in turn.blocks]
    assert back.blocks[1].payload[PAYLOAD_IMAGES] == _IMAGES
    # copies, not shared: editing the messages never reaches either turn
    messages[1]["images"][0]["url"] = "https://example.com/dog.png"
    messages[1]["images"].append({"url": "x"})
    assert turn.blocks[1].payload[PAYLOAD_IMAGES] == _IMAGES
    assert back.blocks[1].payload[PAYLOAD_IMAGES] == _IMAGES


def test_images_from_messages_reach_an_engines_request() -> None:
    from geppetto.providers._streaming import image_parts

    [block] = blocks_from_messages([{"role": "user", "content": "look", "images": _IMAGES}])
    assert image_parts(block) == [
        ("url", "https://example.com/cat.png", ""),
        ("base64", "iVBORw0KGgo=", "image/png"),
    ]


def test_result_text() -> None:
    assert [result_text("as is"), result_text({"ü": [1, None]}), result_text(3), result_text(None)] == [
        "as is",
        '{"ü": [1, null]}',
        "3",
        "null",
    ]


_text = st.text(max_size=12)
_args = st.one_of(st.dictionaries(_text, st.one_of(st.integers(), _text, st.none()), max_size=3), _text)
_call = st.fixed_dictionaries({"id": _text, "name": _text, "args": _args})
_image = st.one_of(
    st.fixed_dictionaries({"url": st.sampled_from(["https://example.com/a.png", "data:image/png;base64,AAA="])}),
    st.fixed_dictionaries(
        {"data": st.just("iVBORw0KGgo="), "media_type": st.sampled_from(["image/png", "image/jpeg"])}
    ),
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": _text}),
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": _text, "images": st.lists(_image, min_size=1, max_size=3)}
    ),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": _text.filter(bool)}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": _text, "tool_calls": st.lists(_call, min_size=1, max_size=3)}
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": _text, "content": _text}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": _text, "content": _text, "error": _text}),
)


def _normal(messages: list[dict[str, Any]]) -> bool:
    """Message lists the block form represents one way: tool calls without text after an assistant
    message would join it, so they do not occur."""
    return not any(
        m.get("tool_calls") and not m["content"] and prev["role"] == "assistant"
        for prev, m in itertools.pairwise(messages)
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(_message, max_size=8).filter(_normal))
def test_messages_round_trip_through_blocks(messages: list[dict[str, Any]]) -> None:
    turn = turn_from_messages(messages)
    assert all(b.turn_id == turn.id for b in turn.blocks)
    assert messages_from_turn(turn) == messages
