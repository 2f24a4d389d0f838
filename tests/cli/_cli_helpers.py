"""Running the real ``geppetto`` console script in a subprocess, isolated from the user's config and keys."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

GEPPETTO = shutil.which("geppetto", path=str(Path(sys.executable).parent))
KEY_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_BASE_URL",
    "GEPPETTO_STORE",
)


def command() -> list[str]:
    """The console script next to this interpreter, else ``python -m geppetto``."""
    return [GEPPETTO] if GEPPETTO else [sys.executable, "-m", "geppetto"]


def clean_env(config_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    env.update(
        GEPPETTO_CONFIG_DIR=str(config_dir),
        GEPPETTO_DATA_DIR=str(config_dir / "data"),
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
        COLUMNS="200",
    )
    env.update(extra)
    return env


def geppetto(
    *args: str, config_dir: Path, stdin: str | None = None, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(config_dir, **env),
        check=False,
    )
