"""@tool: schemas from type hints, validation, serialization, registry, and definition errors."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Annotated, Any

import pydantic
import pytest

import geppetto as gp
from geppetto.tools import TOOL_CONFIG, Tool, ToolConfig, ToolDefinition, ToolRegistry, serialize_result, tool
from geppetto.turns import Turn, dumps_yaml, loads_yaml


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Location(pydantic.BaseModel):
    city: str
    country: str | None = None


def test_schema_from_hints_covers_optional_defaults_enums_lists_and_nested_models() -> None:
    @tool
    def forecast(
        where: Location,
        days: int,
        unit: Unit = Unit.CELSIUS,
        hours: list[int] | None = None,
        note: Annotated[str, pydantic.Field(description="free text")] = "",
    ) -> str:
        """Weather forecast for a place.

        Longer explanation that the model does not need.
        """
        return "sunny"

    assert forecast.definition == ToolDefinition(
        name="forecast",
        description="Weather forecast for a place.",
        parameters={
            "$defs": {
                "Location": {
                    "properties": {
                        "city": {"title": "City", "type": "string"},
                        "country": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None,
                            "title": "Country",
                        },
                    },
                    "required": ["city"],
                    "title": "Location",
                    "type": "object",
                },
                "Unit": {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"},
            },
            "additionalProperties": False,
            "properties": {
                "where": {"$ref": "#/$defs/Location"},
                "days": {"title": "Days", "type": "integer"},
                "unit": {"$ref": "#/$defs/Unit", "default": "celsius"},
                "hours": {
                    "anyOf": [{"items": {"type": "integer"}, "type": "array"}, {"type": "null"}],
                    "default": None,
                    "title": "Hours",
                },
                "note": {"default": "", "description": "free text", "title": "Note", "type": "string"},
            },
            "required": ["where", "days"],
            "type": "object",
        },
    )


def test_validate_builds_nested_models_and_enums_and_applies_defaults() -> None:
    @tool
    def forecast(where: Location, unit: Unit = Unit.CELSIUS, hours: list[int] | None = None) -> str:
        """Forecast."""
        return ""

    kwargs = forecast.validate({"where": {"city": "Paris"}, "unit": "fahrenheit"})
    assert kwargs == {"where": Location(city="Paris"), "unit": Unit.FAHRENHEIT, "hours": None}
    with pytest.raises(pydantic.ValidationError):
        forecast.validate({"where": {"city": "Paris"}, "surprise": 1})


def test_parameter_names_that_clash_with_pydantic_still_work() -> None:
    def odd(json: str, model_name: str, _private: int = 2) -> str:
        """Odd names."""
        return f"{json}{model_name}{_private}"

    t = tool(odd)
    assert t.definition.parameters == {
        "additionalProperties": False,
        "properties": {
            "json": {"title": "Json", "type": "string"},
            "model_name": {"title": "Model Name", "type": "string"},
            "_private": {"default": 2, "title": "Private", "type": "integer"},
        },
        "required": ["json", "model_name"],
        "type": "object",
    }
    kwargs = t.validate({"json": "a", "model_name": "b"})
    assert kwargs == {"json": "a", "model_name": "b", "_private": 2}
    assert t(**kwargs) == "ab2"


def test_tool_options_and_calling_the_tool_calls_the_function() -> None:
    @tool(name="adder", description="Adds.", retryable=True, max_retries=3, backoff_s=0.5, timeout_s=2.0)
    def add(a: int, b: int = 1) -> int:
        return a + b

    assert isinstance(add, Tool)
    assert add(2, b=3) == 5
    assert (add.name, add.definition.description, add.retryable, add.max_retries, add.backoff_s, add.timeout_s) == (
        "adder",
        "Adds.",
        True,
        3,
        0.5,
        2.0,
    )
    assert ToolDefinition.from_dict(add.definition.to_dict()) == add.definition


def _no_hint(x, y: int) -> int:  # type: ignore[no-untyped-def]
    return y


def _callable_param(cb: Callable[[int], int]) -> int:
    return cb(1)


class _Opaque:
    pass


def _opaque_param(thing: _Opaque) -> str:
    return ""


def _varargs(*items: int) -> int:
    return 0


def _varkw(city: str, **options: str) -> str:
    return city


def _missing_name(city: str, unit: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
    return city


@pytest.mark.parametrize(
    ("fn", "needle"),
    [
        (_no_hint, "tool _no_hint: parameter 'x' has no type hint"),
        (_callable_param, "tool _callable_param: parameter 'cb' has type"),
        (_opaque_param, "tool _opaque_param: parameter 'thing' has type"),
        (_varargs, "tool _varargs: parameter *items takes any number of arguments"),
        (_varkw, "tool _varkw: parameter **options takes any number of arguments"),
        (
            _missing_name,
            "tool _missing_name: the type hint of parameter 'unit' ('Missing') cannot be resolved "
            "(name 'Missing' is not defined); define or import that type at module level",
        ),
    ],
)
def test_bad_functions_fail_at_registration_naming_function_and_parameter(fn: Callable[..., Any], needle: str) -> None:
    with pytest.raises(gp.ToolDefinitionError) as info:
        ToolRegistry([fn])
    assert needle in str(info.value)


def _bad_return(city: str) -> Missing:  # type: ignore[name-defined]  # noqa: F821
    """A return hint that does not resolve."""
    return city


def test_an_unresolvable_return_hint_does_not_matter() -> None:
    t = tool(_bad_return)
    assert t.definition.parameters["properties"] == {"city": {"title": "City", "type": "string"}}
    assert t.call(t.validate({"city": "Oslo"})) == "Oslo"


def test_positional_only_parameters_are_described_and_called_by_position() -> None:
    @tool
    def scale(x: int, /, factor: int = 2) -> int:
        """Scale."""
        return x * factor

    assert scale.definition.parameters["required"] == ["x"]
    assert scale.call(scale.validate({"x": 4})) == 8
    assert scale.call({"x": 4, "factor": 3}) == 12


def test_bad_tool_name_is_refused_with_the_fix() -> None:
    with pytest.raises(gp.ToolDefinitionError, match=r"pass @tool\(name='...'\)"):
        tool(name="has space")(lambda: None)


def test_serialize_result() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    assert serialize_result("plain text") == "plain text"
    assert serialize_result({"a": [1, 2], "ü": None}) == '{"a":[1,2],"ü":null}'
    assert serialize_result(Location(city="Oslo")) == '{"city":"Oslo","country":null}'
    assert serialize_result(Point(1, 2)) == '{"x":1,"y":2}'
    assert serialize_result(Unit.CELSIUS) == '"celsius"'


def test_registry_add_get_list_remove_merge() -> None:
    def a(x: int) -> int:
        """A."""
        return x

    def b(x: int) -> int:
        """B."""
        return x

    reg = ToolRegistry([a])
    tb = reg.add(b)
    assert reg.names() == ["a", "b"]
    assert reg.get("b") is tb
    assert reg.get("zzz") is None
    assert [d.name for d in reg.list()] == ["a", "b"]
    assert "a" in reg and len(reg) == 2
    with pytest.raises(gp.UsageError, match="already registered"):
        reg.add(a)
    reg.remove("a")
    assert reg.names() == ["b"]
    with pytest.raises(KeyError, match="no tool named 'a'"):
        reg.remove("a")

    other = ToolRegistry([tool(name="b", description="new b")(b), a])
    merged = reg.merge(other)
    assert merged.names() == ["b", "a"]
    assert merged.list()[0].description == "new b"
    assert reg.names() == ["b"]  # merge does not change either side
    assert merged.subset(["a", "gone"]).names() == ["a"]
    assert merged.subset(None).names() == ["b", "a"]


def test_tool_config_round_trips_through_turn_data() -> None:
    turn = Turn()
    cfg = ToolConfig(enabled=["a"], tool_choice="required", max_iterations=3)
    TOOL_CONFIG.set(turn.data, cfg)
    assert dict(turn.data) == {
        "geppetto.tool_config@v1": {"enabled": ["a"], "tool_choice": "required", "max_iterations": 3}
    }
    assert TOOL_CONFIG.get(loads_yaml(dumps_yaml(turn)).data) == cfg
    assert TOOL_CONFIG.get(Turn().data) is None
