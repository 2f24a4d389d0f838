"""The built-in demo tools behind ``--with-tools``: weather, calculator, echo, and a table booking that waits
for the user's approval. Deterministic and offline."""

from __future__ import annotations

import ast
import hashlib
import operator
from collections.abc import Callable
from typing import Any

from ..tools import Tool, ToolRegistry, tool

__all__ = ["book_table", "calculator", "demo_registry", "echo", "get_weather"]

_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "foggy")


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city (made up, but the same city always gets the same weather)."""
    seed = int(hashlib.sha256(city.strip().lower().encode()).hexdigest()[:8], 16)
    return {"city": city, "temperature_c": 5 + seed % 25, "conditions": _CONDITIONS[seed % len(_CONDITIONS)]}


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _evaluate(node: ast.AST) -> float:
    # Only numbers and arithmetic: the expression comes from a model, so nothing else is evaluated.
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large (at most 100)")
        return float(_BINARY[type(node.op)](_evaluate(node.left), right))
    raise ValueError("only numbers and + - * / // % ** and parentheses are allowed")


@tool
def calculator(expression: str) -> str:
    """Calculate an arithmetic expression such as "2 * (3 + 4)" and return the number."""
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except SyntaxError:
        raise ValueError(f"{expression!r} is not an arithmetic expression") from None
    return str(int(value)) if float(value).is_integer() else repr(value)


@tool
def echo(text: str) -> str:
    """Echo the given text back unchanged."""
    return text


@tool(requires_approval=True)
def book_table(restaurant: str, time: str) -> str:
    """Book a restaurant table (pretend; asks for approval first)."""
    # Nothing is booked: the tool is here so that approvals can be tried offline (``run``, ``chat``, ``serve``).
    return f"booked a table at {restaurant} for {time} (pretend booking: nothing left this machine)"


def demo_registry() -> ToolRegistry:
    """A fresh registry holding the demo tools (``book_table`` needs the user's approval before it runs)."""
    tools: list[Tool] = [get_weather, calculator, echo, book_table]
    return ToolRegistry(tools)
