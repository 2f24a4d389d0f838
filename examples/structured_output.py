"""Structured output: the answer as a validated pydantic model, on every engine. Runs offline.

    python examples/structured_output.py

Each engine asks through its provider's own mechanism (Responses ``text.format``, Chat ``response_format``,
Claude ``output_config.format``, Gemini ``responseJsonSchema``). The first answer below is scripted to be
wrong: with ``require_valid=True`` the model is told what is wrong and answers again.
"""

from __future__ import annotations

from typing import Literal

import pydantic

import geppetto as gp
from geppetto.simulator import Reply, serve


class City(pydantic.BaseModel):
    name: str
    population: int
    kind: Literal["capital", "town"]
    country: str | None = None


MODELS = {
    "openai-responses": "sim-1",
    "openai-chat": "sim-1",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}


async def main() -> None:
    with serve() as sim:
        for provider, model in MODELS.items():
            async with sim.engine(provider, model=model) as engine:
                turn = await gp.Session(engine).run("Describe Paris, a capital of 2100000 people", output=City)
                city = gp.output_of(turn, City)
                print(f"{provider:>17}: {city!r}")

        sim.queue(Reply(text='{"name": "Paris", "kind": "village"}'))  # a wrong first answer
        async with sim.engine("openai-responses") as engine:
            session = gp.Session(engine)
            turn = await session.run(
                "Describe Paris, a capital of 2100000 people", output=gp.output_config(City, require_valid=True)
            )
        retry = next(b for b in turn.blocks if b.kind is gp.BlockKind.USER and "does not match" in b.text)
        print("retried after:", "; ".join(line[2:] for line in retry.text.splitlines() if line.startswith("- ")))
        print("valid answer:", gp.output_of(turn, City))


if __name__ == "__main__":
    import asyncio

    asyncio.run(main())
