"""``gp.ToolContext`` (session, call id, deps, a read-only view of the Turn) and ``gp.Retry`` from a tool and
from an output validator, on all four engines against the simulator."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic
import pytest

import geppetto as gp
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolCallError, ToolRegistry, execute_tool_calls
from geppetto.turns import BLOCK_META_MIDDLEWARE, Block, BlockKind
from sim_engines import PROVIDERS, engine


@dataclass
class Orders:
    """The application object the tools are given (a database, a client...)."""

    known: dict[str, str]
    seen: list[tuple[str, str, str]] = field(default_factory=list)


def lookup(ctx: gp.ToolContext, order_id: str) -> str:
    """Look up an order by its id."""
    orders: Orders = ctx.deps
    assert ctx.turn is not None
    prompt = next(b.text for b in ctx.turn.blocks if b.kind is BlockKind.USER)
    orders.seen.append((ctx.session_id, ctx.call_id, prompt))
    ctx.turn.blocks[0].payload["text"] = "changed"  # a copy: the Turn stays as it was
    if order_id not in orders.known:
        raise gp.Retry(f"no order {order_id!r}; order ids look like A-1")
    return orders.known[order_id]


def test_the_context_parameter_is_not_in_the_schema() -> None:
    t = gp.tool(lookup)
    assert t.context_param == "ctx"
    assert t.definition.parameters["properties"] == {"order_id": {"title": "Order Id", "type": "string"}}
    assert t.definition.parameters["required"] == ["order_id"]


def test_a_context_parameter_must_come_first() -> None:
    def late(order_id: str, ctx: gp.ToolContext) -> str:
        return order_id

    with pytest.raises(gp.ToolDefinitionError, match="only the first parameter can; move it first"):
        gp.tool(late)


async def test_an_async_tool_gets_the_context_too_and_outside_a_session_it_has_no_ids() -> None:
    @gp.tool
    async def where(ctx: gp.ToolContext) -> str:
        return f"{ctx.tool_name}|{ctx.call_id}|{ctx.session_id}|{ctx.deps}"

    (answer,) = await execute_tool_calls(ToolRegistry([where]), [Block.tool_call("c1", "where", {})])
    assert answer.payload["result"] == "where|c1||None"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_receives_session_call_id_deps_and_the_turn(geppetto_sim: Simulator, provider: str) -> None:
    orders = Orders({"A-1": "shipped"})
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("lookup", {"order_id": "A-1"}, call_id="call_a1")]))
    async with engine(geppetto_sim, provider) as eng:
        session = gp.Session(eng, tools=[lookup], deps=orders)
        turn = await session.run("Where is order A-1?")
    ((session_id, call_id, prompt),) = orders.seen
    assert session_id == session.session_id
    call = next(b for b in turn.blocks if b.kind is BlockKind.TOOL_CALL)
    assert call_id == call.payload["id"]
    assert prompt == "Where is order A-1?" and turn.blocks[0].text == "Where is order A-1?"
    result = next(b for b in turn.blocks if b.kind is BlockKind.TOOL_USE)
    assert result.payload["result"] == "shipped"
    offered = json.dumps(next(r.body for r in geppetto_sim.requests if isinstance(r.body, dict)))
    assert "order_id" in offered and '"ctx"' not in offered


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retry_from_a_tool_sends_its_message_back_and_the_model_tries_again(
    geppetto_sim: Simulator, provider: str
) -> None:
    orders = Orders({"A-1": "shipped"})
    geppetto_sim.queue(
        Reply(tool_calls=[ToolCall("lookup", {"order_id": "1"})]),
        Reply(tool_calls=[ToolCall("lookup", {"order_id": "A-1"})]),
    )
    async with engine(geppetto_sim, provider) as eng:
        turn = await gp.Session(eng, tools=[lookup], deps=orders).run("Where is my order?")
    first, second = (b for b in turn.blocks if b.kind is BlockKind.TOOL_USE)
    assert (
        first.payload["error"]
        == "no order '1'; order ids look like A-1 (tool lookup asks you to correct the call and try again)"
    )
    assert second.payload["result"] == "shipped"
    # the model read the message as that call's error
    assert "order ids look like A-1" in json.dumps([r.body for r in geppetto_sim.requests][1])
    assert turn.blocks[-1].kind is BlockKind.LLM_TEXT


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retry_from_a_tool_is_bounded_by_its_max_retries(geppetto_sim: Simulator, provider: str) -> None:
    orders = Orders({})
    geppetto_sim.queue(*[Reply(tool_calls=[ToolCall("lookup", {"order_id": str(i)})]) for i in range(4)])
    async with engine(geppetto_sim, provider) as eng:
        session = gp.Session(eng, tools=[lookup], deps=orders)
        with pytest.raises(ToolCallError) as caught:
            await session.run("Where is my order?")
        assert not session.running
    message = str(caught.value)
    assert message.startswith("tool lookup asked the model to try again more than its max_retries allow")
    assert "no order '2'" in message
    assert len(orders.seen) == 3  # max_retries=2: three tries, then the error


@gp.tool(max_retries=0)
def strict_lookup(order_id: str) -> str:
    """Look up an order by its id, once."""
    raise gp.Retry("try A-1")


async def test_a_tool_with_max_retries_0_fails_at_the_first_retry() -> None:
    registry = ToolRegistry([strict_lookup])
    with pytest.raises(ToolCallError, match="strict_lookup asked the model to try again"):
        await execute_tool_calls(registry, [Block.tool_call("c1", "strict_lookup", {"order_id": "x"})])


class City(pydantic.BaseModel):
    name: str
    population: int
    kind: Literal["capital", "town"]


PROMPT = "Describe Paris, a capital of 2100000 people"


def big_enough(city: City) -> None:
    if city.population < 1_000_000:
        raise gp.Retry(f"{city.name} has {city.population} people; the answer must be a city of a million or more")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retry_from_a_validator_sends_the_message_back_and_asks_again(
    geppetto_sim: Simulator, provider: str
) -> None:
    geppetto_sim.queue(
        Reply(text='{"name": "Lyon", "population": 500000, "kind": "town"}'),
        Reply(text='{"name": "Paris", "population": 2100000, "kind": "capital"}'),
    )
    async with engine(geppetto_sim, provider) as eng:
        turn = await gp.Session(eng).run(PROMPT, output=City, validators=[big_enough])
    city = gp.output_of(turn, City)
    assert city.population == 2100000
    ask = next(b for b in turn.blocks if BLOCK_META_MIDDLEWARE.get(b.metadata) == "output_validator")
    assert ask.kind is BlockKind.USER and ask.text.startswith("Lyon has 500000 people")
    assert "Lyon has 500000 people" in json.dumps([r.body for r in geppetto_sim.requests][-1])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_validator_retries_are_bounded_with_an_error_naming_the_validator(
    geppetto_sim: Simulator, provider: str
) -> None:
    small = Reply(text='{"name": "Lyon", "population": 500000, "kind": "town"}')
    geppetto_sim.queue(small, small, small)
    async with engine(geppetto_sim, provider) as eng:
        session = gp.Session(eng)
        with pytest.raises(gp.OutputValidationError) as caught:
            await session.run(PROMPT, output=City, validators=[big_enough])
        assert not session.running
    assert str(caught.value).startswith(
        "the answer was refused by the output validator big_enough after 3 attempts: Lyon has 500000 people"
    )
    assert caught.value.errors == ["Lyon has 500000 people; the answer must be a city of a million or more"]


async def test_an_async_validator_and_wrong_validators(geppetto_sim: Simulator) -> None:
    seen: list[Any] = []

    async def record(city: City) -> None:
        seen.append(city)

    async with engine(geppetto_sim, "openai-responses") as eng:
        session = gp.Session(eng)
        await session.run(PROMPT, output=City, validators=[record])
        assert isinstance(seen[0], City)
        with pytest.raises(gp.UsageError, match="pass output=Model too"):
            await session.run(PROMPT, validators=[record])
        with pytest.raises(gp.UsageError, match="validators= takes functions"):
            await session.run(PROMPT, output=City, validators=["not a function"])  # type: ignore[list-item]
