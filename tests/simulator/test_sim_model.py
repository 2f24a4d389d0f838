"""The scripted model: tool selection by name or description words, argument filling, answers from results."""

from __future__ import annotations

from geppetto.simulator import Reply, ToolCall
from geppetto.simulator._model import Msg, ToolSpec, decide, fill_value, is_reasoning_model

WEATHER = ToolSpec(
    "get_weather",
    "Current conditions for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ADD = ToolSpec(
    "add",
    "Add two numbers",
    {"type": "object", "properties": {"a": {"type": "integer"}, "unit": {"type": "string", "enum": ["cm", "m"]}}},
)


def test_tool_by_name_words_and_description() -> None:
    assert decide([Msg("user", "What is the weather in New York?")], [WEATHER, ADD]) == Reply(
        tool_calls=[ToolCall("get_weather", {"city": "New York"})]
    )
    assert decide([Msg("user", "Please add 4 metres in m")], [WEATHER, ADD]) == Reply(
        tool_calls=[ToolCall("add", {"a": 4, "unit": "m"})]
    )
    assert decide([Msg("user", "current conditions for Rome")], [WEATHER]).tool_calls[0].name == "get_weather"
    assert decide([Msg("user", "Tell me a joke")], [WEATHER]) == Reply(text="You said: Tell me a joke")
    assert decide([Msg("user", "weather in Rome")], [WEATHER], choice="none") == Reply(text="You said: weather in Rome")
    assert decide([Msg("user", "hi")], [WEATHER, ADD], choice="add").tool_calls[0].name == "add"


def test_answer_after_results_and_no_repeat_call() -> None:
    msgs = [
        Msg("user", "weather in Rome"),
        Msg("call", '{"city":"Rome"}', "get_weather", "c1"),
        Msg("result", "21C", call_id="c1"),
    ]
    assert decide(msgs, [WEATHER]) == Reply(text="Here is what the tools returned. get_weather: 21C.")


def test_fill_value_and_reasoning_names() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    assert fill_value(schema, 'count 2.5 "red"') == {"n": 2.5, "ok": True, "tags": ["red"]}
    assert [is_reasoning_model(m) for m in ["o3-mini", "gpt-5", "sim-reasoner", "gpt-4.1", "openai/o4-mini"]] == [
        True,
        True,
        True,
        False,
        True,
    ]
