"""Durable sessions: a session's prompts run on a durable-execution engine, so a long agent run survives any
worker that stops (docs/durable.md).

- :mod:`geppetto.durable.temporal`: on Temporal (the ``temporal`` extra: ``pip install 'geppetto[temporal]'``).

Nothing here is imported by ``import geppetto``; the engine's SDK loads with the subpackage that uses it.
"""

from __future__ import annotations

__all__: list[str] = []
