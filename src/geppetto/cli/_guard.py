"""How every command ends on an error: one line naming the fix, no traceback, a distinct exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

from .._exceptions import ConfigurationError, GeppettoError, TurnFormatError, UsageError

__all__ = ["EXIT_INTERRUPTED", "EXIT_USAGE", "fail", "guarded"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
T = TypeVar("T")


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: MESSAGE`` on one line to stderr and exit with ``code``."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(code)


def guarded(action: Callable[[], T]) -> T:
    """Run ``action``: usage errors exit 2, other geppetto errors (provider, store) 1, Ctrl-C 130."""
    try:
        return action()
    except KeyboardInterrupt:
        print("\ninterrupted; nothing was saved", file=sys.stderr)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (ConfigurationError, UsageError, TurnFormatError) as exc:
        fail(str(exc))
    except GeppettoError as exc:
        fail(str(exc), 1)
