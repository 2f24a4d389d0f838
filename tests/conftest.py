"""Shared pytest configuration: the simulator fixture `geppetto_sim` for every test, and no test reads or
writes the user's own config, data or store."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests: random examples locally (new cases found on every run), a fixed derandomized set in CI
# (CI=true, as `.ci/run` is run) so a red CI run is the code's fault and repeats exactly. Neither has a
# deadline: a wall-clock limit per example fails on a loaded machine, not on a wrong answer.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, database=None)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

pytest_plugins = ["geppetto.simulator.pytest_plugin"]


@pytest.fixture(autouse=True)
def _isolated_user_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home: Path = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("GEPPETTO_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("GEPPETTO_DATA_DIR", str(home / "data"))
    monkeypatch.delenv("GEPPETTO_STORE", raising=False)


@pytest.fixture(autouse=True)
def _fresh_endpoint_verdicts() -> Iterator[None]:
    """What one test's engines learned of an endpoint (the session's simulator, a mock's URL) is not known to
    the next test's: each starts from no verdict."""
    from geppetto.providers.openai_responses import endpoint_verdicts

    endpoint_verdicts.clear()
    yield
    endpoint_verdicts.clear()


# PostgreSQL for the store and server tests (skipped, with the reason, when no server answers).
POSTGRES_URL = os.environ.get("GEPPETTO_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _admin() -> Any:
    import psycopg

    try:
        return psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or ["?"])[0]
        pytest.skip(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({first}); start it or set GEPPETTO_TEST_POSTGRES_URL"
        )


@pytest.fixture
def postgres_target() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
    schema = f"geppetto_test_{uuid.uuid4().hex[:12]}"
    with _admin() as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with _admin() as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


_BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


@pytest.fixture
def without() -> Callable[[set[str], str], subprocess.CompletedProcess[str]]:
    """``without(names, code)`` runs ``code`` in a fresh Python in which importing any of the top-level
    packages ``names`` fails as if they were not installed (an extra left out)."""

    def run(names: set[str], code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _BLOCK.format(names=names) + code],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run


@pytest.fixture(scope="session")
def litellm_proxy(geppetto_sim_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The LiteLLM proxy (a real third-party Responses server) in front of the session's simulator, started once
    (it takes a minute); skips where it is not installed. Use it with ``geppetto_sim``, which resets the
    simulator behind it. See tests/litellm_peer.py."""
    from litellm_peer import run_litellm

    with run_litellm(geppetto_sim_server, tmp_path_factory.mktemp("litellm")) as proxy:
        yield proxy
