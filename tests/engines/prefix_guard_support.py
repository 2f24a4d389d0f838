"""What the prefix guard's property tests share: the middleware actions they draw, the tools a middleware
may swap, and the property's run over every policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turn_edits import GUARD_ACTIONS, GUARD_TOOLS

ACTIONS, TOOLS = GUARD_ACTIONS, GUARD_TOOLS
STEPS = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 50), st.booleans()), min_size=2, max_size=5)
"""Two to five steps: an action, a pick (which block it touches) and whether the reply calls a tool."""


def under_policies(*policies: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``test(sim, policy, steps)`` for each of ``policies``, over drawn ``steps`` (``STEPS``)."""

    def wrap(test: Callable[..., Any]) -> Callable[..., Any]:
        drawn = given(steps=STEPS)(test)
        checked = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        return pytest.mark.parametrize("policy", list(policies))(checked(drawn))

    return wrap


def under_every_policy(test: Callable[..., Any]) -> Callable[..., Any]:
    """``test(sim, policy, steps)`` for each prefix policy every engine takes the same way, over drawn
    ``steps`` (``STEPS``)."""
    return under_policies("drop", "rewrite", "error")(test)
