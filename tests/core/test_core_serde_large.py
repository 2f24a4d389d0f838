"""Large and hostile turn files: a size limit named before reading, deep nesting and aliases refused without
a crash, errors that say what is wrong without quoting the file, and the same Turn from libyaml and from
the pure-Python loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import geppetto as gp
from geppetto.turns import MAX_TURN_FILE_BYTES, check_json_value, dumps_yaml
from geppetto.turns import _serde_yaml as serde  # the YAML reader and writer turn files use


def _turn(n: int) -> gp.Turn:
    turn = gp.Turn()
    for i in range(n):
        turn.append(gp.Block.user(f"question {i} with *stars* & ampersands: [x]"))
        turn.append(gp.Block.tool_call(f"c{i}", "get_weather", {"city": "Paris", "n": i, "deep": {"a": [1, 2.5]}}))
        turn.append(gp.Block.tool_use(f"c{i}", {"temp": 18, "sky": None}))
        turn.append(gp.Block.llm_text("line one\nline two\u2028and a separator"))
    return turn


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = gp.save_turn(tmp_path / "t.json", _turn(20))
    size = path.stat().st_size
    with pytest.raises(gp.TurnFormatError) as err:
        gp.load_turn(path, max_bytes=size - 1)
    assert str(err.value) == (
        f"{path}: the file is {size:,} bytes, over the {size - 1:,}-byte limit for turn files; "
        "load it with load_turn(path, max_bytes=...) to allow more"
    )
    assert len(gp.load_turn(path, max_bytes=size).blocks) == 80
    assert MAX_TURN_FILE_BYTES == 256 << 20


@pytest.mark.parametrize("name", ["t.json", "t.yaml"])
def test_a_file_nested_ten_thousand_deep_is_a_format_error(tmp_path: Path, name: str) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    text = f'{{"id": "t", "blocks": [{{"kind": "user", "payload": {{"x": {deep}}}}}]}}'
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(gp.TurnFormatError, match="nested too deeply"):
        gp.load_turn(path)


def test_yaml_errors_name_the_line_and_column_without_quoting_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("id: t\nblocks: [\n  {kind: user, payload: {text: sk-secret-content\n")
    with pytest.raises(gp.TurnFormatError) as err:
        gp.load_turn(path)
    message = str(err.value)
    assert "sk-secret-content" not in message
    assert "line " in message and "column " in message


def test_libyaml_and_the_pure_python_loader_read_the_same_turn() -> None:
    if serde._Loader is serde._PyLoader:
        pytest.skip("PyYAML was built without libyaml here")
    text = dumps_yaml(_turn(50))
    fast = serde._read(serde._CLoader, text, True)
    slow = serde._read(serde._PyLoader, text, True)
    assert fast == slow
    assert serde._Dumper.__mro__[1] is yaml.CSafeDumper


def test_a_value_held_twice_is_written_out_twice_and_reads_back(tmp_path: Path) -> None:
    shared = {"city": "Paris"}
    turn = gp.Turn()
    turn.append(gp.Block.tool_call("c1", "get_weather", shared))
    turn.append(gp.Block.tool_call("c2", "get_weather", shared))
    path = gp.save_turn(tmp_path / "t.yaml", turn)
    assert "&" not in path.read_text()
    assert [b.payload for b in gp.load_turn(path).blocks] == [b.payload for b in turn.blocks]


# -- YAML streamed from libyaml's events ----------------------------------------------------------------

SCALARS = [
    "plain text",
    "~",
    "null",
    "Null",
    "",
    "yes",
    "No",
    "on",
    "OFF",
    "true",
    "0x1f",
    "0o17",
    "017",
    "1_000",
    "1:30",
    "-12",
    "3.5e+3",
    "1.5",
    ".nan",
    ".inf",
    "-.Inf",
    "2024-05-01",
    "2024-05-01 10:00:00",
    "'123'",
    '"true"',
    '"tab\\there"',
    "'it''s'",
    "|\n  line one\n  line two\n",
    ">-\n  folded\n  text\n",
    "12" + "3" * 5000,
    "{}",
    "[]",
    "[1, two, {three: 3}]",
    "{1: one, true: yes, null: none, 1.5: x}",
]


def _shape(value: object) -> object:
    """``value`` with the types made visible (1, 1.0 and True differ) and NaN and unreadable values comparable."""
    if isinstance(value, dict):
        return {repr(_shape(k)): _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, serde.Unreadable):
        return ("unreadable", value.text, value.problem)
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


@pytest.mark.parametrize("scalar", SCALARS)
def test_streamed_yaml_reads_every_scalar_as_the_loader_does(scalar: str) -> None:
    if serde._Loader is serde._PyLoader:
        pytest.skip("PyYAML was built without libyaml here")
    inner = scalar.rstrip("\n").replace("\n", "\n      ")
    text = f"key:\n  value: {inner}\n  list:\n    - {inner}\n    - 1\n"
    streamed, plain = serde.stream_yaml(text, serde._PyLoader)
    assert _shape(streamed) == _shape(serde._load_yaml(text))
    assert plain == _plain(streamed)  # plain JSON exactly when the JSON check would pass


def _plain(value: object) -> bool:
    try:
        check_json_value(value)
    except gp.MetadataTypeError:
        return False
    return True


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: 2\n",  # an anchor
        "a: &x [1]\nb: *x\n",  # an alias (the loader refuses it)
        "a: !!int 5\n",  # an explicit tag
        "a: !!binary aGk=\n",
        "base: {x: 1}\nmore:\n  <<: {y: 2}\n",  # a merge key
        "? [complex, key]\n: value\n",
        "a: 1\n---\nb: 2\n",  # two documents
        "a: '" + "[" * 300 + "'\nb: " + "[" * 300 + "]" * 300 + "\n",  # deeper than the stream goes
        "a: [unclosed\n",  # what libyaml refuses
        "a: = \n",
    ],
)
def test_what_the_stream_does_not_take_goes_to_the_full_loader(text: str) -> None:
    if serde._Loader is serde._PyLoader:
        pytest.skip("PyYAML was built without libyaml here")
    with pytest.raises(serde.NotStreamable):
        serde.stream_yaml(text, serde._PyLoader)


def test_a_saved_yaml_turn_is_streamed_without_the_node_graph(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if serde._Loader is serde._PyLoader:
        pytest.skip("PyYAML was built without libyaml here")
    turn = _turn(50)
    path = gp.save_turn(tmp_path / "t.yaml", turn)

    def no_nodes(text: object) -> object:
        raise AssertionError("the full loader was used")

    monkeypatch.setattr(serde, "_load_yaml", no_nodes)
    assert gp.load_turn(path) == turn
    assert serde._read_yaml(path.read_bytes())[1] is True  # plain JSON: the values are not walked again
