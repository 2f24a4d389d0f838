"""The ``geppetto`` command (needs the ``cli`` extra: ``pip install 'geppetto[cli]'``)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Console-script entry point; without the ``cli`` extra, one line saying how to install it."""
    try:
        from ._app import main as run
    except ImportError as exc:
        if exc.name not in ("typer", "rich", "click", "uvicorn", "starlette", "jsonschema"):
            raise
        print(f"error: the geppetto command needs {exc.name}: pip install 'geppetto[cli]'", file=sys.stderr)
        raise SystemExit(2) from None
    run()
