"""How to install an optional extra, in the words that work where geppetto is installed.

A package from the registry takes ``pip install 'geppetto[server]'``; a clone of the repository set up with
``make demo`` has only the ``cli`` extra, and there the registry name would install a second copy beside the
checkout, so the hint says ``make setup`` (every extra, into the clone's ``.venv``) instead.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["install_hint"]


@cache
def _in_checkout() -> bool:
    """True when this package is the ``src/geppetto`` folder of a clone (an editable install next to its Makefile)."""
    root = Path(__file__).resolve().parent.parent.parent
    return (root / "Makefile").is_file() and (root / "pyproject.toml").is_file() and (root / "src").is_dir()


def install_hint(extra: str) -> str:
    """``pip install 'geppetto[EXTRA]'``; in a clone of the repository, ``make setup`` first."""
    pip = f"pip install 'geppetto[{extra}]'"
    if _in_checkout():
        return f"make setup (in this clone of the repository; elsewhere: {pip})"
    return pip
