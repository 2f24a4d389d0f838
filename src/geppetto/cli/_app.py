"""The ``geppetto`` command: run, chat, inspect, simulate, serve, worker, models, probe, demo, profiles, sessions."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from ..profiles import PROVIDERS, load_profiles, profiles_path
from ..runtime import EngineSettings, parse_options
from ..turns import load_turn
from ._console import stdout_console
from ._guard import fail, guarded, run_app
from ._options import (
    AttachOpt,
    BaseUrlOpt,
    LimitsOpt,
    McpOpt,
    ModelOpt,
    ModeOpt,
    OptionOpt,
    ProfileOpt,
    ProviderOpt,
    UsageOpt,
    VerboseOpt,
)
from ._serve import serve, simulate
from ._sessions import StoreOpt, sessions_app
from ._worker import worker

app = typer.Typer(
    help="Run LLM inference through geppetto's provider-agnostic Turn model. New here? Try `geppetto demo` "
    '(offline, no key needed), then `geppetto run --profile sim "Hello"`.',
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: a switch shows as `--with-tools`, not as an option taking a <bool>
)
profiles_app = typer.Typer(
    help="List and show the profiles in the profiles file.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(profiles_app, name="profiles")
app.add_typer(sessions_app, name="sessions")


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"geppetto {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    verbose: VerboseOpt = False,
) -> None:
    """geppetto: one Turn model for every provider. Try `geppetto demo`, or `geppetto run --profile sim "Hi"`."""
    _verbose(verbose)


def _verbose(on: bool) -> None:
    """``--verbose`` (before the command or after it): geppetto's log on stderr, set up once."""
    if on:
        from ._console import verbose_log

        verbose_log()


@app.command()
def run(
    prompt: Annotated[str | None, typer.Argument(help="The prompt; `-` reads it from stdin.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the prompt from this file.")] = None,
    profile: ProfileOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    mode: ModeOpt = None,
    option: OptionOpt = None,
    system: Annotated[str | None, typer.Option(help="System prompt (added by middleware).")] = None,
    with_tools: Annotated[bool, typer.Option("--with-tools", help="Offer the demo tools.")] = False,
    with_logging: Annotated[bool, typer.Option("--with-logging", help="Log each inference to stderr.")] = False,
    with_uppercase: Annotated[bool, typer.Option("--with-uppercase", help="Uppercase the answer.")] = False,
    json_events: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
    save_turn: Annotated[Path | None, typer.Option("--save-turn", help="Save the final Turn as YAML.")] = None,
    mcp: McpOpt = None,
    usage: UsageOpt = False,
    limits: LimitsOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every tool call that needs approval (else it is not run).")
    ] = False,
    verbose: VerboseOpt = False,
    attach: AttachOpt = None,
) -> None:
    """One inference through the tool loop, streaming the answer as it arrives."""
    from ._run import RunOptions, read_prompt, run_command

    _verbose(verbose)

    options = RunOptions(
        settings=EngineSettings(profile, provider, model, base_url, mode, guarded(lambda: parse_options(option))),
        system=system,
        with_tools=with_tools,
        with_logging=with_logging,
        with_uppercase=with_uppercase,
        json_events=json_events,
        save_turn=save_turn,
        mcp=tuple(mcp or ()),
        usage=usage,
        limits=limits,
        yes=yes,
        attach=tuple(attach or ()),
    )
    guarded(lambda: run_command(options, read_prompt(prompt, file)))


@app.command()
def chat(
    profile: ProfileOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    mode: ModeOpt = None,
    option: OptionOpt = None,
    system: Annotated[str | None, typer.Option(help="System prompt (added by middleware).")] = None,
    no_tools: Annotated[bool, typer.Option("--no-tools", help="Do not offer the demo tools.")] = False,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue the conversation in this file and save it after each answer."),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Continue this stored session.")] = None,
    continue_last: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the most recently saved session.")
    ] = False,
    store: StoreOpt = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not save this chat in the session store.")] = False,
    mcp: McpOpt = None,
    usage: UsageOpt = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every tool call without asking (tools that need approval).")
    ] = False,
    attach: AttachOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """An interactive session, saved in the session store after each answer.

    A tool call that needs approval (an MCP tool annotated destructive, say) is asked about: y runs
    it, n (or Enter) denies it, any other text denies it with that text as the reason.

    Commands: /attach FILE, /save FILE, /load FILE, /inspect, /history, /reset, /mode MODE, /exit."""
    from ._chat import ChatRepl

    _verbose(verbose)

    if sum((resume is not None, session is not None, continue_last)) > 1:
        fail("--resume, --session and --continue each pick the conversation to continue; give one of them")
    if no_store and (session is not None or continue_last):
        fail("--no-store cannot continue a stored session; drop --no-store or --session/--continue")
    settings = EngineSettings(profile, provider, model, base_url, mode, guarded(lambda: parse_options(option)))
    repl = ChatRepl(
        settings,
        system=system,
        with_tools=not no_tools,
        resume=resume,
        store=store,
        session_id=session,
        continue_last=continue_last,
        persist=not no_store,
        mcp=tuple(mcp or ()),
        usage=usage,
        yes=yes,
        attach=tuple(attach or ()),
    )
    guarded(repl.run)


@app.command()
def inspect(
    file: Annotated[Path, typer.Argument(help="A turn file (YAML, or JSON for .json).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the blocks (full ids) and the plan as JSON.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the Turn inspector as one self-contained HTML page.")
    ] = None,
) -> None:
    """The Turn's blocks with their ids; marks the anchor and the blocks a chained request would send."""
    from ._inspect import render_turn, turn_report

    turn = guarded(lambda: load_turn(file))
    if html is not None:
        from ..web import session_report, standalone_html

        page = standalone_html(session_report([turn]), title=f"geppetto inspect {file.name}")
        guarded(lambda: html.write_text(page, encoding="utf-8"))
        print(f"wrote the Turn inspector of {file} to {html}")
        return
    if json_out:
        print(json.dumps(turn_report(turn), indent=2, ensure_ascii=False))
        return
    render_turn(turn, stdout_console(), title=f"{file} · turn {turn.id}")


app.command()(simulate)
app.command()(serve)
app.command()(worker)


@app.command()
def models(
    profile: ProfileOpt = None,
    provider: ProviderOpt = None,
    base_url: BaseUrlOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The models each profile's provider offers (its list endpoint); --profile or --provider for one."""
    from ._models import profile_models, render_models

    every = profile is None and provider is None and base_url is None
    rows = guarded(lambda: profile_models(EngineSettings(profile, provider, None, base_url), every=every))
    render_models(rows, json_out=json_out)


@app.command()
def probe(
    base_url: Annotated[
        str,
        typer.Argument(metavar="BASE_URL", help="The Responses API's base URL, e.g. http://127.0.0.1:4000/v1."),
    ],
    model: Annotated[str, typer.Option("--model", metavar="MODEL", help="The model to send the probe's requests to.")],
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env", metavar="NAME", help="Read the key from this variable (default: OPENAI_API_KEY)."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    save: Annotated[
        Path | None,
        typer.Option("--save", metavar="FILE", help="Also write the JSON to FILE (Verdict.from_dict reads it)."),
    ] = None,
    remember: Annotated[
        bool,
        typer.Option("--remember", help="Keep the verdict in the session store: chats on it start from it."),
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Ask a Responses endpoint, with a dozen small requests, whether it keeps the context previous_response_id
    names (and which stateful routes work): the verdict the engine would reach."""
    from ._probe import probe_command

    guarded(
        lambda: probe_command(
            base_url, model, api_key_env, json_out=json_out, save=save, remember=remember, store=store
        )
    )


@app.command()
def demo() -> None:
    """Offline: a chained conversation with tool calls against the simulator, then the bytes each mode sends."""
    from ._demo import run_demo

    guarded(lambda: run_demo(stdout_console(120)))


@profiles_app.command("list")
def profiles_list(json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
    """Every profile (the built-in `sim` included) and which is the default."""
    profiles, default = guarded(load_profiles)
    if json_out:
        rows = [{**p.public_dict(), "default": name == default} for name, p in profiles.items()]
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"profiles ({profiles_path()})")
    for column in ("name", "provider", "model", "base_url", "mode", "key"):
        table.add_column(column)
    for name, p in profiles.items():
        shown = f"{name} (default)" if name == default else name
        if p.problem is not None:
            table.add_row(shown, "(broken: see below)", "", "", "", "")
            continue
        table.add_row(shown, p.provider, p.model, p.base_url or "", p.mode or "", _key_status(p))
    stdout_console().print(table)
    for p in profiles.values():
        if p.problem is not None or p.note is not None:
            print(f"warning: {p.problem or p.note}", file=sys.stderr)


@profiles_app.command("show")
def profiles_show(name: Annotated[str, typer.Argument(help="Profile name.")]) -> None:
    """One profile's settings and whether its key variable is set (the key itself is never shown)."""
    profiles, _ = guarded(load_profiles)
    if name not in profiles:
        fail(f"no profile named {name!r}; defined: {', '.join(profiles)}")
    p = profiles[name]
    shown: dict[str, Any] = {**p.public_dict(), "key": _key_status(p)}
    print(yaml.safe_dump(shown, sort_keys=False).rstrip())


def _key_status(p: Any) -> str:
    if p.simulator:
        return "not needed (simulator)"
    names = (p.api_key_env,) if p.api_key_env else PROVIDERS[p.provider]
    present = [n for n in names if os.environ.get(n)]
    return f"set in ${present[0]}" if present else f"missing: set {' or '.join(names)}"


def main() -> None:
    """Console-script entry point."""
    run_app(app)
