"""The wire form fingerprints hash, written straight from a plain block's fields (the cold anchor check's
fast path), is byte for byte the canonical encoding of the block's identity, for any text and arguments:
a fingerprint recorded by an earlier version still matches."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto.providers.openai_responses._items import block_identity, compact_json
from geppetto.providers.openai_responses._request import _fresh_wire
from geppetto.turns import Block, BlockKind

_PLAIN = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode

text = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from(["", " ", 'é\n\u2028"\\', "\x00"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


def _slow(block: Block, include_system: bool) -> bytes | None:
    identity = block_identity(block, include_system=include_system)
    return None if identity is None else (_PLAIN(identity) + "\n").encode()


blocks = st.one_of(
    st.builds(Block.user, text),
    st.builds(Block.system, text),
    st.builds(Block.llm_text, text),
    st.builds(lambda t: Block(BlockKind.SYSTEM, {"text": t}, "developer"), text),
    st.builds(Block.tool_call, text, text, json_values | text),
    st.builds(Block.tool_use, text, json_values),
    st.builds(lambda c, r, e: Block.tool_use(c, r, error=e), text, json_values, text),
    st.builds(lambda t: Block.user(t, [{"url": "https://example.test/a.png"}]), text),
    st.builds(lambda v: Block(BlockKind.USER, {"text": v}), json_values),
    st.builds(lambda t, p: Block(BlockKind.LLM_TEXT, {"text": t, "item_id": "msg_1", "phase": p}), text, text),
    st.builds(lambda t, k, v: Block(BlockKind.LLM_TEXT, {"text": t, k: v}), text, text, json_values),
    st.builds(
        lambda c, r, k, v: Block(BlockKind.TOOL_USE, {"id": c, "result": r, k: v}), text, json_values, text, json_values
    ),
    st.builds(lambda t, k, v: Block(BlockKind.USER, {"text": t, k: v}), text, text, json_values),
)


@settings(max_examples=400, deadline=None)
@given(blocks, st.booleans())
def test_the_fast_wire_form_is_the_canonical_encoding(block: Block, include_system: bool) -> None:
    assert _fresh_wire(block, include_system) == _slow(block, include_system)


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans())
def test_compact_json_writes_what_the_json_encoder_writes(value: object, sort_keys: bool) -> None:
    plain = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys).encode
    assert compact_json(sort_keys=sort_keys)(value) == plain(value)
