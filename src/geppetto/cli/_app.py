"""Command-line entry point. ``geppetto demo`` runs offline."""

from __future__ import annotations

import typer

from ._demo import run_demo

app = typer.Typer(help="Run LLM inference through geppetto's provider-agnostic Turn model.", no_args_is_help=True)


@app.callback()
def _root() -> None:
    """geppetto: one Turn model for every provider."""


@app.command()
def demo() -> None:
    """Run an offline demo conversation and show what each step sent."""
    run_demo()


def main() -> None:
    app()
