"""Tool calls that wait for a person: approval before a tool runs, and tools the client runs.

A waiting call is a ``tool_call`` block without a ``tool_use`` whose metadata holds its approval state
(``geppetto.approval@v1``, a dict). The state lives in the Turn, so it is saved with every snapshot and a
session restored in another process sees the same waiting calls. States:

- ``pending``: a person must approve or deny the call; ``client``: the client must run it and send the
  result. Both wait.
- ``approved``, ``denied`` (with ``reason``), ``answered`` (a client's ``result`` or ``error``): decided by
  :meth:`Session.resume <geppetto.Session.resume>`, not yet answered; the tool loop answers them when the
  inference resumes (it runs approved calls, refuses denied ones).
- ``expired``: nobody decided before ``expires_at``; ``dropped``: :meth:`Session.drop_pending
  <geppetto.Session.drop_pending>` refused it. Both are answered with a refusal the model reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._exceptions import ToolDefinitionError, UsageError
from .._json import parse_json
from ..turns import PAYLOAD_ARGS, PAYLOAD_ID, PAYLOAD_NAME, Block, Turn, block_meta_key
from ._executor import pending_tool_calls
from ._registry import ToolRegistry
from ._tool import Tool, ToolReportedError, serialize_result

__all__ = [
    "APPROVAL",
    "ApprovalPendingError",
    "ApprovalPolicy",
    "PendingCall",
    "Require",
    "apply_decisions",
    "approval_policy",
    "awaiting",
    "client_tool",
    "decided",
    "drop_calls",
    "has_unrun_decisions",
    "mark_waiting",
    "needs_person",
    "refusal_for",
    "registry_require",
]

APPROVAL = block_meta_key("geppetto", "approval", 1, dict)
"""``geppetto.approval@v1``: the approval state of a ``tool_call`` block (see the module docstring)."""

WAITING = ("pending", "client")
DECIDED = ("approved", "denied", "answered", "expired", "dropped")

Require = bool | Callable[[str, dict[str, Any]], bool]
"""Whether a call needs approval: a bool for every call, or a predicate on ``(tool_name, arguments)``."""


class ApprovalPendingError(UsageError):
    """The session has tool calls waiting for a decision; ``calls`` lists them."""

    def __init__(self, message: str, *, calls: Sequence[PendingCall] = ()) -> None:
        self.calls = list(calls)
        super().__init__(message)


@dataclass(frozen=True)
class ApprovalPolicy:
    """Which tool calls wait for a person, and for how long.

    ``require``: ``None`` leaves it to each tool (``@tool(requires_approval=...)``, an MCP tool's
    annotations) and the registry's policy; ``True``/``False`` asks for every call or none (``False`` is
    ``geppetto chat --yes``); a predicate ``(tool_name, arguments) -> bool`` decides per call.
    ``expires_s``: a waiting call not decided within this many seconds expires (the model is told it was
    refused); ``None`` waits for ever. Client-side tools always wait for the client, whatever ``require``.
    """

    require: Require | None = None
    expires_s: float | None = None

    def __post_init__(self) -> None:
        if self.require is not None and not isinstance(self.require, bool) and not callable(self.require):
            raise UsageError(
                f"ApprovalPolicy(require=...) takes True, False, None or a predicate (name, args) -> bool, "
                f"not {self.require!r}"
            )
        if self.expires_s is not None and self.expires_s <= 0:
            raise UsageError("ApprovalPolicy(expires_s=...) must be a positive number of seconds, or None")


def approval_policy(value: ApprovalPolicy | Require | None) -> ApprovalPolicy:
    """``value`` as an :class:`ApprovalPolicy` (a bool or predicate becomes its ``require``)."""
    if isinstance(value, ApprovalPolicy):
        return value
    return ApprovalPolicy(require=value)


@dataclass(frozen=True)
class PendingCall:
    """A tool call waiting for a decision. ``kind``: ``"approval"`` (approve or deny it) or ``"client"``
    (run it in the client and pass the result). ``expires_at``: a Unix time, or ``None``."""

    call_id: str
    name: str
    arguments: Any
    kind: Literal["approval", "client"]
    requested_at: float
    expires_at: float | None = None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.time() >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "kind": self.kind,
            "requested_at": self.requested_at,
            "expires_at": self.expires_at,
        }


def _state(block: Block) -> dict[str, Any] | None:
    value = APPROVAL.get(block.metadata)
    return value if isinstance(value, dict) else None


def _arguments(block: Block) -> Any:
    raw = block.payload.get(PAYLOAD_ARGS)
    if isinstance(raw, str):
        try:
            return parse_json(raw) if raw else {}
        except ValueError:
            return raw
    return raw if raw is not None else {}


def _pending_call(block: Block, state: dict[str, Any]) -> PendingCall:
    return PendingCall(
        call_id=str(block.payload.get(PAYLOAD_ID, "")),
        name=str(block.payload.get(PAYLOAD_NAME, "")),
        arguments=_arguments(block),
        kind="client" if state.get("state") == "client" else "approval",
        requested_at=float(state.get("requested_at", 0.0)),
        expires_at=state.get("expires_at"),
    )


def awaiting(turn: Turn | None) -> list[PendingCall]:
    """The calls of ``turn`` waiting for a person or the client, in turn order."""
    if turn is None:
        return []
    out = []
    for block in pending_tool_calls(turn):
        state = _state(block)
        if state is not None and state.get("state") in WAITING:
            out.append(_pending_call(block, state))
    return out


def decided(turn: Turn) -> list[tuple[Block, dict[str, Any]]]:
    """The unanswered calls of ``turn`` that carry a decision (or expired), with their state."""
    out = []
    for block in pending_tool_calls(turn):
        state = _state(block)
        if state is None:
            continue
        if state.get("state") in WAITING and _expired(state):
            state = {**state, "state": "expired"}
            APPROVAL.set(block.metadata, state)
        if state.get("state") in DECIDED:
            out.append((block, state))
    return out


def has_unrun_decisions(turn: Turn) -> bool:
    """Whether ``turn`` has decided calls not answered yet (approved, denied, answered by the client, or
    expired under a late decision): a resume whose inference has not run or did not finish."""
    return any(
        (s := _state(b)) is not None and s.get("state") in ("approved", "denied", "answered", "expired")
        for b in pending_tool_calls(turn)
    )


def _expired(state: dict[str, Any]) -> bool:
    expires_at = state.get("expires_at")
    return expires_at is not None and time.time() >= float(expires_at)


def needs_person(
    t: Tool | None, call: Block, policy: ApprovalPolicy, registry_require: Require | None
) -> Literal["pending", "client"] | None:
    """Whether ``call`` of tool ``t`` waits: ``"client"`` for a client-side tool, ``"pending"`` when the
    policy (else the registry's, else the tool's own ``requires_approval``) asks for approval.

    Arguments that are not a JSON object are left to the executor, which refuses them without running
    the tool; a predicate that raises asks (when unsure, a person decides)."""
    if t is None:
        return None
    if t.client_side:
        return "client"
    args = _arguments(call)
    if not isinstance(args, dict):
        return None
    for rule in (policy.require, registry_require):
        if rule is not None:
            return "pending" if _asks(rule, t.name, args) else None
    own = t.requires_approval
    if isinstance(own, bool):
        return "pending" if own else None
    return "pending" if _asks(lambda _n, a: own(a), t.name, args) else None


def _asks(rule: Require, name: str, args: dict[str, Any]) -> bool:
    if isinstance(rule, bool):
        return rule
    try:
        return bool(rule(name, dict(args)))
    except Exception:  # a person decides when the predicate cannot
        return True


def mark_waiting(calls: Sequence[tuple[Block, str]], policy: ApprovalPolicy) -> list[PendingCall]:
    """Give each ``(call, state)`` its waiting state (with the time it was requested and expires)."""
    now = time.time()
    out = []
    for block, kind in calls:
        state: dict[str, Any] = {"state": kind, "requested_at": now}
        if policy.expires_s is not None:
            state["expires_at"] = now + policy.expires_s
        APPROVAL.set(block.metadata, state)
        out.append(_pending_call(block, state))
    return out


def apply_decisions(turn: Turn, decisions: Mapping[str, Any]) -> None:
    """Write ``decisions`` (call id -> decision) into the waiting calls of ``turn``.

    For a call waiting for approval: ``True`` approves it, ``False`` denies it, a string denies it with
    that reason. For a client-side call: the value is the tool's result (a string as it is, anything else
    as JSON); a :class:`~geppetto.tools.ToolReportedError` (or any exception) is its error. A decision for
    a call that expired meanwhile leaves it expired. Raises :class:`~geppetto.UsageError` naming the
    waiting ids for an id that does not wait, or a decision of the wrong type, before changing anything.
    """
    blocks = {
        str(b.payload.get(PAYLOAD_ID, "")): b
        for b in pending_tool_calls(turn)
        if (s := _state(b)) is not None and s.get("state") in WAITING
    }
    waiting = ", ".join(blocks) or "(none)"
    updates: list[tuple[Block, dict[str, Any]]] = []
    for call_id, decision in decisions.items():
        block = blocks.get(call_id)
        if block is None:
            raise UsageError(f"no tool call {call_id!r} waits for a decision; waiting: {waiting}")
        state = dict(_state(block) or {})
        if _expired(state):
            state["state"] = "expired"
        elif state.get("state") == "client":
            state.update(_client_answer(decision))
        elif decision is True:
            state["state"] = "approved"
        elif decision is False or isinstance(decision, str):
            state.update(state="denied", reason=decision if isinstance(decision, str) else "")
        else:
            raise UsageError(
                f"the decision for call {call_id} must be True (approve), False (deny) or a string "
                f"(deny with that reason), not {decision!r}"
            )
        state["decided_at"] = time.time()
        updates.append((block, state))
    for block, state in updates:
        APPROVAL.set(block.metadata, state)


def _client_answer(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseException):
        message = str(value) if isinstance(value, ToolReportedError) else f"{type(value).__name__}: {value}"
        return {"state": "answered", "error": message or "the client reported an error"}
    try:
        return {"state": "answered", "result": serialize_result(value)}
    except Exception as exc:
        raise UsageError(f"the client's result must be a string or JSON-serializable, not {value!r} ({exc})") from exc


def refusal_for(state: dict[str, Any]) -> str | None:
    """The error the model reads for a decided call that does not run (``None`` when it runs or was
    answered by the client with a result)."""
    kind = state.get("state")
    if kind == "denied":
        reason = state.get("reason") or ""
        return "the user denied this tool call" + (f": {reason}" if reason else "; do not retry it")
    if kind == "expired":
        return "nobody approved this tool call in time (the request expired); it was not run"
    if kind == "dropped":
        reason = state.get("reason") or ""
        return "this tool call was dropped without running" + (f": {reason}" if reason else "")
    if kind == "answered":
        return state.get("error")
    return None


def drop_calls(turn: Turn, reason: str = "", *, only_expired: bool = False) -> list[Block]:
    """Refuse the waiting calls of ``turn`` (or only the expired ones): each gets its state and a
    ``tool_use`` error appended. Returns the ``tool_use`` blocks."""
    answers = []
    for block in pending_tool_calls(turn):
        state = _state(block)
        if state is None or state.get("state") not in WAITING:
            continue
        expired = _expired(state)
        if only_expired and not expired:
            continue
        state = {**state, "state": "expired" if expired else "dropped", "decided_at": time.time()}
        if reason and not expired:
            state["reason"] = reason
        APPROVAL.set(block.metadata, state)
        answers.append(Block.tool_use(str(block.payload.get(PAYLOAD_ID, "")), "", refusal_for(state)))
    turn.extend(answers)
    return answers


def _no_body() -> Any:
    raise ToolDefinitionError("a client-side tool runs in the client; geppetto never calls it")


def client_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> Tool:
    """A tool the client runs: the model may call it, the inference then ends with the call waiting, and
    ``await session.resume({call_id: result})`` gives the model the client's result.

    Declare it from a typed stub (its body never runs; the schema comes from the hints, the description
    from the docstring): ``client_tool(pick_color)``; or by name and JSON schema:
    ``client_tool(name="pick_color", description="...", parameters={"type": "object", ...})``.
    """
    if fn is not None:
        t = Tool(fn, name=name, description=description, client_side=True)
        t.fn = _no_body
        return t
    if not name:
        raise ToolDefinitionError(
            "client_tool needs a typed stub function or a name: client_tool(stub) or "
            "client_tool(name='pick_color', description='...', parameters={...})"
        )
    t = Tool(_no_body, name=name, description=description or "", client_side=True)
    if parameters is not None:
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise ToolDefinitionError(
                f"client tool {name}: parameters must be a JSON object schema ({{'type': 'object', ...}})"
            )
        t.definition = type(t.definition)(name=t.name, description=t.definition.description, parameters=parameters)
    return t


def registry_require(registry: ToolRegistry) -> Require | None:
    """The approval rule a registry was given (``ToolRegistry(..., approval=...)``), if any."""
    return getattr(registry, "approval", None)
