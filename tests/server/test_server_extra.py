"""The server runs on the ``server`` extra alone: without the command's packages (typer, rich) its app
builds and answers, and ``python -m geppetto.server`` (or ``geppetto serve``, which falls back to it) reads
the flags of ``geppetto serve``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from geppetto.runtime import EngineSettings
from geppetto.server._main import options_from, parser

Without = Callable[[set[str], str], subprocess.CompletedProcess[str]]
CLI_PACKAGES = {"typer", "rich"}  # uvicorn needs click: it stays


def test_the_app_builds_and_answers_without_the_commands_packages(without: Without, tmp_path: Path) -> None:
    code = (
        "from starlette.testclient import TestClient\n"
        "from geppetto.server import create_app\n"
        "from geppetto.runtime import demo_registry\n"
        f"app = create_app('sim', store={str(tmp_path / 's.db')!r}, tools=demo_registry())\n"
        "with TestClient(app, base_url='http://127.0.0.1') as client:\n"
        "    print(client.get('/openapi.json').status_code, client.post('/api/sessions', json={}).status_code)\n"
        "import sys\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'rich'}))\n"
    )
    done = without(CLI_PACKAGES, code)
    assert (done.returncode, done.stdout, done.stderr) == (0, "200 201\n[]\n", "")


@pytest.mark.parametrize("entry", ["import runpy; runpy.run_module('geppetto.server', run_name='__main__')", "cli"])
def test_the_servers_own_entry_reads_the_serve_flags_without_typer(without: Without, entry: str) -> None:
    argv = "['x', 'serve', '--profile', 'sim', '--host', '0.0.0.0', '--port', '0']"
    if entry == "cli":  # ``geppetto serve`` without the cli extra falls back to the server's entry
        entry = "from geppetto.cli import main; main()"
        code = f"import sys; sys.argv = {argv}\n{entry}"
    else:
        code = f"import sys; sys.argv = {argv}; sys.argv.remove('serve')\n{entry}"
    done = without(CLI_PACKAGES, code)
    assert done.returncode == 2
    assert done.stderr.startswith("error: --host 0.0.0.0 is reachable from other machines: set an API key")
    assert done.stdout == ""


def test_the_flags_make_the_options_geppetto_serve_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEPPETTO_SERVER_ALLOWED_HOSTS", "a.example b.example")
    flags = "-p sim --mode chained --workers 2 --bus redis://h:6379/0 --with-tools --mcp uvx"
    more = "--allowed-origin https://app.example --log-level INFO --limits max_requests=3"
    args = parser().parse_args([*flags.split(), *more.split()])
    options = options_from(args)
    assert options.engine == EngineSettings(profile="sim", mode="chained")
    assert (options.workers, options.bus, options.with_tools, options.mcp) == (2, "redis://h:6379/0", True, ["uvx"])
    assert (options.allowed_hosts, options.allowed_origins) == (["a.example", "b.example"], ["https://app.example"])
    assert (options.log_level, options.limits, options.host, options.port) == (
        "info",
        "max_requests=3",
        "127.0.0.1",
        8000,
    )


def test_a_wrong_number_is_a_usage_error() -> None:
    from geppetto import UsageError

    with pytest.raises(UsageError, match="--workers 1 or more"):
        options_from(parser().parse_args(["--workers", "0"]))
