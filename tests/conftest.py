"""Shared pytest configuration: the simulator fixture `geppetto_sim` for every test, and no test reads or
writes the user's own config, data or store."""

from __future__ import annotations

import os
from pathlib import Path

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
