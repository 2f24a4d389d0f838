"""Turn and Block: constructors, append/insert stamping, clone isolation."""

from __future__ import annotations

import uuid

from geppetto.turns import (
    BLOCK_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    Block,
    BlockKind,
    BlockMetadata,
    Turn,
    TurnData,
    TurnMetadata,
    copy_json,
    new_id,
    turn_data_key,
)


def test_constructors_build_whole_blocks() -> None:
    shapes = [
        (Block.system("be brief"), BlockKind.SYSTEM, "system", {"text": "be brief"}),
        (Block.user("hi"), BlockKind.USER, "user", {"text": "hi"}),
        (
            Block.user("look", images=[{"url": "https://example.invalid/a.png"}]),
            BlockKind.USER,
            "user",
            {"text": "look", "images": [{"url": "https://example.invalid/a.png"}]},
        ),
        (
            Block.llm_text("hello", item_id="msg_1"),
            BlockKind.LLM_TEXT,
            "assistant",
            {"text": "hello", "item_id": "msg_1"},
        ),
        (
            Block.tool_call("call_1", "get_weather", {"city": "Paris"}),
            BlockKind.TOOL_CALL,
            "assistant",
            {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
        ),
        (
            Block.tool_call("call_2", "f", "{not json", item_id="fc_2"),
            BlockKind.TOOL_CALL,
            "assistant",
            {"id": "call_2", "name": "f", "args": "{not json", "item_id": "fc_2"},
        ),
        (Block.tool_use("call_1", {"temp": 21}), BlockKind.TOOL_USE, "tool", {"id": "call_1", "result": {"temp": 21}}),
        (
            Block.tool_use("call_2", None, error="bad args"),
            BlockKind.TOOL_USE,
            "tool",
            {"id": "call_2", "result": None, "error": "bad args"},
        ),
        (Block.reasoning(), BlockKind.REASONING, "assistant", {}),
        (
            Block.reasoning("think", item_id="rs_1", encrypted_content="enc", summary=["s1"], signature="sig"),
            BlockKind.REASONING,
            "assistant",
            {"text": "think", "item_id": "rs_1", "encrypted_content": "enc", "summary": ["s1"], "signature": "sig"},
        ),
        (Block("other", {"x": 1}), BlockKind.OTHER, "", {"x": 1}),
    ]
    for block, kind, role, payload in shapes:
        assert (block.kind, block.role, block.payload, block.turn_id, dict(block.metadata)) == (
            kind,
            role,
            payload,
            "",
            {},
        )
        assert str(uuid.UUID(block.id)) == block.id
    assert Block.user("hi").id != Block.user("hi").id
    assert Block.llm_text("x").text == "x"
    assert Block.tool_call("c", "n", {}).text == ""
    assert type(Block(BlockKind.USER, metadata={"a.b@v1": 1}).metadata) is BlockMetadata  # type: ignore[arg-type]
    assert str(BlockKind.LLM_TEXT) == "llm_text"
    assert len(new_id()) == 36


def test_append_stamps_empty_turn_id_and_never_rewrites() -> None:
    turn = Turn(id="turn-1")
    fresh = Block.user("hi")
    kept = Block.llm_text("old")
    kept.turn_id = "turn-0"
    assert turn.append(fresh) is fresh
    turn.append(kept)
    assert [(b.text, b.turn_id) for b in turn.blocks] == [("hi", "turn-1"), ("old", "turn-0")]
    # appending into another turn keeps the first stamp
    other = Turn(id="turn-2")
    other.append(fresh)
    assert fresh.turn_id == "turn-1"


def test_insert_and_extend_stamp_like_append() -> None:
    turn = Turn(id="t")
    turn.extend([Block.user("a"), Block.user("c")])
    stamped = Block.user("b")
    stamped.turn_id = "earlier"
    turn.insert(1, stamped)
    assert turn.insert(0, Block.system("s")).turn_id == "t"
    assert [(b.text, b.turn_id) for b in turn.blocks] == [("s", "t"), ("a", "t"), ("b", "earlier"), ("c", "t")]
    assert [b.text for b in turn.find(BlockKind.USER)] == ["a", "b", "c"]


def test_turn_coerces_maps_and_copies_block_list() -> None:
    blocks = [Block.user("a")]
    turn = Turn(blocks=blocks, metadata={"x.y@v1": 1}, data={"x.z@v1": 2})  # type: ignore[arg-type]
    assert (type(turn.metadata), type(turn.data)) == (TurnMetadata, TurnData)
    blocks.append(Block.user("b"))
    assert [b.text for b in turn.blocks] == ["a"]


def _rich_turn() -> Turn:
    turn = Turn(id="t-1")
    TURN_META_SESSION_ID.set(turn.metadata, "s-1")
    turn_data_key("myapp", "cfg", 1, dict).set(turn.data, {"tools": ["a", "b"], "nested": {"k": [1, 2]}})
    turn.append(Block.user("hi", images=[{"url": "u"}]))
    call = turn.append(Block.tool_call("c1", "f", {"q": {"deep": [1, {"x": "y"}]}}))
    BLOCK_META_INFERENCE_ID.set(call.metadata, "inf-1")
    turn.append(Block.tool_use("c1", {"rows": [[1, 2], [3]]}))
    return turn


def test_clone_is_equal_and_isolated() -> None:
    original = _rich_turn()
    before = copy_json(
        {
            "blocks": [(b.id, b.turn_id, b.kind.value, b.role, b.payload, dict(b.metadata)) for b in original.blocks],
            "metadata": dict(original.metadata),
            "data": dict(original.data),
        }
    )
    clone = original.clone()
    assert clone == original
    assert clone is not original and clone.blocks[0] is not original.blocks[0]

    clone.append(Block.llm_text("new"))
    clone.blocks[0].payload["text"] = "changed"
    clone.blocks[0].payload["images"][0]["url"] = "changed"
    clone.blocks[1].payload["args"]["q"]["deep"][1]["x"] = "changed"
    clone.blocks[1].payload["args"]["q"]["deep"].append(99)
    clone.blocks[2].payload["result"]["rows"][0].append(3)
    clone.blocks[1].metadata["geppetto.inference_id@v1"] = "changed"
    clone.blocks[1].turn_id = "changed"
    clone.blocks[1].kind = BlockKind.OTHER
    clone.metadata["geppetto.session_id@v1"] = "changed"
    clone.data["myapp.cfg@v1"]["tools"].append("c")
    clone.data["myapp.cfg@v1"]["nested"]["k"].clear()
    del clone.blocks[0]

    after = {
        "blocks": [(b.id, b.turn_id, b.kind.value, b.role, b.payload, dict(b.metadata)) for b in original.blocks],
        "metadata": dict(original.metadata),
        "data": dict(original.data),
    }
    assert after == before
    assert len(original.blocks) == 3


def test_block_copy_keeps_identity_fields() -> None:
    block = Block.tool_call("c", "f", {"a": [1]})
    block.turn_id = "t"
    BLOCK_META_INFERENCE_ID.set(block.metadata, "i")
    dup = block.copy()
    assert dup == block
    dup.payload["args"]["a"].append(2)
    dup.metadata["geppetto.inference_id@v1"] = "j"
    assert (block.payload, dict(block.metadata)) == (
        {"id": "c", "name": "f", "args": {"a": [1]}},
        {"geppetto.inference_id@v1": "i"},
    )


def test_copy_json_copies_containers() -> None:
    value = {"a": [1, {"b": 2}]}
    dup = copy_json(value)
    assert dup == value
    dup["a"][1]["b"] = 3
    assert value == {"a": [1, {"b": 2}]}
