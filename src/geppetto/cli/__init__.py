"""The ``geppetto`` command."""

from ._app import app, main

__all__ = ["app", "main"]
