"""MCP tools against real MCP servers nobody here wrote (`mcp-server-time`, `mcp-server-git`) and a
server built with the `mcp` SDK itself, over stdio and streamable HTTP, in tool loops through the simulator."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'geppetto[mcp]')")

from geppetto import ConfigurationError, Session
from geppetto.simulator import Simulator
from geppetto.tools import ToolRegistry, execute_tool_calls, tool
from geppetto.tools.mcp import McpError, McpServer, McpServers
from geppetto.turns import Block, BlockKind

SERVER = Path(__file__).with_name("mcp_test_server.py")
TEST_SERVER = f"{sys.executable} {SERVER} stdio"


def time_server() -> str:
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is not installed (the dev extra installs it)")
    return f"{sys.executable} -m mcp_server_time --local-timezone UTC"


def uses(turn_blocks: list[Block]) -> list[Block]:
    return [b for b in turn_blocks if b.kind is BlockKind.TOOL_USE]


async def test_time_server_tools_answer_in_a_tool_loop_through_the_simulator(geppetto_sim: Simulator) -> None:
    async with McpServers([time_server()]) as servers, geppetto_sim.engine("openai-responses") as engine:
        assert servers.registry.names() == ["get_current_time", "convert_time"]
        params = servers.registry.get("get_current_time").definition.parameters  # type: ignore[union-attr]
        assert params["required"] == ["timezone"]
        turn = await Session(engine, tools=servers.registry).run("get_current_time in 'Europe/Paris' please")
    (use,) = uses(turn.blocks)
    assert use.payload.get("error") is None
    assert '"timezone": "Europe/Paris"' in str(use.payload["result"])
    assert "get_current_time:" in turn.blocks[-1].text and "Europe/Paris" in turn.blocks[-1].text
    sent_tools = [t["name"] for t in geppetto_sim.requests[0].body["tools"]]
    assert sent_tools == ["get_current_time", "convert_time"]


async def test_an_is_error_result_reaches_the_model_as_the_tool_error(geppetto_sim: Simulator) -> None:
    async with McpServers([time_server()]) as servers, geppetto_sim.engine("anthropic") as engine:
        turn = await Session(engine, tools=servers.registry).run("get_current_time in 'Nowhere/Atlantis'")
    (use,) = uses(turn.blocks)
    assert use.payload["error"] == (
        "tool get_current_time reported an error: Error executing tool get_current_time: "
        "Invalid timezone: 'No time zone found with key Nowhere/Atlantis'"
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "notes.txt").write_text("hello\n")
    return path


async def test_git_server_on_a_temporary_repository(geppetto_sim: Simulator, repo: Path) -> None:
    pytest.importorskip("mcp_server_git", reason="mcp-server-git is not installed (the dev extra installs it)")
    server = McpServer([sys.executable, "-m", "mcp_server_git", "--repository", str(repo)], prefix="git_")
    async with McpServers([server]) as servers, geppetto_sim.engine("gemini", model="gemini-2.5-flash") as engine:
        assert "git_git_status" in servers.registry.names()
        turn = await Session(engine, tools=servers.registry).run(f"git_git_status of '{repo}'")
    (use,) = uses(turn.blocks)
    assert "On branch main" in str(use.payload["result"]) and "notes.txt" in str(use.payload["result"])


@contextlib.contextmanager
def http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_streamable_http_server_beside_a_python_tool(geppetto_sim: Simulator) -> None:
    @tool
    def shout(text: str) -> str:
        """Shout the text."""
        return text.upper()

    with http_server() as url:
        async with McpServers([url]) as servers, geppetto_sim.engine("openai-chat") as engine:
            registry = servers.registry.merge(ToolRegistry([shout]))
            assert {"add", "picture", "shout"} <= set(registry.names())
            turn = await Session(engine, tools=registry).run("add 2 and 2")
            calls = [Block.tool_call("c1", "picture", {}), Block.tool_call("c2", "shout", {"text": "hi"})]
            results = await execute_tool_calls(registry, calls)
    (use,) = uses(turn.blocks)
    assert '"sum": 4' in str(use.payload["result"])
    assert [r.payload["result"] for r in results] == ["[image: image/png, 100 bytes]", "HI"]


async def test_a_hung_call_times_out_through_the_executor() -> None:
    async with McpServers([TEST_SERVER]) as servers:
        (result,) = await execute_tool_calls(servers.registry, [Block.tool_call("c1", "slow", {})], timeout_s=1)
    assert result.payload["error"] == "tool slow timed out after 1s"


async def test_a_crashed_server_is_an_error_naming_it_and_its_stderr() -> None:
    async with McpServers([TEST_SERVER]) as servers:
        (result,) = await execute_tool_calls(servers.registry, [Block.tool_call("c1", "die", {})], timeout_s=20)
        error = str(result.payload["error"])
        assert "mcp_test_server.py stdio' failed on die" in error
        assert "the test server is exiting on purpose" in error
        (again,) = await execute_tool_calls(servers.registry, [Block.tool_call("c2", "add", {"a": 1, "b": 2})])
        assert again.payload["error"]  # the server is gone; the call fails as data, nothing hangs


async def test_the_tool_list_follows_list_changed_notifications() -> None:
    async with McpServers([TEST_SERVER]) as servers:
        assert "extra" not in servers.registry
        (grown,) = await execute_tool_calls(servers.registry, [Block.tool_call("c1", "grow", {})])
        assert grown.payload["result"] == "grown"
        deadline = time.monotonic() + 10
        while "extra" not in servers.registry and time.monotonic() < deadline:
            await __import__("asyncio").sleep(0.05)
        (extra,) = await execute_tool_calls(servers.registry, [Block.tool_call("c2", "extra", {})])
    assert extra.payload["result"] == "extra here"


async def test_every_page_of_the_tool_list_is_read() -> None:
    async with McpServers([f"{sys.executable} {SERVER} paged"]) as servers:
        assert servers.registry.names() == ["t0", "t1", "t2", "t3", "t4"]
        (result,) = await execute_tool_calls(servers.registry, [Block.tool_call("c1", "t4", {})])
    assert result.payload["result"] == "t4 called"


async def test_name_clashes_need_a_prefix() -> None:
    with pytest.raises(ConfigurationError, match=r"both offer a tool named 'add'.*prefix"):
        async with McpServers([TEST_SERVER, TEST_SERVER]):
            pass
    async with McpServers([TEST_SERVER, McpServer(TEST_SERVER, prefix="b_")]) as servers:
        assert "add" in servers.registry and "b_add" in servers.registry
        (result,) = await execute_tool_calls(servers.registry, [Block.tool_call("c1", "b_add", {"a": 1, "b": 1})])
    assert '"sum": 2' in str(result.payload["result"])


async def test_server_tools_join_a_given_registry_and_may_not_shadow_its_tools() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Python's add."""
        return a + b

    with pytest.raises(ConfigurationError, match=r"offers a tool named 'add', like a tool already registered"):
        async with McpServers([TEST_SERVER], registry=ToolRegistry([add])):
            pass
    mine = ToolRegistry([add])
    async with McpServers([McpServer(TEST_SERVER, prefix="mcp_")], registry=mine) as servers:
        assert servers.registry is mine and mine.names()[:2] == ["add", "mcp_add"]


async def test_a_server_that_does_not_start_is_a_clear_error() -> None:
    with pytest.raises(McpError, match=r"did not start"):
        async with McpServers([f"{sys.executable} -c 'import sys; sys.exit(5)'"]):
            pass


def test_bad_entries_name_the_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown key.*comand.*use command"):
        McpServer.from_spec({"comand": "x"})
    with pytest.raises(ConfigurationError, match="either a command line or a url"):
        McpServer()
    assert McpServer.from_spec("https://example.com/mcp").url == "https://example.com/mcp"
    assert McpServer.from_spec("uvx mcp-server-time --local-timezone 'Europe/Paris'").argv == [
        "uvx",
        "mcp-server-time",
        "--local-timezone",
        "Europe/Paris",
    ]


def test_import_without_the_extra_names_it(
    without: Callable[[set[str], str], subprocess.CompletedProcess[str]],
) -> None:
    res = without({"mcp"}, "import geppetto, geppetto.tools; import geppetto.tools.mcp")
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "ImportError: geppetto.tools.mcp needs the 'mcp' extra (mcp is not installed): "
        "make setup (in this clone of the repository; elsewhere: pip install 'geppetto[mcp]')"
    )
