"""``geppetto probe BASE_URL --model MODEL``: what a Responses endpoint does with server-side state, as a table
or JSON (docs/responses.md, "Probing an endpoint")."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from .._exceptions import ConfigurationError

__all__ = ["probe_command", "probe_key"]

KEY_ENV = "OPENAI_API_KEY"

VERDICT_TEXT = {
    "kept": "kept: a chained request reads the stored context",
    "ignored": "ignored: accepted, but the answer comes from the new input alone",
    "rejected": "rejected: the server refuses previous_response_id",
    "unknown": "unknown: the evidence does not tell",
}


def probe_key(api_key_env: str | None) -> str:
    """The key from ``$api_key_env`` (else ``$OPENAI_API_KEY``); an error naming the variable to set."""
    name = api_key_env or KEY_ENV
    value = os.environ.get(name)
    if value:
        return value
    other = "" if api_key_env else " or pass --api-key-env NAME"
    raise ConfigurationError(
        f"no API key: set {name}{other}; for a server that checks no key any value will do ({name}=unused)"
    )


def _yes(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


def _render(data: dict[str, Any]) -> None:
    from rich.table import Table

    from ._console import stdout_console

    table = Table(title=f"geppetto probe {data['base_url']} · model {data['model']}")
    table.add_column("what")
    table.add_column("found", overflow="fold")
    table.add_row("previous_response_id", VERDICT_TEXT[data["previous_response_id"]])
    table.add_row("decided by", f"{data['evidence']}: {data['detail']}" if data["detail"] else data["evidence"])
    table.add_row("echo", f"{_yes(data['echo'])} (the answer's previous_response_id: {data['echo_seen'] or '?'})")
    for key, label in (
        ("conversations", "POST /conversations"),
        ("input_tokens", "POST /responses/input_tokens"),
        ("compact", "POST /responses/compact"),
        ("background", "background: true"),
        ("retrieve", "GET /responses/{id}"),
        ("delete", "DELETE /responses/{id}"),
        ("store_default", "store when not sent"),
    ):
        table.add_row(label, _yes(data[key]))
    if data.get("expires_at") is not None:
        table.add_row("expires_at", str(data["expires_at"]))
    table.add_row("requests", str(data["requests"]))
    console = stdout_console()
    console.print(table)
    for note in data["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)


async def _remember(report: Any, store: str | None) -> str:
    """Keep the verdict in the session store (``store``, else the default one): an engine of a ``Session`` on
    that store starts from it (evidence ``probe``, what decided in its detail). Returns the store's place."""
    from dataclasses import replace

    from ..session.stores import open_store

    verdict = report.verdict
    kept = replace(verdict, evidence="probe", detail=f"geppetto probe, {verdict.evidence}: {verdict.detail}")
    with open_store(store) as opened:
        await opened.save_endpoint_verdict(report.base_url, report.model, kept.to_dict())
        return str(opened.location)


def probe_command(
    base_url: str,
    model: str,
    api_key_env: str | None,
    *,
    json_out: bool,
    save: Path | None,
    remember: bool = False,
    store: str | None = None,
) -> None:
    """Probe the endpoint and print the report (JSON with ``json_out``); ``save`` also writes the JSON, which
    ``Verdict.from_dict`` reads; ``remember`` keeps the verdict in the session store (``store``)."""
    from ..providers.openai_responses import probe

    key = probe_key(api_key_env)
    report = asyncio.run(probe(base_url, model, key))
    where = asyncio.run(_remember(report, store)) if remember else None
    data = report.to_dict()
    text = json.dumps(data, indent=2)
    if save is not None:
        save.write_text(text + "\n", encoding="utf-8")
    if json_out:
        print(text)
    else:
        _render(data)
        if save is not None:
            print(f"saved to {save}")
        if where is not None:
            print(f"the verdict is kept in the session store {where}: sessions on it start from it")
