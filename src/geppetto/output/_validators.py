"""Output validators: business rules a structured answer must pass, asking the model again with :class:`Retry`."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._exceptions import Retry, UsageError
from ..turns import Turn

__all__ = ["VALIDATORS", "Validator", "refusal", "validating"]

Validator = Callable[[Any], Any]
"""``fn(value)``: the structured answer (built as the output type when one was given); it raises
:class:`~geppetto.Retry` to send a message back and have the model answer again. It may be async."""

VALIDATORS: contextvars.ContextVar[tuple[Any, tuple[Validator, ...]]] = contextvars.ContextVar(
    "geppetto_output_validators", default=(None, ())
)
"""The output type and validators of the running inference (``Session.run(..., validators=[...])``)."""


@contextlib.contextmanager
def validating(output: Any, validators: Sequence[Validator] | None) -> Iterator[None]:
    """Check the structured answers of the inferences started inside the block with ``validators``."""
    checked = tuple(validators or ())
    for fn in checked:
        if not callable(fn):
            raise UsageError(
                f"validators= takes functions of the answer (def check(value): ... raise geppetto.Retry(...)), "
                f"got {type(fn).__name__}"
            )
    if checked and output is None:
        raise UsageError("validators= check a structured answer: pass output=Model too")
    token = VALIDATORS.set((output, checked))
    try:
        yield
    finally:
        VALIDATORS.reset(token)


async def refusal(turn: Turn) -> tuple[Validator, Retry] | None:
    """The first validator that refuses ``turn``'s structured answer, with the :class:`Retry` it raised."""
    target, validators = VALIDATORS.get()
    if not validators:
        return None
    from ._build import output_of

    value = output_of(turn, target) if isinstance(target, type) else output_of(turn)
    for fn in validators:
        try:
            result = fn(value)
            if inspect.isawaitable(result):
                await result
        except Retry as exc:
            return fn, exc
    return None
