"""How every command ends on an error: one line naming the fix, no traceback, a distinct exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

from .._exceptions import ConfigurationError, GeppettoError, TurnFormatError, UsageError

__all__ = ["EXIT_INTERRUPTED", "EXIT_USAGE", "fail", "guarded", "os_error_text"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
T = TypeVar("T")


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: MESSAGE`` on one line to stderr and exit with ``code``."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(code)


def guarded(action: Callable[[], T]) -> T:
    """Run ``action``: usage errors exit 2; provider, store and file errors 1; Ctrl-C 130."""
    try:
        return action()
    except KeyboardInterrupt:
        print("\ninterrupted; nothing was saved", file=sys.stderr)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (ConfigurationError, UsageError, TurnFormatError) as exc:
        fail(str(exc))
    except GeppettoError as exc:
        fail(str(exc), 1)
    except OSError as exc:  # a file or folder the command was pointed at
        fail(os_error_text(exc), 1)


def os_error_text(exc: OSError) -> str:
    """``REASON: PATH`` for a failed file operation, naming the path the user gave (not a temporary one)."""
    path = exc.filename2 if exc.filename2 is not None else exc.filename
    reason = exc.strerror or str(exc)
    return f"{reason}: {path}" if path is not None else reason
