"""MCP servers for the tests, built with the `mcp` SDK: `python mcp_test_server.py stdio|http [PORT]|paged`.

`paged` is a low-level server listing 5 tools, `t0` to `t4`, two to a page.


Tools: `add` (structured result), `picture` (an image), `refuse` (an isError result), `slow` (hangs),
`die` (the process exits, after a line on stderr), `grow` (adds the tool `extra` and tells the client
its tool list changed).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("geppetto-test")
PNG = bytes.fromhex("89504e470d0a1a0a") + b"\0" * 92


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@server.tool()
def picture() -> Image:
    """Return a small picture."""
    return Image(data=PNG, format="png")


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, saying why."""
    raise ValueError(f"refused: {reason}")


@server.tool()
async def slow() -> str:
    """Never answers in time."""
    await asyncio.sleep(60)
    return "late"


@server.tool()
def die() -> str:
    """Ends the server process."""
    print("the test server is exiting on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra`."""

    def extra() -> str:
        """A tool added at run time."""
        return "extra here"

    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


async def _paged() -> None:
    import mcp.types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    names = [f"t{i}" for i in range(5)]

    async def list_tools(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = [
            types.Tool(name=n, description=f"tool {n}", input_schema={"type": "object", "properties": {}})
            for n in names[start : start + 2]
        ]
        more = start + 2 < len(names)
        return types.ListToolsResult(tools=page, next_cursor=str(start + 2) if more else None)

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} called")])

    low = Server("geppetto-paged", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await low.run(read, write, low.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1] == "paged":
        asyncio.run(_paged())
    elif sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
