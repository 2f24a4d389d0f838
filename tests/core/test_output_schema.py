"""Structured output schemas: each provider's wire form of real-world pydantic models, validation, caching.

Every wire schema is checked three ways by things this module did not write: the simulator's rules for
what each provider refuses, jsonschema's metaschema, and a round trip (the simulator's scripted model
fills the wire schema; the answer must validate under the original pydantic model).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
from typing import Any, Literal

import jsonschema
import pydantic
import pytest
from google.genai import types as genai
from typing_extensions import TypedDict

from geppetto import (
    ConfigurationError,
    OutputValidationError,
    StructuredOutputConfig,
    Turn,
    UsageError,
    output_config,
    output_of,
)
from geppetto.output import (
    BLOCK_META_OUTPUT,
    BLOCK_META_OUTPUT_ERRORS,
    STRUCTURED_OUTPUT,
    check_output,
    retry_prompt,
    settle_output,
    wire_schema,
)
from geppetto.simulator._errors import SimError
from geppetto.simulator._model import fill_value
from geppetto.simulator._output_rules import check_anthropic_format, check_openai_format
from geppetto.turns import Block


class Status(enum.Enum):
    OPEN = "open"
    PAID = "paid"


class Address(pydantic.BaseModel):
    street: str
    city: str
    postcode: str | None = None


class LineItem(pydantic.BaseModel):
    sku: str
    quantity: int = pydantic.Field(ge=1, description="How many")
    price: float


class Invoice(pydantic.BaseModel):
    """An invoice."""

    number: str
    status: Status
    billing: Address
    shipping: Address | None = None
    items: list[LineItem]
    issued: datetime.date
    kind: Literal["standard", "credit"] = "standard"
    notes: list[str] = []


class Category(pydantic.BaseModel):
    name: str
    children: list[Category] = []


class Extraction(pydantic.BaseModel):
    people: list[str]
    root: Category | None


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


MODELS: list[Any] = [Invoice, Category, Extraction, Point, Movie, list[LineItem], Literal["yes", "no"], int]


def _closed_everywhere(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            assert schema.get("additionalProperties") is False, schema
        for value in schema.values():
            _closed_everywhere(value)
    elif isinstance(schema, list):
        for value in schema:
            _closed_everywhere(value)


@pytest.mark.parametrize("model", MODELS, ids=str)
def test_openai_strict_schema_passes_the_rules_and_round_trips(model: Any) -> None:
    config = output_config(model)
    schema = wire_schema(config, "openai")
    check_openai_format({"name": config.name, "schema": schema, "strict": True}, "text.format")
    jsonschema.Draft202012Validator.check_schema(schema)
    _closed_everywhere(schema)
    answer = fill_value(schema, "Invoice 42 for 3 things in Paris")
    value, errors = check_output(config, json.dumps(answer))
    assert errors == []
    pydantic.TypeAdapter(model).validate_python(value)


@pytest.mark.parametrize("model", MODELS, ids=str)
def test_anthropic_schema_passes_the_rules_and_round_trips(model: Any) -> None:
    config = output_config(model)
    schema = wire_schema(config, "anthropic")
    assert check_anthropic_format({"output_config": {"format": {"type": "json_schema", "schema": schema}}}) == schema
    jsonschema.Draft202012Validator.check_schema(schema)
    value, errors = check_output(config, json.dumps(fill_value(schema, "Invoice 42 for 3 things")))
    assert errors == []
    pydantic.TypeAdapter(model).validate_python(value)


@pytest.mark.parametrize("model", [m for m in MODELS if m not in (Category, Extraction)], ids=str)
def test_gemini_openapi_schema_is_a_genai_schema_and_round_trips(model: Any) -> None:
    config = output_config(model)
    schema = wire_schema(config, "gemini-openapi")
    genai.Schema.model_validate(schema)  # google-genai's own model of responseSchema
    assert "$ref" not in json.dumps(schema) and "anyOf" not in json.dumps(schema)
    value, errors = check_output(config, json.dumps(fill_value(schema, "Invoice 42 for 3 things")))
    assert errors == []
    pydantic.TypeAdapter(model).validate_python(value)


def test_gemini_openapi_refuses_a_recursive_schema_naming_the_fix() -> None:
    with pytest.raises(UsageError, match=r"recursive.*Gemini 2\.5 or later"):
        wire_schema(output_config(Category), "gemini-openapi")


def test_gemini_json_schema_keeps_references() -> None:
    config = output_config(Category)
    assert not config.wrapped  # the root reference of a recursive model is resolved, not wrapped
    schema = wire_schema(config, "gemini")
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Category"}


def test_strict_rewrite_makes_every_property_required_and_optional_ones_nullable() -> None:
    schema = wire_schema(output_config(Address), "openai")
    assert schema["required"] == ["street", "city", "postcode"]
    assert {"type": "null"} in schema["properties"]["postcode"]["anyOf"]
    assert "default" not in json.dumps(schema)


def test_constraints_a_provider_cannot_enforce_move_to_the_description_and_are_still_checked() -> None:
    config = output_config(LineItem)
    quantity = wire_schema(config, "anthropic")["properties"]["quantity"]
    assert "minimum" not in quantity
    assert quantity["description"] == "How many\n\n{minimum: 1}"
    assert wire_schema(config, "openai")["properties"]["quantity"]["minimum"] == 1  # OpenAI enforces it
    _, errors = check_output(config, '{"sku": "a", "quantity": 0, "price": 1.5}')
    assert errors == ["quantity: Input should be greater than or equal to 1"]


def test_a_mapping_with_free_keys_is_refused_in_strict_mode_with_the_fix() -> None:
    class Counts(pydantic.BaseModel):
        by_word: dict[str, int]

    config = output_config(Counts)
    with pytest.raises(UsageError, match=r"by_word.*free keys.*strict=False"):
        wire_schema(config, "openai")
    loose = output_config(Counts, strict=False)
    assert wire_schema(loose, "openai")["properties"]["by_word"]["additionalProperties"] == {"type": "integer"}


def test_non_object_answers_are_wrapped_on_the_wire_and_unwrapped_when_read() -> None:
    config = output_config(list[int])
    assert config.wrapped
    assert wire_schema(config, "openai")["required"] == ["value"]
    assert check_output(config, '{"value": [1, 2]}') == ([1, 2], [])
    assert check_output(config, "[1, 2]")[1] == ["(answer): expected an object with the answer under 'value'"]


def test_a_type_is_prepared_once_and_each_wire_form_built_once() -> None:
    first, second = output_config(Invoice), output_config(Invoice, require_valid=True)
    assert first.schema is second.schema
    assert wire_schema(first, "openai") is wire_schema(second, "openai")
    round_tripped = StructuredOutputConfig.from_dict(json.loads(json.dumps(first.to_dict())))
    assert round_tripped.schema_id == first.schema_id
    assert wire_schema(round_tripped, "openai") is wire_schema(first, "openai")


def test_a_dict_schema_is_validated_with_jsonschema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 2}}, "required": ["n"]}
    config = output_config(schema, name="count")
    assert check_output(config, '{"n": 3}') == ({"n": 3}, [])
    assert check_output(config, '{"n": 1}') == (None, ["n: 1 is less than the minimum of 2"])
    assert check_output(config, "not json")[1][0].startswith("the answer is not valid JSON (Expecting value")


def test_bad_configs_name_the_fix() -> None:
    with pytest.raises(UsageError, match="name='answer'"):
        output_config(Address, name="has space")
    with pytest.raises(UsageError, match="auto, native, tool"):
        output_config(Address, mode="json")
    with pytest.raises(UsageError, match="has no JSON schema"):
        output_config(object())
    with pytest.raises(UsageError, match="not a valid JSON schema"):
        check_output(output_config({"type": "object", "properties": {"a": {"type": 5}}}), "{}")


def test_the_simulator_refuses_what_openai_strict_mode_refuses() -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(SimError, match=r"In context=\(\), 'additionalProperties' is required"):
        check_openai_format({"name": "x", "schema": loose, "strict": True}, "text.format")
    partial = {**loose, "additionalProperties": False, "required": []}
    with pytest.raises(SimError, match="Missing 'a'"):
        check_openai_format({"name": "x", "schema": partial, "strict": True}, "text.format")
    with pytest.raises(SimError, match='type: "object"'):
        check_openai_format({"name": "x", "schema": {"type": "array"}, "strict": True}, "text.format")
    check_openai_format({"name": "x", "schema": loose, "strict": False}, "text.format")  # not strict: accepted


def _turn_with_answer(text: str, config: StructuredOutputConfig) -> Turn:
    turn = Turn()
    STRUCTURED_OUTPUT.set(turn.data, config)
    turn.append(Block.user("q"))
    answer = Block.llm_text(text)
    turn.append(answer)
    settle_output(turn, [answer])
    return turn


def test_output_of_builds_the_type_or_raises_with_the_raw_text() -> None:
    config = output_config(Address)
    good = _turn_with_answer('{"street": "1 Rue", "city": "Paris", "postcode": null}', config)
    assert output_of(good, Address) == Address(street="1 Rue", city="Paris")
    assert output_of(good) == {"street": "1 Rue", "city": "Paris", "postcode": None}
    bad = _turn_with_answer('{"street": "1 Rue"}', config)
    assert BLOCK_META_OUTPUT.get(bad.blocks[-1].metadata) is None
    assert BLOCK_META_OUTPUT_ERRORS.get(bad.blocks[-1].metadata) == ["city: Field required"]
    with pytest.raises(OutputValidationError) as caught:
        output_of(bad, Address)
    assert caught.value.text == '{"street": "1 Rue"}' and caught.value.errors == ["city: Field required"]
    with pytest.raises(UsageError, match="no structured answer"):
        output_of(Turn(blocks=[Block.user("q"), Block.llm_text("hi")]))


def test_a_step_that_calls_tools_is_not_an_answer() -> None:
    turn = Turn()
    STRUCTURED_OUTPUT.set(turn.data, output_config(Address))
    blocks = [Block.llm_text("let me look"), Block.tool_call("c1", "lookup", {})]
    turn.extend(blocks)
    settle_output(turn, blocks)
    assert not any(str(BLOCK_META_OUTPUT_ERRORS) in b.metadata for b in turn.blocks)


def test_the_retry_prompt_lists_the_errors_and_bounds_them() -> None:
    text = retry_prompt([f"e{i}" for i in range(25)])
    assert "- e0\n" in text and "- e19" in text and "e20" not in text and "and 5 more" in text


def test_an_encoded_schema_reads_like_the_dict_and_is_written_as_its_text() -> None:
    from geppetto._json import dumps
    from geppetto.output import wire_schema_encoded

    config = output_config(Invoice)
    encoded = wire_schema_encoded(config, "openai")
    assert encoded is wire_schema_encoded(config, "openai")
    assert encoded == wire_schema(config, "openai") and encoded["required"][0] == "number"
    body = {"model": "m", "text": {"format": {"schema": encoded, "strict": True}}, "n": float("nan")}
    assert json.loads(dumps(body)) == {
        "model": "m",
        "text": {"format": {"schema": wire_schema(config, "openai"), "strict": True}},
        "n": "NaN",
    }
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})


def test_reading_the_config_again_reuses_it_until_the_stored_dict_changes() -> None:
    turn = Turn()
    STRUCTURED_OUTPUT.set(turn.data, output_config(Address))
    first = STRUCTURED_OUTPUT.get(turn.data)
    assert STRUCTURED_OUTPUT.get(turn.data) is first
    turn.data[str(STRUCTURED_OUTPUT)]["strict"] = False  # an edit in place is seen
    changed = STRUCTURED_OUTPUT.get(turn.data)
    assert changed is not None and changed.strict is False and first is not None and first.strict is True
    STRUCTURED_OUTPUT.set(turn.data, output_config(Address, name="other"))
    renamed = STRUCTURED_OUTPUT.get(turn.data)
    assert renamed is not None and renamed.name == "other"


# -- hostile schemas: refused when the config is made, before any request -----------------------------


def _nested(levels: int) -> tuple[dict[str, Any], Any]:
    """A schema of ``levels`` objects inside each other (two JSON levels each) and an answer for it."""
    schema: dict[str, Any] = {"type": "string"}
    value: Any = "x"
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
        value = {"a": value}
    return schema, value


@pytest.mark.parametrize(
    ("schema", "where", "through"),
    [
        ({"$ref": "#"}, "(root)", "$ref '#'"),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}},
            "$defs/A",
            "$ref '#/$defs/A'",
        ),
        (
            {
                "type": "object",
                "$defs": {
                    "A": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/B"}]},
                    "B": {"allOf": [{"$ref": "#/$defs/A"}]},
                },
                "properties": {"a": {"$ref": "#/$defs/A"}},
            },
            "$defs/A",
            "anyOf[1] -> $ref '#/$defs/B' -> allOf[0] -> $ref '#/$defs/A'",
        ),
        ({"type": "object", "allOf": [{"$ref": "#"}]}, "(root)", "allOf[0] -> $ref '#'"),
    ],
)
def test_a_schema_that_refers_back_to_itself_in_place_is_refused(
    schema: dict[str, Any], where: str, through: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        output_config(schema)
    assert str(refused.value) == (
        f"structured output: the schema at {where} refers back to itself through {through} without going into "
        "a property or an item, so no answer could be checked against it; give the loop a property or an item "
        "to go through, or remove it"
    )
    with pytest.raises(ConfigurationError, match="refers back to itself"):  # made directly, or read from a turn
        StructuredOutputConfig(name="x", schema=schema)


def test_a_recursive_schema_that_goes_into_the_answer_is_accepted() -> None:
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}
    config = output_config(tree)
    assert check_output(config, '{"children": [{"children": []}]}') == ({"children": [{"children": []}]}, [])
    assert output_config(Category).schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Category"}
    anchored = {
        "type": "object",
        "$defs": {"N": {"$anchor": "node", "type": "integer"}},
        "properties": {"n": {"$ref": "#node"}},
    }
    assert check_output(output_config(anchored), '{"n": "x"}') == (None, ["n: 'x' is not of type 'integer'"])
    # a "$ref" that is a property's name, or text inside an enum, const or default, is no reference
    odd = {"type": "object", "properties": {"$ref": {"type": "string", "enum": [{"$ref": "http://x"}]}}}
    assert output_config(odd).schema == odd


@pytest.mark.parametrize(
    "ref", ["http://schemas.example/thing.json", "file:///etc/passwd", "thing.json#/a", "https://x/y#"]
)
def test_a_reference_outside_the_schema_is_refused_and_nothing_is_fetched(ref: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
    with pytest.raises(ConfigurationError) as refused:
        output_config(schema)
    assert str(refused.value) == (
        f"structured output: the $ref {ref!r} at properties/a points outside the schema, and geppetto never fetches "
        "schemas (from the network or from files); copy the schema it names under $defs and refer to it as "
        "'#/$defs/Name'"
    )


def test_a_reference_to_nothing_is_refused() -> None:
    with pytest.raises(ConfigurationError) as refused:
        output_config({"type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}})
    assert str(refused.value) == (
        "structured output: the $ref '#/$defs/Gone' at properties/a points at nothing in the schema; point it at "
        "a schema the document holds, such as '#/$defs/Name'"
    )


def test_the_validator_never_fetches_a_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.request

    from geppetto.output import _jsonschema_validator

    opened: list[Any] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: opened.append(a))
    check = _jsonschema_validator({"type": "object", "properties": {"a": {"$ref": "http://x.invalid/a.json"}}}, False)
    with pytest.raises(Exception, match="Unresolvable"):
        check({"a": 1})
    assert opened == []


def test_a_schema_nested_too_deeply_is_refused_naming_the_limit() -> None:
    with pytest.raises(ConfigurationError) as refused:
        output_config(_nested(5_000)[0])  # 10,000 levels: past what json.dumps itself can encode
    assert str(refused.value) == (
        "structured output: the schema nests objects and arrays thousands of levels deep, past the limit of 100 "
        "(providers take 5 to 10 levels of objects); flatten it, or name repeated parts under $defs"
    )
    with pytest.raises(ConfigurationError, match="nests objects and arrays 101 levels deep, past the limit of 100"):
        output_config(_nested(50)[0])
    schema, value = _nested(49)  # 99 levels: every wire form is made and an answer checks
    config = output_config(schema)
    for dialect in ("openai", "anthropic", "gemini", "gemini-openapi"):
        wire_schema(config, dialect)  # type: ignore[arg-type]
    assert check_output(config, json.dumps(value)) == (value, [])


def test_an_answer_too_deep_to_check_is_an_error_not_a_crash() -> None:
    config = output_config({"type": "object", "properties": {"c": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}})
    value: Any = None
    for _ in range(199):  # as deep as a provider's JSON may go
        value = {"c": value}
    assert check_output(config, json.dumps(value)) == (
        None,
        ["(answer): nested too deeply to check against the schema; answer with less nesting"],
    )
