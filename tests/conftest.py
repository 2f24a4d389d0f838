"""Shared pytest configuration: the simulator fixture `geppetto_sim` for every test, and no test reads or
writes the user's own config, data or store."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["geppetto.simulator.pytest_plugin"]


@pytest.fixture(autouse=True)
def _isolated_user_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home: Path = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("GEPPETTO_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("GEPPETTO_DATA_DIR", str(home / "data"))
    monkeypatch.delenv("GEPPETTO_STORE", raising=False)
