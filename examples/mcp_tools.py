"""Tools from an MCP server beside a Python tool, in one tool loop. Runs offline.

    python examples/mcp_tools.py

Starts the `mcp-server-time` MCP server over stdio (installed by `pip install 'geppetto[mcp]'
mcp-server-time`; `make setup` installs both) and the bundled simulator, whose scripted model calls a tool
when the prompt names it.
"""

from __future__ import annotations

import asyncio
import sys

import geppetto as gp
from geppetto.simulator import serve
from geppetto.tools import ToolRegistry, tool
from geppetto.tools.mcp import McpServers


@tool
def shout(text: str) -> str:
    """Repeat the text in capitals."""
    return text.upper()


async def main() -> None:
    time_server = f"{sys.executable} -m mcp_server_time --local-timezone UTC"
    with serve() as sim:
        async with McpServers([time_server], registry=ToolRegistry([shout])) as servers:
            print("tools:", ", ".join(servers.registry.names()))
            async with sim.engine("anthropic", model="claude-sonnet-4-5") as engine:
                session = gp.Session(engine, tools=servers.registry)
                for prompt in ("get_current_time for 'Asia/Tokyo'", "shout 'hello from python'"):
                    turn = await session.run(prompt)
                    use = [b for b in turn.blocks if b.kind is gp.BlockKind.TOOL_USE][-1]
                    print(f"{prompt} -> {str(use.payload['result']).splitlines()[0:3]}")


if __name__ == "__main__":
    asyncio.run(main())
