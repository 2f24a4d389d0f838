"""What a new user meets first: the version, help that reads right, shell completion, one-line errors for a
missing extra, and a library that keeps its log lines to itself unless the application asks for them."""

from __future__ import annotations

import importlib.metadata
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _cli_helpers import geppetto

import geppetto as gp

Without = Callable[[set[str], str], subprocess.CompletedProcess[str]]


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    assert gp.__version__ == importlib.metadata.version("geppetto")
    out = geppetto("--version", config_dir=tmp_path)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"geppetto {gp.__version__}\n", "")


@pytest.mark.parametrize("command", ["run", "chat", "sessions list", "profiles list"])
def test_switches_show_as_switches_in_help(tmp_path: Path, command: str) -> None:
    out = geppetto(*command.split(), "--help", config_dir=tmp_path)
    assert out.returncode == 0
    assert "<bool>" not in out.stdout
    if command == "run":
        assert re.search(r"^  --with-tools +Offer the demo tools\.$", out.stdout, re.MULTILINE), out.stdout


def test_shell_completion_is_offered(tmp_path: Path) -> None:
    out = geppetto("--show-completion", "bash", config_dir=tmp_path, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    assert out.returncode == 0, out.stderr
    assert "_GEPPETTO_COMPLETE" in out.stdout


def test_the_simulator_without_its_extra_is_one_line_naming_it(without: Without) -> None:
    out = without({"starlette", "uvicorn"}, "import geppetto.simulator")
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last == (
        "ImportError: geppetto.simulator needs the 'sim' extra (starlette is not installed): "
        "make setup (in this clone of the repository; elsewhere: pip install 'geppetto[sim]')"
    )
    core = without({"starlette", "uvicorn", "typer", "rich"}, "import geppetto; print('ok')")
    assert (core.returncode, core.stdout) == (0, "ok\n")  # the library itself needs no extra


def test_the_command_without_its_extra_is_one_line_naming_it(without: Without) -> None:
    out = without({"typer"}, "from geppetto.cli import main; main()")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        "error: the geppetto command needs typer: "
        "make setup (in this clone of the repository; elsewhere: pip install 'geppetto[cli]')\n"
    )


def test_serve_after_make_demo_says_make_setup(without: Without) -> None:
    """``make demo`` installs only the cli extra; the README's next command, ``geppetto serve``, then names
    the command that installs the server in a clone, not a registry package beside the checkout."""
    out = without(
        {"ag_ui", "fastapi"}, "import sys; sys.argv = ['geppetto', 'serve']; from geppetto.cli import main; main()"
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: geppetto.server needs ag_ui: make setup (in this clone of the repository; elsewhere: "
        "pip install 'geppetto[server]')"
    )


def test_the_install_hint_outside_a_clone_is_the_registry_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from geppetto import _extras

    monkeypatch.setattr(_extras, "_in_checkout", lambda: False)
    assert _extras.install_hint("server") == "pip install 'geppetto[server]'"


def test_the_library_logs_nothing_to_stderr_unless_the_application_configures_logging() -> None:
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("geppetto").handlers)
    code = (
        "import logging, geppetto\n"
        "logging.getLogger('geppetto.providers.openai_responses').warning('a fallback line')\n"
        "print('answer')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (out.stdout, out.stderr) == ("answer\n", "")
    configured = subprocess.run(
        [sys.executable, "-c", "import logging; logging.basicConfig()\n" + code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "a fallback line" in configured.stderr


README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "content"),
    [
        (("inspect", "{missing}"), None),
        (("inspect", "{file}"), ""),
        (("inspect", "{file}"), "blocks: [\n"),
        (("run", "--profile", "sim", "--file", "{missing}"), None),
    ],
)
def test_input_files_that_are_missing_empty_or_malformed_exit_2_as_the_readme_says(
    tmp_path: Path, args: tuple[str, ...], content: str | None
) -> None:
    assert "exit 2 for a usage, configuration or input error" in " ".join(README.split())
    file = tmp_path / "turn.yaml"
    if content is not None:
        file.write_text(content)
    filled = [a.format(missing=tmp_path / "nope.yaml", file=file) for a in args]
    out = geppetto(*filled, config_dir=tmp_path)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("error: ")


def test_import_geppetto_loads_no_optional_or_metadata_machinery() -> None:
    code = (
        "import sys, geppetto\n"
        "heavy = ['importlib.metadata', 'starlette', 'uvicorn', 'typer', 'rich', 'psycopg']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout == "[]\n", out.stderr


def test_ctrl_c_while_the_command_loads_is_a_line_not_a_traceback() -> None:
    """Ctrl-C in the first second of ``geppetto run`` lands while the command's modules load (a second or so
    on a slow machine): it ends with one line and exit 130. The interrupt is raised by an import hook at the
    moment the command module loads, so the test does not depend on timing."""
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'geppetto.cli._app':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "sys.argv = ['geppetto', 'run', '--profile', 'sim', 'Hi']\n"
        "from geppetto.cli import main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (out.returncode, out.stdout, out.stderr) == (130, "", "\ninterrupted\n")
