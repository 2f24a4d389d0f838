"""The structured-output middleware: retry an answer that does not match the schema."""

from __future__ import annotations

from ..engine import Handler
from ..output import (
    BLOCK_META_OUTPUT_ERRORS,
    STRUCTURED_OUTPUT,
    OutputValidationError,
    output_block,
    refusal,
    retry_prompt,
)
from ..turns import BLOCK_META_MIDDLEWARE, Block, Turn
from ._chain import Middleware

__all__ = ["structured_output"]


def structured_output() -> Middleware:
    """Enforce ``require_valid`` of the turn's :data:`~geppetto.output.STRUCTURED_OUTPUT` config.

    The engine records whether the answer matched the schema. When it did not and the config has
    ``require_valid``, this appends a user block telling the model what is wrong and runs the inner
    handler again (the tool loop included, so the structured answer is the one after the tools), up to
    ``max_retries`` times, then raises :class:`~geppetto.output.OutputValidationError` carrying the raw
    text, the errors and the turn. Without ``require_valid`` the answer and its errors are returned as
    they are. A valid answer then goes through the output validators of the inference
    (``Session.run(..., validators=[...])``): one raising :class:`~geppetto.Retry` has its message sent
    back as a user block and the model answers again, within the same ``max_retries``. Turns without a
    config pass straight through. Every :class:`~geppetto.Session` runs this
    outermost; add it yourself when you compose an engine without a session.
    """

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            config = STRUCTURED_OUTPUT.get(turn.data)
            if config is None:
                return await next_handler(turn)
            retries = 0
            while True:
                turn = await next_handler(turn)
                block = output_block(turn)
                errors = BLOCK_META_OUTPUT_ERRORS.get(block.metadata) if block is not None else None
                if errors and not config.require_valid:
                    return turn
                if errors:
                    errors = [str(e) for e in errors]
                    ask_with, by = retry_prompt(errors), "structured_output"
                    failed = f"the answer does not match the schema {config.name!r}"
                else:
                    refused = await refusal(turn)
                    if refused is None:
                        return turn
                    fn, exc = refused
                    name = getattr(fn, "__qualname__", repr(fn))
                    errors, ask_with, by = [exc.message], exc.message, "output_validator"
                    failed = f"the answer was refused by the output validator {name}"
                if retries >= config.max_retries:
                    tries = f"after {retries + 1} attempts" if retries else "and retries are off (max_retries=0)"
                    raise OutputValidationError(
                        f"{failed} {tries}: " + "; ".join(errors[:5]),
                        text=block.text if block is not None else "",
                        errors=errors,
                        turn=turn,
                    )
                retries += 1
                ask = Block.user(ask_with)
                BLOCK_META_MIDDLEWARE.set(ask.metadata, by)
                turn.append(ask)

        return handler

    return middleware
