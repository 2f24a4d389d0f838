"""The ``geppetto`` command (needs the ``cli`` extra: ``pip install 'geppetto[cli]'``)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Console-script entry point; without the ``cli`` extra, one line saying how to install it."""
    try:
        _main()
    except KeyboardInterrupt:
        # Ctrl-C while the command's modules load (a second or so on a slow machine): a line, not a traceback.
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _main() -> None:
    try:
        from ._app import main as run
    except ImportError as exc:
        if exc.name not in ("typer", "rich", "click", "uvicorn", "starlette", "jsonschema"):
            raise
        if sys.argv[1:2] == ["serve"] and exc.name in ("typer", "rich", "click"):
            _serve_without_cli()
        from .._extras import install_hint

        print(f"error: the geppetto command needs {exc.name}: {install_hint('cli')}", file=sys.stderr)
        raise SystemExit(2) from None
    run()


def _serve_without_cli() -> None:
    """``geppetto serve`` on an install with the ``server`` extra only: the server's own entry reads the flags."""
    try:
        from ..server import main as serve_main
    except ImportError:
        return  # the server extra is missing too: say how to install the command
    serve_main(sys.argv[2:])
    raise SystemExit(0)
