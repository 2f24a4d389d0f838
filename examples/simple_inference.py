"""Simple inference: one Turn, one engine, one call. Runs offline against the bundled simulator.

    python examples/simple_inference.py

With a real key, drop the simulator and pass ``api_key=`` (or set OPENAI_API_KEY) and a real model.
"""

from __future__ import annotations

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve


def main() -> None:
    with serve() as sim:
        engine = ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=sim.openai_url)
        turn = gp.Turn()
        turn.append(gp.Block.system("You are a helpful assistant."))
        turn.append(gp.Block.user("Hello, geppetto!"))
        turn = gp.run_sync(engine, turn)
        for block in turn.blocks:
            print(f"{block.kind.value:>8}: {block.text}")


if __name__ == "__main__":
    main()
