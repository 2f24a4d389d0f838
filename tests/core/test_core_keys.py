"""Typed keys: naming, typed get/set, JSON-only values, codec types, family checks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

import geppetto as gp
from geppetto.turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_MIDDLEWARE,
    TURN_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    TURN_META_USAGE,
    Block,
    BlockMetadata,
    KeyFamily,
    Turn,
    TurnData,
    TurnMetadata,
    block_meta_key,
    check_json_value,
    copy_json,
    parse_key,
    turn_data_key,
    turn_meta_key,
)


def test_known_key_strings_and_families() -> None:
    assert [str(TURN_META_SESSION_ID), str(TURN_META_INFERENCE_ID), str(BLOCK_META_INFERENCE_ID)] == [
        "geppetto.session_id@v1",
        "geppetto.inference_id@v1",
        "geppetto.inference_id@v1",
    ]
    assert (TURN_META_INFERENCE_ID.family, BLOCK_META_INFERENCE_ID.family) == (
        KeyFamily.TURN_METADATA,
        KeyFamily.BLOCK_METADATA,
    )
    # same string, different family: different keys
    assert TURN_META_INFERENCE_ID != BLOCK_META_INFERENCE_ID
    assert turn_meta_key("geppetto", "inference_id", 1, str) == TURN_META_INFERENCE_ID
    assert len({TURN_META_INFERENCE_ID, turn_meta_key("geppetto", "inference_id", 1, str)}) == 1


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("myapp.user_tier@v1", ("myapp", "user_tier", 1)),
        ("a.b.c@v12", ("a.b", "c", 12)),
        ("x1.y_2@v3", ("x1", "y_2", 3)),
    ],
)
def test_parse_key_accepts_good_names(text: str, parts: tuple[str, str, int]) -> None:
    assert parse_key(text) == parts


@pytest.mark.parametrize(
    "text",
    [
        "myapp.user_tier",  # no version
        "user_tier@v1",  # no namespace
        "MyApp.tier@v1",  # upper case
        "myapp.tier@v0",  # version 0
        "myapp.tier@1",  # no v
        "myapp.tier@v01",  # leading zero
        "myapp..tier@v1",
        "myapp.tier name@v1",
        "myapp.1tier@v1",
        "",
        " myapp.tier@v1",
        "myapp.tier@v1\n",
    ],
)
def test_parse_key_refuses_bad_names_and_names_the_fix(text: str) -> None:
    with pytest.raises(gp.KeyFormatError) as info:
        parse_key(text)
    assert str(info.value) == (
        f"{text!r} is not a key: write it as 'namespace.name@vN' in lower case, for example 'myapp.user_tier@v1'"
    )
    assert isinstance(info.value, gp.UsageError)


def test_parse_key_refuses_non_text() -> None:
    with pytest.raises(gp.KeyFormatError, match=r"namespace\.name@vN"):
        parse_key(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("namespace", "name", "version"),
    [("MyApp", "tier", 1), ("myapp", "Tier", 1), ("myapp", "tier", 0), ("myapp", "bad name", 1), ("", "tier", 1)],
)
def test_key_constructors_refuse_bad_parts(namespace: str, name: str, version: int) -> None:
    for make in (turn_meta_key, turn_data_key, block_meta_key):
        with pytest.raises(gp.KeyFormatError, match=r"namespace\.name@vN"):
            make(namespace, name, version, str)


def test_get_missing_default_and_set() -> None:
    key = turn_meta_key("myapp", "tier", 1, str)
    meta = TurnMetadata()
    assert key.get(meta) is None
    assert key.get(meta, "free") == "free"
    assert not key.has(meta)
    key.set(meta, "gold")
    assert meta == {"myapp.tier@v1": "gold"}
    assert key.get(meta) == "gold"
    assert key.require(meta) == "gold"
    key.delete(meta)
    assert meta == {}
    key.delete(meta)  # deleting a missing key is fine
    with pytest.raises(KeyError, match=r"myapp\.tier@v1 is not set"):
        key.require(meta)


def test_get_wrong_type_raises_not_none() -> None:
    key = turn_meta_key("myapp", "count", 1, int)
    meta = TurnMetadata({"myapp.count@v1": "three"})
    with pytest.raises(gp.MetadataTypeError) as info:
        key.get(meta)
    assert str(info.value) == "myapp.count@v1 holds int; the stored value is a str"
    with pytest.raises(gp.MetadataTypeError):
        key.require(meta)
    # bool is not an int here
    meta["myapp.count@v1"] = True
    with pytest.raises(gp.MetadataTypeError, match="stored value is a bool"):
        key.get(meta)


@pytest.mark.parametrize(
    ("type_", "good", "bad"),
    [
        (str, "x", 1),
        (int, 3, True),
        (int, -7, 2.5),
        (float, 2.5, "2.5"),
        (float, 3, False),  # an int is a float value; a bool is not
        (bool, False, 0),
        (dict, {"a": [1, None]}, [1]),
        (list, [1, "two", {"x": 3}], (1,)),
    ],
)
def test_set_checks_type(type_: type[Any], good: Any, bad: Any) -> None:
    key = turn_data_key("myapp", "value", 1, type_)
    data = TurnData()
    key.set(data, good)
    assert data == {"myapp.value@v1": good}
    assert key.get(data) == good
    with pytest.raises(gp.MetadataTypeError) as info:
        key.set(data, bad)
    assert str(info.value) == f"myapp.value@v1 holds {type_.__name__}, not {type(bad).__name__}"
    assert data == {"myapp.value@v1": good}  # a refused set leaves the map as it was


class _Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ((1, 2), "myapp.any@v1 is a tuple, which does not survive a JSON round trip; convert it to a list"),
        ({1, 2}, "myapp.any@v1 is a set, which does not survive a JSON round trip; convert it to a list"),
        (math.nan, "myapp.any@v1 is nan, which JSON cannot hold; store a finite number or a string"),
        (math.inf, "myapp.any@v1 is inf, which JSON cannot hold; store a finite number or a string"),
        (-math.inf, "myapp.any@v1 is -inf, which JSON cannot hold; store a finite number or a string"),
        (
            b"raw",
            "myapp.any@v1 is a bytes, which does not survive a JSON round trip; "
            "convert it to plain JSON (dict, list, str, number)",
        ),
        (
            _Opaque(),
            "myapp.any@v1 is a _Opaque, which does not survive a JSON round trip; "
            "convert it to plain JSON (dict, list, str, number)",
        ),
        ({1: "a"}, "myapp.any@v1 has the non-string key 1; JSON objects only have string keys"),
        ("a\ud800b", "myapp.any@v1 holds a lone surrogate character, which no UTF-8 file can hold"),
        (
            {"outer": [1, {"inner": (3,)}]},
            "myapp.any@v1['outer'][1]['inner'] is a tuple, which does not survive a JSON round trip; "
            "convert it to a list",
        ),
        (
            [{"deep": math.nan}],
            "myapp.any@v1[0]['deep'] is nan, which JSON cannot hold; store a finite number or a string",
        ),
        (
            {"n": [-(10**4300)]},
            "myapp.any@v1['n'][0] is an integer of more than 4,300 digits, which Python does not read or write "
            "as text; store it as a string",
        ),
    ],
)
def test_set_refuses_values_that_are_not_json(value: Any, message: str) -> None:
    key = turn_meta_key("myapp", "any", 1, object)
    meta = TurnMetadata()
    with pytest.raises(gp.MetadataTypeError) as info:
        key.set(meta, value)
    assert str(info.value) == message
    assert meta == {}


def test_integers_up_to_4300_digits_are_json() -> None:
    key = turn_meta_key("myapp", "n", 1, int)
    meta = TurnMetadata()
    for n in (10**4300 - 1, -(10**4300 - 1), 2**14_000):
        key.set(meta, n)
        assert gp.turns.loads_json(gp.turns.dumps_json(gp.Turn(metadata=meta))).metadata == meta
    with pytest.raises(gp.MetadataTypeError, match="more than 4,300 digits"):
        key.set(meta, 10**4300)


def test_check_json_value_accepts_plain_json() -> None:
    value = {"a": [1, 2.5, -0.0, True, None, "ünï\tcode\n"], "b": {"c": {}}, "": []}
    check_json_value(value)  # does not raise
    with pytest.raises(gp.MetadataTypeError, match=r"^cfg\['k'\] is a tuple"):
        check_json_value({"k": ()}, what="cfg")


@dataclass
class Tier:
    name: str
    limit: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "limit": self.limit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tier:
        return cls(name=data["name"], limit=int(data["limit"]))


TIER = turn_data_key("myapp", "tier", 2, Tier)


def test_codec_key_stores_dict_and_decodes() -> None:
    turn = Turn()
    TIER.set(turn.data, Tier("gold", 10))
    assert dict(turn.data) == {"myapp.tier@v2": {"name": "gold", "limit": 10}}
    assert TIER.get(turn.data) == Tier("gold", 10)
    # survives serialization as plain JSON
    again = gp.turns.loads_json(gp.turns.dumps_json(turn))
    assert TIER.get(again.data) == Tier("gold", 10)


def test_codec_key_refuses_wrong_values() -> None:
    data = TurnData()
    with pytest.raises(gp.MetadataTypeError, match=r"myapp\.tier@v2 holds Tier, not dict"):
        TIER.set(data, {"name": "gold", "limit": 10})  # type: ignore[arg-type]
    data["myapp.tier@v2"] = "gold"
    with pytest.raises(gp.MetadataTypeError, match=r"myapp\.tier@v2 holds Tier; the stored value is a str"):
        TIER.get(data)
    data["myapp.tier@v2"] = {"name": "gold"}
    with pytest.raises(gp.MetadataTypeError, match="the stored value does not fit"):
        TIER.get(data)


def test_family_misuse_is_a_usage_error() -> None:
    turn = Turn()
    block = Block.user("hi")
    with pytest.raises(gp.UsageError) as info:
        BLOCK_META_INFERENCE_ID.set(turn.metadata, "inf-1")
    assert str(info.value) == "geppetto.inference_id@v1 is a block metadata key; it was used on turn metadata"
    with pytest.raises(gp.UsageError, match="is a turn metadata key; it was used on block metadata"):
        TURN_META_SESSION_ID.get(block.metadata)
    with pytest.raises(gp.UsageError, match="is a turn metadata key; it was used on turn data"):
        TURN_META_USAGE.get(turn.data)
    with pytest.raises(gp.UsageError, match="is a turn data key; it was used on turn metadata"):
        TIER.delete(turn.metadata)
    assert (dict(turn.metadata), dict(turn.data), dict(block.metadata)) == ({}, {}, {})
    # a plain dict has no family and accepts any key
    plain: dict[str, Any] = {}
    BLOCK_META_MIDDLEWARE.set(plain, "system_prompt")
    assert plain == {"geppetto.middleware@v1": "system_prompt"}


def test_maps_are_dicts_with_family() -> None:
    assert (TurnMetadata.family, TurnData.family, BlockMetadata.family) == (
        KeyFamily.TURN_METADATA,
        KeyFamily.TURN_DATA,
        KeyFamily.BLOCK_METADATA,
    )
    assert repr(TurnMetadata({"a.b@v1": 1})) == "TurnMetadata({'a.b@v1': 1})"
    assert repr(TIER) == "Key(turn data, 'myapp.tier@v2', Tier)"


# -- parameterized types and copies -----------------------------------------------------------

TAGS = turn_data_key("myapp", "tags", 1, list[str])
COUNTS = turn_data_key("myapp", "counts", 1, dict[str, int])
ROWS = turn_data_key("myapp", "rows", 1, list[dict[str, int | None]])


@pytest.mark.parametrize(
    ("key", "good"),
    [
        (TAGS, ["a", "b"]),
        (TAGS, []),
        (COUNTS, {"a": 1, "b": -2}),
        (ROWS, [{"a": 1, "b": None}, {}]),
    ],
)
def test_parameterized_keys_get_and_set(key: Any, good: Any) -> None:
    data = TurnData()
    assert key.get(data) is None  # missing is still None, not an error
    key.set(data, good)
    assert key.get(data) == good
    assert key.require(data) == good


@pytest.mark.parametrize(
    ("key", "stored", "message"),
    [
        (TAGS, "a", "myapp.tags@v1 holds list[str]; the stored value is a str"),
        (TAGS, {"a": 1}, "myapp.tags@v1 holds list[str]; the stored value is a dict"),
        (TAGS, ["a", 2], "myapp.tags@v1 holds list[str]; the stored value's item [1] is a int"),
        (COUNTS, [["a", 1]], "myapp.counts@v1 holds dict[str, int]; the stored value is a list"),
        (COUNTS, {"a": 1, "b": "2"}, "myapp.counts@v1 holds dict[str, int]; the stored value's item ['b'] is a str"),
        (COUNTS, {"a": True}, "myapp.counts@v1 holds dict[str, int]; the stored value's item ['a'] is a bool"),
        (
            ROWS,
            [{"a": 1}, {"b": "x"}],
            "myapp.rows@v1 holds list[dict[str, int | None]]; the stored value's item [1]['b'] is a str",
        ),
    ],
)
def test_parameterized_keys_tell_wrong_type_from_missing(key: Any, stored: Any, message: str) -> None:
    data = TurnData({str(key): stored})
    with pytest.raises(gp.MetadataTypeError) as info:
        key.get(data)
    assert str(info.value) == message
    with pytest.raises(gp.MetadataTypeError):
        key.require(data)


@pytest.mark.parametrize(
    ("key", "bad", "message"),
    [
        (TAGS, "ab", "myapp.tags@v1 holds list[str], not str"),
        (TAGS, ["a", None], "myapp.tags@v1 holds list[str], not list: item [1] is a NoneType"),
        (COUNTS, {"a": 1.5}, "myapp.counts@v1 holds dict[str, int], not dict: item ['a'] is a float"),
    ],
)
def test_parameterized_keys_refuse_wrong_values_on_set(key: Any, bad: Any, message: str) -> None:
    data = TurnData()
    with pytest.raises(gp.MetadataTypeError) as info:
        key.set(data, bad)
    assert str(info.value) == message
    assert data == {}


def test_a_parameterized_key_names_its_type() -> None:
    assert repr(TAGS) == "Key(turn data, 'myapp.tags@v1', list[str])"
    assert repr(TURN_META_SESSION_ID) == "Key(turn metadata, 'geppetto.session_id@v1', str)"


def test_set_stores_a_copy() -> None:
    data = TurnData()
    tags = ["a", "b"]
    TAGS.set(data, tags)
    tags.append("c")
    assert TAGS.get(data) == ["a", "b"]
    counts: dict[str, Any] = {"nested": {"x": [1]}}
    key = turn_data_key("myapp", "cfg", 1, dict)
    key.set(data, counts)
    counts["nested"]["x"].append(2)
    counts["new"] = 1
    assert key.get(data) == {"nested": {"x": [1]}}
    # the codec path stores a fresh dict too
    tier = Tier("gold", 10)
    TIER.set(data, tier)
    tier.limit = 99
    assert TIER.get(data) == Tier("gold", 10)


def test_set_copies_so_two_turns_never_share_a_value() -> None:
    shared = ["a"]
    one, two = Turn(), Turn()
    TAGS.set(one.data, shared)
    TAGS.set(two.data, shared)
    TAGS.require(one.data).append("only-one")
    assert TAGS.get(two.data) == ["a"]


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_value_nested_ten_thousand_deep_is_refused_by_copy_and_check_naming_the_limit() -> None:
    deep = _deep(10_000)
    with pytest.raises(gp.MetadataTypeError) as refused:
        copy_json(deep)
    assert str(refused.value) == (
        "a value is nested too deeply; a turn nests lists and mappings a few hundred levels at most; "
        "flatten it (it cannot be copied)"
    )
    with pytest.raises(gp.MetadataTypeError) as unchecked:
        turn_data_key("myapp", "deep", 1, dict).set(TurnData(), deep)
    assert str(unchecked.value) == (
        "myapp.deep@v1 is nested too deeply; a turn nests lists and mappings a few hundred levels at most"
    )
    block = Block.tool_call("call_1", "lookup", deep)  # arguments given in code
    with pytest.raises(gp.MetadataTypeError, match="nested too deeply"):
        Turn(blocks=[block]).clone()
    shallow = _deep(200)  # as deep as JSON from a provider may go: copied and checked
    assert copy_json(shallow) == shallow and copy_json(shallow) is not shallow
    check_json_value(shallow)


class _Watched(dict[str, Any]):
    """A dict subclass, as a watched payload's dicts are."""


@pytest.mark.parametrize(
    "value",
    [
        {"usage": {"input_tokens": 1200, "output_tokens": 30}, "cost": None, "model": "gpt-4.1-mini"},
        {"a": [1, 2.5, -0.0, True, None, "ünï\tcode\n", [{"b": []}]], "": {}},
        [{"x": "é"}, [], 2**14_000],
        _Watched(inner=[_Watched(k="v")]),
        "plain",
    ],
)
def test_set_checks_and_copies_in_one_walk_storing_what_a_check_then_a_copy_would(value: Any) -> None:
    key = turn_meta_key("myapp", "any", 1, object)
    meta = TurnMetadata()
    key.set(meta, value)
    stored = meta["myapp.any@v1"]
    check_json_value(value)
    assert stored == copy_json(value)

    def containers(v: Any) -> list[int]:
        if isinstance(v, dict):
            return [id(v), *(i for x in v.values() for i in containers(x))]
        if isinstance(v, list):
            return [id(v), *(i for x in v for i in containers(x))]
        return []

    assert not set(containers(stored)) & set(containers(value))  # nothing shared with the caller's value
    assert all(type(c) in (dict, list) for c in _walk(stored))  # subclasses stored as plain dicts and lists


def _walk(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return [v, *(c for x in v.values() for c in _walk(x))]
    if isinstance(v, list):
        return [v, *(c for x in v for c in _walk(x))]
    return []


def test_parsed_keys_are_remembered_within_a_bound_and_bad_ones_always_refused() -> None:
    from geppetto.turns import _keys

    assert _keys.parse_key("bench.cached_key@v3") == ("bench", "cached_key", 3)
    assert _keys._PARSED["bench.cached_key@v3"] == ("bench", "cached_key", 3)  # the next block's: one dict read
    for _ in range(2):
        with pytest.raises(gp.KeyFormatError):
            _keys.parse_key("Bench.Bad")
    assert "Bench.Bad" not in _keys._PARSED
    for i in range(_keys._PARSED_MAX + 10):
        _keys.parse_key(f"bench.many_{i}@v1")
    assert len(_keys._PARSED) <= _keys._PARSED_MAX
