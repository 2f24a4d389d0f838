"""Turn serde: exact JSON and YAML round trips (hypothesis), files, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import geppetto as gp
from geppetto.turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_RESPONSE_ID,
    FORMAT,
    TURN_META_SESSION_ID,
    TURN_META_USAGE,
    Block,
    BlockKind,
    Turn,
    dumps_json,
    dumps_yaml,
    load_turn,
    loads_json,
    loads_yaml,
    save_turn,
    turn_data_key,
    turn_from_dict,
    turn_to_dict,
)

# -- strategies -------------------------------------------------------------------------------

# Text with what YAML finds hard: unicode, line breaks, trailing spaces, tabs, YAML-ish words.
_tricky = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "a\n",
        "a\n\n",
        "line one  \nline two\t\n",
        "\tindented\n  more",
        "  leading",
        "yes",
        "null",
        "~",
        "1.0",
        "0x10",
        "2020-01-01",
        "- item",
        "key: value",
        "# comment",
        "'quoted'",
        '"dq"',
        "ünïcödé ✓ 𝄞",
        "\u2028sep",
        "\x85nel",
        "\r\nwindows",
        "&anchor",
        "*alias",
        "!tag",
        "|",
        ">",
        "---",
        "...",
    ]
)
_text = st.one_of(_tricky, st.text(st.characters(blacklist_categories=["Cs"]), max_size=30))
_lines = st.lists(st.one_of(_text, st.text(" \t", max_size=3)), min_size=2, max_size=4).map("\n".join)
_strings = st.one_of(_text, _lines)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _strings,
)
json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_strings, children, max_size=4),
    ),
    max_leaves=8,
)
_segment = st.sampled_from(["a", "geppetto", "my_app", "x9", "openai_responses"])
_key_strings = st.builds(lambda ns, name, v: f"{ns}.{name}@v{v}", _segment, _segment, st.integers(1, 20))
_keyed_maps = st.dictionaries(_key_strings, json_values, max_size=2)
_ids = st.one_of(st.uuids().map(str), _text.filter(bool))  # an empty id is refused on save (see below)


@st.composite
def blocks(draw: st.DrawFn) -> Block:
    kind = draw(st.sampled_from(list(BlockKind)))
    payload = draw(st.dictionaries(_strings, json_values, max_size=3))
    block = Block(kind, payload, role=draw(st.sampled_from(["", "user", "assistant", "tool", "x"])))
    block.id = draw(_ids)
    block.turn_id = draw(st.one_of(st.just(""), _ids))  # an empty turn_id means "not stamped yet"
    block.metadata.update(draw(_keyed_maps))
    return block


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    turn = Turn(blocks=draw(st.lists(blocks(), max_size=3)), id=draw(_ids))
    turn.metadata.update(draw(_keyed_maps))
    turn.data.update(draw(_keyed_maps))
    return turn


_settings = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(turns())
def test_json_and_yaml_round_trips_are_exact(turn: Turn) -> None:
    for indent in (None, 2):
        again = loads_json(dumps_json(turn, indent=indent))
        assert again == turn
        assert turn_to_dict(again) == turn_to_dict(turn)
    text = dumps_yaml(turn)
    again = loads_yaml(text)
    assert again == turn
    assert turn_to_dict(again) == turn_to_dict(turn)
    assert dumps_yaml(again) == text


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_any_json_value_round_trips_in_a_payload(value: Any) -> None:
    turn = Turn(id="t")
    turn.append(Block.tool_use("c", value))
    assert loads_yaml(dumps_yaml(turn)).blocks[0].payload["result"] == value
    assert loads_json(dumps_json(turn)).blocks[0].payload["result"] == value


# -- concrete turns ---------------------------------------------------------------------------


def every_kind_turn() -> Turn:
    turn = Turn(id="turn-1")
    TURN_META_SESSION_ID.set(turn.metadata, "sess-1")
    TURN_META_USAGE.set(turn.metadata, {"input_tokens": 10, "output_tokens": 3})
    turn_data_key("myapp", "cfg", 1, dict).set(turn.data, {"tools": ["get_weather"], "temperature": 0.5})
    turn.append(Block.system("Be brief.\nAlways.  "))
    turn.append(Block.user("Weather in Paris?", images=[{"url": "data:image/png;base64,AAA="}]))
    turn.append(Block.reasoning("thinking\n", item_id="rs_1", encrypted_content="enc", summary=["s"], signature="sig"))
    call = turn.append(Block.tool_call("call_1", "get_weather", {"city": "Paris", "days": [1, 2]}, item_id="fc_1"))
    BLOCK_META_INFERENCE_ID.set(call.metadata, "inf-1")
    BLOCK_META_RESPONSE_ID.set(call.metadata, "resp_1")
    turn.append(Block.tool_call("call_2", "broken", "{not json"))
    turn.append(Block.tool_use("call_1", {"temp_c": 21.5, "sky": None}))
    turn.append(Block.tool_use("call_2", None, error="arguments are not JSON"))
    turn.append(Block.llm_text("It is 21.5 °C.", item_id="msg_1"))
    turn.append(Block(BlockKind.OTHER, {"original_kind": "web_search", "q": "paris"}))
    return turn


def test_every_kind_turn_document_form() -> None:
    turn = every_kind_turn()
    doc = turn_to_dict(turn)
    assert doc["format"] == FORMAT == "geppetto.turn/v1"
    assert (doc["id"], doc["metadata"], doc["data"]) == (
        "turn-1",
        {"geppetto.session_id@v1": "sess-1", "geppetto.usage@v1": {"input_tokens": 10, "output_tokens": 3}},
        {"myapp.cfg@v1": {"tools": ["get_weather"], "temperature": 0.5}},
    )
    assert doc["blocks"][3] == {
        "id": turn.blocks[3].id,
        "turn_id": "turn-1",
        "kind": "tool_call",
        "role": "assistant",
        "payload": {
            "id": "call_1",
            "name": "get_weather",
            "args": {"city": "Paris", "days": [1, 2]},
            "item_id": "fc_1",
        },
        "metadata": {"geppetto.inference_id@v1": "inf-1", "geppetto.response_id@v1": "resp_1"},
    }
    assert [b["kind"] for b in doc["blocks"]] == [
        "system",
        "user",
        "reasoning",
        "tool_call",
        "tool_call",
        "tool_use",
        "tool_use",
        "llm_text",
        "other",
    ]
    # a fresh structure: editing it does not reach the turn
    doc["blocks"][3]["payload"]["args"]["days"].append(3)
    assert turn.blocks[3].payload["args"]["days"] == [1, 2]
    assert turn_from_dict(turn_to_dict(turn)) == turn


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_save_and_load_turn_files(tmp_path: Path, suffix: str) -> None:
    turn = every_kind_turn()
    path = save_turn(tmp_path / "sub" / f"turn{suffix}", turn)
    assert path == tmp_path / "sub" / f"turn{suffix}"
    assert sorted(p.name for p in path.parent.iterdir()) == [f"turn{suffix}"]  # no temporary file left
    text = path.read_text(encoding="utf-8")
    if suffix == ".json":
        assert json.loads(text) == turn_to_dict(turn)
    else:
        assert "system\n" not in text or "|" in text  # multi-line text is readable
        assert loads_yaml(text) == turn
    assert load_turn(path) == turn
    assert gp.load_turn(str(path)) == turn
    # saving again replaces the file whole
    turn.append(Block.user("more"))
    save_turn(path, turn)
    assert load_turn(path) == turn


def test_yaml_multiline_text_is_a_literal_block() -> None:
    turn = Turn(id="t")
    turn.append(Block.user("line one\nline two\n"))
    text = dumps_yaml(turn)
    assert "text: |\n" in text
    assert "      line one\n      line two\n" in text


# -- bad input --------------------------------------------------------------------------------


_SHAPE = "a turn file is a mapping with a list of blocks, for example {id: t1, blocks: [{kind: user, payload: {text: hello}}]}"


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def _load_fails(path: Path, *, strict: bool = True) -> gp.TurnFormatError:
    before = path.read_bytes()
    with pytest.raises(gp.TurnFormatError) as info:
        load_turn(path, strict=strict)
    assert path.read_bytes() == before  # the input file is never rewritten
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert info.value.source == str(path)
    assert str(path) in str(info.value)
    return info.value


def _doc(**block: Any) -> dict[str, Any]:
    first = {"id": "b0", "turn_id": "t", "kind": "system", "role": "system", "payload": {"text": "s"}, "metadata": {}}
    base = {"id": "b1", "turn_id": "t", "kind": "user", "role": "user", "payload": {"text": "hi"}, "metadata": {}}
    base.update(block)
    return {"format": FORMAT, "id": "t", "metadata": {}, "data": {}, "blocks": [first, base]}


def _file_bytes(doc: dict[str, Any], suffix: str) -> bytes:
    end = b"\n...\n" if suffix != ".json" else b""  # JSON is YAML; "..." is the end line saved YAML carries
    return json.dumps(doc).encode() + end


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_truncated_file(tmp_path: Path, suffix: str) -> None:
    full = dumps_json(every_kind_turn(), indent=2) if suffix == ".json" else dumps_yaml(every_kind_turn())
    path = _write(tmp_path, f"turn{suffix}", full.encode()[: len(full) // 2 - 3])
    err = _load_fails(path)
    kind = "JSON" if suffix == ".json" else "YAML"
    assert f"not valid {kind}" in str(err) and "was the file cut short?" in str(err)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("t.json", b'{"id": "x", "blocks": [', "not valid JSON"),
        ("t.json", b"\xff\xfe\x00garbage", "not valid JSON"),
        ("t.yaml", b"id: x\nblocks: [\n  - {kind: user\n", "not valid YAML"),
        ("t.yaml", b"id: [unclosed\n", "not valid YAML"),
        ("t.yaml", b"id: \xc3\x28\n", "not valid YAML"),
        ("t.yaml", b"- just\n- a list\n", "found a list, not a turn; a turn file is a mapping with a list of blocks"),
        ("t.json", b"42", "found a int, not a turn; a turn file is a mapping with a list of blocks"),
    ],
)
def test_malformed_file(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    err = _load_fails(_write(tmp_path, name, content))
    assert message in str(err)
    assert err.field == ""


@pytest.mark.parametrize("content", [b"", b"  \n\t\n"])
@pytest.mark.parametrize("name", ["t.json", "t.yaml"])
def test_empty_file(tmp_path: Path, name: str, content: bytes) -> None:
    err = _load_fails(_write(tmp_path, name, content))
    assert str(err) == f"{tmp_path / name}: the file is empty; {_SHAPE}"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(gp.TurnFormatError) as info:
        load_turn(path)
    assert str(info.value) == f"{path}: no such file; check the path"
    assert not path.exists()


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_unknown_block_kind_strict_and_lenient(tmp_path: Path, suffix: str) -> None:
    doc = _doc(kind="web_search", role="", payload={"q": "x"})
    path = _write(tmp_path, f"t{suffix}", _file_bytes(doc, suffix))
    err = _load_fails(path)
    assert err.field == "blocks[1].kind"
    assert str(err) == (
        f"{path}: blocks[1].kind: unknown block kind 'web_search'; use one of: system, user, llm_text, tool_call, "
        "tool_use, reasoning, other (or load with strict=False to read it as 'other')"
    )
    turn = load_turn(path, strict=False)
    assert [(b.kind, b.role, b.payload) for b in turn.blocks] == [
        (BlockKind.SYSTEM, "system", {"text": "s"}),
        (BlockKind.OTHER, "", {"q": "x", "original_kind": "web_search"}),
    ]


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (_doc(payload=["not", "a", "mapping"]), "blocks[1].payload", "payload must be a mapping, found a list"),
        (_doc(payload="text"), "blocks[1].payload", "payload must be a mapping, found a str"),
        (_doc(kind=None), "blocks[1].kind", "missing or non-text kind"),
        (_doc(kind=3), "blocks[1].kind", "missing or non-text kind"),
        (_doc(id=7), "blocks[1].id", "expected text, found a int"),
        (_doc(role=["user"]), "blocks[1].role", "expected text, found a list"),
        (_doc(turn_id=None), "blocks[1].turn_id", "expected text, found nothing"),
        (_doc(metadata=[]), "blocks[1].metadata", "expected a mapping of typed keys, found a list"),
        (
            _doc(metadata={"geppetto.inference_id": "x"}),
            "blocks[1].metadata.geppetto.inference_id",
            "'geppetto.inference_id' is not a key: write it as 'namespace.name@vN'",
        ),
        (
            {**_doc(), "metadata": {"session_id": "x"}},
            "metadata.session_id",
            "'session_id' is not a key: write it as 'namespace.name@vN'",
        ),
        (
            {**_doc(), "data": {"myapp.cfg@1": {}}},
            "data.myapp.cfg@1",
            "'myapp.cfg@1' is not a key",
        ),
        ({**_doc(), "blocks": {"a": 1}}, "blocks", "expected a list of blocks, found a dict"),
        ({**_doc(), "blocks": ["user"]}, "blocks[0]", "expected a block mapping, found a str"),
        ({**_doc(), "id": 12}, "id", "expected text, found a int"),
        ({**_doc(), "format": "geppetto.turn/v9"}, "format", "unsupported format 'geppetto.turn/v9'"),
        ({**_doc(), "metadata": "x"}, "metadata", "expected a mapping of typed keys, found a str"),
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_bad_fields_are_named(tmp_path: Path, suffix: str, doc: dict[str, Any], field: str, message: str) -> None:
    path = _write(tmp_path, f"t{suffix}", _file_bytes(doc, suffix))
    err = _load_fails(path)
    assert err.field == field
    assert str(err).startswith(f"{path}: {field}: ")
    assert message in str(err)


@pytest.mark.parametrize(
    ("content", "field", "message"),
    [
        (
            b"id: t\nblocks:\n- kind: user\n  payload: {when: !!timestamp 2020-01-01}\n",
            "blocks[0].payload",
            "blocks[0].payload['when'] is tagged !!timestamp; a turn holds dates as text, so remove the tag",
        ),
        (b"id: t\nblocks:\n- kind: user\n  payload: {1: one}\n", "blocks[0].payload", "non-string key 1"),
        (b'id: t\nblocks:\n- kind: user\n  payload: {x: "\\ud800"}\n', "blocks[0].payload", "lone surrogate"),
        (b"id: t\nblocks:\n- kind: user\n  payload: {x: .nan}\n", "blocks[0].payload", "is nan"),
        (b"id: t\nblocks:\n- kind: user\n  payload: {x: !!binary aGk=}\n", "blocks[0].payload", "is a bytes"),
        (b"id: t\nmetadata: {a.b@v1: .inf}\nblocks: []\n", "metadata", "is inf"),
    ],
)
def test_yaml_values_that_are_not_json(tmp_path: Path, content: bytes, field: str, message: str) -> None:
    err = _load_fails(_write(tmp_path, "t.yaml", content))
    assert err.field == field
    assert message in str(err)


_BIG = "9" * 5000  # Python reads and writes integers of at most 4,300 digits as text
_TOO_BIG = "is an integer of more than 4,300 digits, which Python does not read or write as text; store it as a string"


@pytest.mark.parametrize(
    ("name", "content", "field", "message"),
    [
        ("t.yaml", "payload: {x: !!timestamp 2020-13-45}", "blocks[0].payload", "['x'] is tagged !!timestamp"),
        ("t.yaml", "payload: {x: !!timestamp abc}", "blocks[0].payload", "['x'] is tagged !!timestamp"),
        ("t.yaml", "payload: {x: !!int abc}", "blocks[0].payload", "['x'] is 'abc' with the tag !!int, which it"),
        ("t.yaml", "payload: {x: !!float abc}", "blocks[0].payload", "['x'] is 'abc' with the tag !!float, which"),
        ("t.yaml", "payload: {x: !!bool abc}", "blocks[0].payload", "['x'] is 'abc' with the tag !!bool, which"),
        ("t.yaml", "payload: {x: !!int 0b}", "blocks[0].payload", "['x'] is '0b' with the tag !!int, which it"),
        ("t.yaml", "payload: {!!int abc: 1}", "blocks[0].payload", "has a key that is 'abc' with the tag !!int"),
        ("t.yaml", f"payload: {{x: {_BIG}}}", "blocks[0].payload", f"['x'] {_TOO_BIG}"),
        ("t.yaml", f"metadata: {{a.b@v1: [1, -{_BIG}]}}", "blocks[0].metadata", f"['a.b@v1'][1] {_TOO_BIG}"),
        ("t.yaml", "role: !!int abc", "blocks[0].role", "expected text, found a value that is 'abc' with the tag"),
        ("t.json", f'"payload": {{"x": {_BIG}}}', "blocks[0].payload", f"['x'] {_TOO_BIG}"),
        ("t.json", f'"metadata": {{"a.b@v1": {{"n": [-{_BIG}]}}}}', "blocks[0].metadata", f"['n'][0] {_TOO_BIG}"),
        ("t.json", f'"role": {_BIG}', "blocks[0].role", f"expected text, found a value that {_TOO_BIG}"),
    ],
)
def test_values_no_reader_can_build_are_named(
    tmp_path: Path, name: str, content: str, field: str, message: str
) -> None:
    """PyYAML and int() raise a bare ValueError for these; the loader names the file and field instead."""
    if name.endswith(".json"):
        text = '{"id": "t", "blocks": [{"kind": "user", ' + content + "}]}"
    else:
        text = f"id: t\nblocks:\n- kind: user\n  {content}\n"
    err = _load_fails(_write(tmp_path, name, text.encode()))
    assert err.field == field
    assert message in str(err)


def test_yaml_dates_read_as_text() -> None:
    """JSON has no dates, so YAML dates stay the text they are (even impossible ones)."""
    doc = "id: t\nblocks:\n- kind: user\n  payload: {a: 2020-01-01, b: 2020-01-01 10:00:00Z, c: 2020-13-45}\n"
    assert loads_yaml(doc).blocks[0].payload == {"a": "2020-01-01", "b": "2020-01-01 10:00:00Z", "c": "2020-13-45"}
    # and date-like text is written quoted, so other YAML readers see text too
    turn = Turn(id="t")
    turn.append(Block.user("2020-01-01"))
    assert "    text: '2020-01-01'\n" in dumps_yaml(turn)
    assert loads_yaml(dumps_yaml(turn)) == turn


def test_json_lone_surrogate_is_refused(tmp_path: Path) -> None:
    err = _load_fails(
        _write(tmp_path, "t.json", b'{"id": "t", "blocks": [{"kind": "user", "payload": {"x": "\\ud800"}}]}')
    )
    assert err.field == "blocks[0].payload"


@pytest.mark.parametrize(
    "content",
    [
        b"!!python/object:collections.OrderedDict {}\n",
        b"id: t\nblocks:\n- kind: user\n  payload: !!python/object/apply:os.system ['echo hacked']\n",
        b"id: !!python/name:os.system\nblocks: []\n",
    ],
)
def test_yaml_never_constructs_objects(tmp_path: Path, content: bytes) -> None:
    err = _load_fails(_write(tmp_path, "t.yaml", content))
    assert "not valid YAML" in str(err)
    assert "python/" in str(err)


def test_minimal_document_defaults() -> None:
    turn = loads_yaml("id: t\nblocks:\n- kind: llm_text\n  payload: {text: hi}\n")
    assert (turn.id, dict(turn.metadata), dict(turn.data)) == ("t", {}, {})
    [block] = turn.blocks
    assert (block.kind, block.role, block.payload, block.turn_id, dict(block.metadata)) == (
        BlockKind.LLM_TEXT,
        "assistant",
        {"text": "hi"},
        "",
        {},
    )
    assert len(block.id) == 36  # a fresh id when the file has none
    assert len(loads_json('{"blocks": []}').id) == 36


def test_saving_a_turn_holding_non_json_is_refused(tmp_path: Path) -> None:
    turn = Turn(id="t")
    turn.append(Block.tool_use("c", (1, 2)))  # payload bypasses typed keys
    target = tmp_path / "t.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(gp.TurnFormatError) as info:
        save_turn(target, turn)
    assert str(info.value).startswith("turn t: cannot be serialized: turn['blocks'][0]['payload']['result'] is a tuple")
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_yaml_without_end_line_is_refused_as_cut_short(tmp_path: Path) -> None:
    text = dumps_yaml(every_kind_turn())
    assert text.endswith("\n...\n")
    cut = text[: text.index("      city: Paris\n") + len("      city: Paris\n")]  # parses, but args lost a key
    err = _load_fails(_write(tmp_path, "t.yaml", cut.encode()))
    assert str(err) == (
        f"{tmp_path / 't.yaml'}: the document does not end with the line '...', so it may have been cut short; "
        "if it is complete, add a line '...' at its end"
    )
    # a hand-written document that does not name its format needs no end line
    assert loads_yaml("id: t\nblocks: []\n").id == "t"


def test_yaml_line_separators_round_trip() -> None:
    turn = Turn(id="t")
    turn.append(Block.tool_use("c", {"\x85nel": "a\x85b", "ls": "\u2028", "ps": "x\u2029\ny"}))
    text = dumps_yaml(turn)
    assert "\x85" not in text
    assert loads_yaml(text) == turn


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("t.json", '{"id": "t", "blocks": [{"kind": "user", "payload": {"x": ' + "[" * 1500 + "]" * 1500 + "}}]}"),
        ("t.yaml", "id: t\nblocks:\n- kind: user\n  payload:\n    x:\n    - " + "- " * 1500 + "end\n"),
    ],
)
def test_deeply_nested_file_is_a_format_error(tmp_path: Path, name: str, content: str) -> None:
    err = _load_fails(_write(tmp_path, name, content.encode()))  # nested past the interpreter's recursion limit
    assert str(err) == (
        f"{tmp_path / name}: a value is nested too deeply; a turn nests lists and mappings a few hundred levels at most"
    )


def _alias_bomb(depth: int) -> str:
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, depth + 1)]
    return "id: t\nblocks:\n- kind: user\n  payload:\n" + "".join(f"    {line}\n" for line in lines)


@pytest.mark.parametrize(
    "content",
    [
        _alias_bomb(9),  # ten values that stand for 10**10 once expanded
        "id: t\nblocks:\n- kind: user\n  payload: {x: &a [*a]}\n",  # a list that contains itself
        "id: &i t\nblocks: []\nmetadata: {a.b@v1: *i}\n",
    ],
)
def test_yaml_aliases_are_refused(tmp_path: Path, content: str) -> None:
    err = _load_fails(_write(tmp_path, "t.yaml", content.encode()))
    assert "not valid YAML (turn files do not use YAML aliases (*name); write the value out" in str(err)
    # an anchor without an alias is harmless
    assert loads_yaml("id: &i t\nblocks: []\n").id == "t"


# -- documents that are not turns, unknown fields, empty ids ---------------------------------


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("t.yaml", b"foo: bar\n", "the mapping has no 'blocks' field (1 other field), so this is not a turn; "),
        ("t.json", b'{"foo": "bar"}', "the mapping has no 'blocks' field (1 other field), so this is not a turn; "),
        (
            "t.yaml",
            b"id: t\nmetadata: {}\n",
            "the mapping has no 'blocks' field (2 other fields), so this is not a turn; ",
        ),
        ("t.json", b"{}", "the mapping has no 'blocks' field (no fields), so this is not a turn; "),
        (  # the file's own keys are content: the message says what is wrong without quoting them
            "t.yaml",
            b"api_key: sk-secret-1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\n",
            "the mapping has no 'blocks' field (6 other fields), so this is not a turn; ",
        ),
        ("t.yaml", b"- kind: user\n  payload: {text: hi}\n", "found a list, not a turn; "),
        ("t.json", b"[]", "found a list, not a turn; "),
        ("t.yaml", b"just some text\n", "found a str, not a turn; "),
        ("t.yaml", b"~\n", "found nothing, not a turn; "),
    ],
)
@pytest.mark.parametrize("strict", [True, False])
def test_a_document_that_is_not_a_turn_is_refused(
    tmp_path: Path, name: str, content: bytes, message: str, strict: bool
) -> None:
    path = _write(tmp_path, name, content)
    err = _load_fails(path, strict=strict)
    assert str(err) == f"{path}: {message}{_SHAPE}"
    assert err.field == ""


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (
            {**_doc(), "title": "x"},
            "title",
            "unknown field 'title'; a turn has only format, id, metadata, data, blocks (put your own values in "
            "metadata or data, or load with strict=False to skip unknown fields)",
        ),
        (
            _doc(text="hi"),
            "blocks[1].text",
            "unknown field 'text'; a block has only id, turn_id, kind, role, payload, metadata (put kind-specific "
            "values in payload, or load with strict=False to skip unknown fields)",
        ),
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_unknown_fields_are_refused_unless_lenient(
    tmp_path: Path, suffix: str, doc: dict[str, Any], field: str, message: str
) -> None:
    path = _write(tmp_path, f"t{suffix}", _file_bytes(doc, suffix))
    err = _load_fails(path)
    assert str(err) == f"{path}: {field}: {message}"
    assert err.field == field
    # lenient (session stores): the unknown field is skipped, everything else reads as usual
    assert load_turn(path, strict=False) == loads_json(json.dumps(_doc()))


@pytest.mark.parametrize("where", ["turn", "block"])
@pytest.mark.parametrize("strict", [True, False])
def test_an_empty_id_in_a_file_is_refused(tmp_path: Path, where: str, strict: bool) -> None:
    doc = {**_doc(), "id": ""} if where == "turn" else _doc(id="")
    path = _write(tmp_path, "t.yaml", _file_bytes(doc, ".yaml"))
    err = _load_fails(path, strict=strict)
    field = "id" if where == "turn" else "blocks[1].id"
    assert str(err) == f"{path}: {field}: the id is empty; leave the field out to have a fresh id made, or write one"
    # a missing id is a fresh one; an empty turn_id is "not stamped yet" and stays empty
    (doc if where == "turn" else doc["blocks"][1]).pop("id")
    doc["blocks"][1]["turn_id"] = ""
    turn = loads_json(json.dumps(doc))
    assert len(turn.id if where == "turn" else turn.blocks[1].id) == 36
    assert turn.blocks[1].turn_id == ""


@pytest.mark.parametrize("where", ["turn", "block"])
def test_saving_an_empty_id_is_refused(tmp_path: Path, where: str) -> None:
    turn = every_kind_turn()
    if where == "turn":
        turn.id = ""
        expected = "turn: cannot be serialized: the turn's id is empty; give it one (Turn() makes one)"
    else:
        turn.blocks[2].id = ""
        expected = "turn turn-1: cannot be serialized: blocks[2].id is empty; give the block one (Block(...) makes one)"
    with pytest.raises(gp.TurnFormatError) as info:
        save_turn(tmp_path / "t.yaml", turn)
    assert str(info.value) == expected
    assert list(tmp_path.iterdir()) == []


# -- saving: atomic, keeps the mode, writes through links ---------------------------------------


def test_save_writes_a_flushed_temporary_file_then_renames_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    target = tmp_path / "t.yaml"
    target.write_text("old", encoding="utf-8")
    steps: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        assert Path(src).parent == tmp_path and Path(src).name.startswith(".t.yaml.")
        assert target.read_text(encoding="utf-8") == "old"  # the old file is whole until the rename
        steps.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    turn = every_kind_turn()
    save_turn(target, turn)
    written = target.stat().st_ino  # a rename keeps the inode: the file flushed is the file renamed
    expected = [("fsync", written), ("replace", written)]
    if os.name == "posix":
        expected.append(("fsync", tmp_path.stat().st_ino))  # then the folder, so the rename is durable
    assert steps == expected
    assert load_turn(target) == turn


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    target = tmp_path / "t.json"
    target.write_text("old", encoding="utf-8")

    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        save_turn(target, every_kind_turn())
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.skipif(not hasattr(__import__("os"), "getuid"), reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755])
def test_save_keeps_the_existing_files_mode(tmp_path: Path, mode: int) -> None:
    import stat

    target = tmp_path / "t.yaml"
    target.write_text("old", encoding="utf-8")
    target.chmod(mode)
    save_turn(target, every_kind_turn())
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert load_turn(target).id == "turn-1"


@pytest.mark.skipif(not hasattr(__import__("os"), "getuid"), reason="POSIX permission bits")
def test_a_new_file_gets_the_umask_permissions_not_the_temporary_files(tmp_path: Path) -> None:
    import os
    import stat

    old = os.umask(0o022)
    try:
        save_turn(tmp_path / "new.yaml", every_kind_turn())
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.yaml").stat().st_mode) == 0o644


@pytest.mark.skipif(not hasattr(__import__("os"), "symlink"), reason="symbolic links")
def test_saving_to_a_symlink_writes_through_to_its_target(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "turn.yaml"
    real.write_text("old", encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    assert save_turn(link, every_kind_turn()) == link
    assert link.is_symlink() and link.resolve() == real.resolve()  # still a link, to the same file
    assert load_turn(real).id == "turn-1"
    assert (real.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in real_dir.iterdir()) == ["turn.yaml"]  # the temporary lived next to the target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "real"]
    # a dangling link: the file it names is created
    (tmp_path / "dangling.yaml").symlink_to(real_dir / "later.yaml")
    save_turn(tmp_path / "dangling.yaml", every_kind_turn())
    assert (tmp_path / "dangling.yaml").is_symlink()
    assert load_turn(real_dir / "later.yaml").id == "turn-1"
