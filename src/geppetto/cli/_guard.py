"""How every command ends on an error: one line naming the fix, no traceback, a distinct exit code."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

from .._exceptions import ConfigurationError, GeppettoError, TurnFormatError, UsageError
from .._terms import for_cli

__all__ = ["EXIT_INTERRUPTED", "EXIT_USAGE", "fail", "guarded", "os_error_text", "run_app"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
T = TypeVar("T")


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: MESSAGE`` on one line to stderr and exit with ``code``."""
    print(f"error: {' '.join(for_cli(message).split())}", file=sys.stderr)
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


def run_app(app: typer.Typer, args: list[str] | None = None) -> NoReturn:
    """Run the command line; a mistyped flag or command is one ``error:`` line naming the help to read, exit 2
    (click's own report is four lines). Help asked for by giving no arguments is shown as it is."""
    # click's exceptions, wherever this typer takes click from (newer releases carry their own copy)
    errors = importlib.import_module(typer.BadParameter.__module__)
    no_args = getattr(errors, "NoArgsIsHelpError", ())
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="geppetto", standalone_mode=False)
    except no_args as exc:
        print(exc.format_message(), file=sys.stderr)
        code = EXIT_USAGE
    except errors.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "geppetto"
        message = " ".join(exc.format_message().split()).rstrip(".")
        print(f"error: {message[:1].lower()}{message[1:]} (see '{where} --help')", file=sys.stderr)
        code = EXIT_USAGE
    except errors.ClickException as exc:
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        code = exc.exit_code
    except (typer.Abort, getattr(errors, "Abort", typer.Abort)):
        print("\ninterrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code if isinstance(code, int) else 0)
