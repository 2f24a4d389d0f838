"""What one Interactions request sends: the steps after the latest proven interaction with
``previous_interaction_id``, or the whole Turn (with the reason it could not chain).

The choice is the shared proof's (:mod:`geppetto.providers._chain`); only the wire form is this API's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from geppetto._exceptions import ConfigurationError
from geppetto.tools import require_tool_results
from geppetto.turns import Block, Turn

from .._chain import AnchorScan, blocks_after_response, scan_chain, timed_scan
from .._streaming import call_names
from ._interactions_steps import MODES, WIRE, InteractionsState, blocks_to_steps, chain_seed

__all__ = ["InteractionPlan", "check_settings", "plan_interaction", "thinking_level_for"]

log = logging.getLogger("geppetto.providers.gemini.interactions")


@dataclass
class InteractionPlan:
    """One request's shape: ``mode`` (``chained``: with ``previous_interaction_id``; ``stateless``),
    the ``steps`` sent and the ``blocks`` they come from, ``full`` when those are the whole Turn,
    ``fallback`` (a reason code) and ``detail`` when the Turn could have chained but did not, ``base``
    (the state's, kept) and ``prefix`` (the proof's running digest over the blocks before the answer)."""

    mode: str
    steps: list[dict[str, Any]]
    blocks: list[Block] = field(default_factory=list)
    full: bool = False
    previous_interaction_id: str | None = None
    fallback: str = ""
    detail: str = ""
    base: str | None = None
    prefix: Any = None

    def whole(self, turn: Turn, fallback: str, detail: str) -> InteractionPlan:
        """The whole-Turn plan that replaces this one (after ``base`` when the Turn has one)."""
        blocks = list(turn.blocks)
        mode = "chained" if self.base else "stateless"
        return InteractionPlan(
            mode, blocks_to_steps(blocks), blocks, True, self.base, fallback, detail, self.base, self.prefix
        )


def _scan(turn: Turn, state: InteractionsState | None, metrics: Any) -> AnchorScan:
    seed = chain_seed(state)

    def run() -> AnchorScan:
        return scan_chain(turn, WIRE, seed=seed, incremental=True)

    return timed_scan(run, metrics, log=log, label="interactions")


def plan_interaction(
    turn: Turn, mode: str, state: InteractionsState | None, *, store: bool, metrics: Any
) -> InteractionPlan:
    """The plan of the request for ``turn``: ``mode`` is what the engine asks for; ``store=False`` (the
    server keeps nothing) always sends the whole Turn, a fallback when chaining was asked for."""
    base = state.base if state is not None else None
    empty = InteractionPlan(mode, [], base=base if store else None)
    if not store:
        require_tool_results(turn)
        code = "store_off" if mode == "chained" else ""
        return empty.whole(turn, code, "store=False: the server keeps no interaction to chain on" if code else "")
    scan = _scan(turn, state, metrics)
    empty.prefix = scan.hasher
    if mode != "chained":
        require_tool_results(turn)
        return InteractionPlan(
            "stateless", blocks_to_steps(list(turn.blocks)), list(turn.blocks), True, prefix=scan.hasher
        )
    anchor = scan.best()
    if anchor is not None:
        delta = blocks_after_response(turn, anchor)
        steps = blocks_to_steps(delta, call_names(turn))
        if steps:
            log.debug("interactions: anchor %s, %d delta blocks, %d steps", anchor, len(delta), len(steps))
            return InteractionPlan("chained", steps, delta, False, anchor, base=base, prefix=scan.hasher)
        require_tool_results(turn)
        return empty.whole(turn, "empty_delta", f"nothing after interaction {anchor} to send")
    if not scan.spans:
        return empty.whole(turn, "", "")
    return empty.whole(turn, scan.reason_code() or "fingerprint_mismatch", f"no valid anchor ({scan.reason()})")


_LEVELS = ("minimal", "low", "medium", "high", "xhigh")


def thinking_level_for(effort: str | None) -> str | None:
    """The ``thinking_level`` a ``reasoning_effort`` stands for (the same names)."""
    if effort is None or effort in _LEVELS:
        return effort
    raise ConfigurationError(f"reasoning_effort {effort!r} is not one of {', '.join(_LEVELS)}; or pass thinking_level")


def check_settings(
    mode: str | None,
    store: bool,
    background: bool,
    stream: bool,
    on_missing: str,
    max_resumes: int,
    poll_interval: float = 1.0,
) -> None:
    """Refuse engine settings that cannot work together, naming the fix."""
    if mode is not None and mode not in MODES:
        raise ConfigurationError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if background and not store:
        raise ConfigurationError("background=True needs the server to store the interaction; leave store=False out")
    if background and not stream:
        raise ConfigurationError(
            "background=True streams the interaction (so a broken stream can be resumed); leave stream=False out"
        )
    if on_missing not in ("resend", "raise"):
        raise ConfigurationError("on_previous_not_found must be 'resend' or 'raise'")
    if max_resumes < 0:
        raise ConfigurationError("max_resumes must be 0 or more")
    if not poll_interval > 0:
        raise ConfigurationError("poll_interval must be a positive number of seconds")
