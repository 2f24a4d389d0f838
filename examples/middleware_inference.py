"""Middleware inference (the seeds' example): logging, an uppercase middleware and the tool loop around
one engine, each switched on by a flag. Runs offline against the bundled simulator.

    python examples/middleware_inference.py --with-logging --with-uppercase --with-tools "Weather in Paris?"
"""

from __future__ import annotations

import argparse
import logging

import geppetto as gp
from geppetto.events import TextPrinter
from geppetto.middleware import logging_middleware, new_blocks_not_in, snapshot_block_ids, tool_loop
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve
from geppetto.tools import ToolRegistry, tool


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 21°C, clear sky"


def uppercase() -> gp.Middleware:
    """Uppercase the text of every llm_text block the inference adds."""

    def middleware(next_handler: gp.Handler) -> gp.Handler:
        async def handler(turn: gp.Turn) -> gp.Turn:
            before = snapshot_block_ids(turn)
            turn = await next_handler(turn)
            for block in new_blocks_not_in(turn, before):
                if block.kind is gp.BlockKind.LLM_TEXT:
                    block.payload["text"] = block.text.upper()
            return turn

        return handler

    return middleware


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt", nargs="?", default="What is the weather in Paris?")
    parser.add_argument("--with-logging", action="store_true")
    parser.add_argument("--with-uppercase", action="store_true")
    parser.add_argument("--with-tools", action="store_true")
    args = parser.parse_args()

    registry = ToolRegistry([get_weather])
    chain: list[gp.Middleware] = []
    if args.with_logging:
        logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
        chain.append(logging_middleware())
    if args.with_uppercase:
        chain.append(uppercase())
    if args.with_tools:
        chain.append(tool_loop(registry))  # innermost: runs the model again after each tool result

    with serve() as sim:
        tools = registry.list() if args.with_tools else None
        engine = ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=sim.openai_url, tools=tools)
        turn = gp.Turn()
        turn.append(gp.Block.user(args.prompt))
        with gp.with_sinks(TextPrinter()):
            turn = gp.run_sync(gp.with_middleware(engine, *chain), turn)
    print("final turn:")
    for block in turn.blocks:
        print(f"  {block.kind.value:>9}: {block.text or block.payload}")


if __name__ == "__main__":
    main()
