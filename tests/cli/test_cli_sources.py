"""The text printer lists what an answer cites after its text: ``geppetto run`` against the simulator's scripted
web search (the answer's citations come as a ``citations`` event), and the printer fed events directly."""

from __future__ import annotations

import io
from pathlib import Path

from _cli_helpers import geppetto

from geppetto.cli._console import text_printer
from geppetto.events import EventCitations, EventFinal, EventMetadata, EventTextDelta
from geppetto.simulator import BuiltinCall, Reply, Simulator

HITS = [
    {"title": "Paris weather", "url": "https://example.com/paris", "text": "Sunny, 21C."},
    {"title": "Paris forecast", "url": "https://example.com/forecast", "text": "Rain tomorrow."},
]
META = EventMetadata()
SOURCES = (
    "Sources:\n  [1] Paris weather — https://example.com/paris\n  [2] Paris forecast — https://example.com/forecast\n"
)


def _searched() -> Reply:
    return Reply(text="Sunny in Paris.", builtin=[BuiltinCall("web_search", "paris weather", HITS)])


def test_run_prints_the_answer_then_its_numbered_sources(geppetto_sim: Simulator, tmp_path: Path) -> None:
    geppetto_sim.queue(_searched())
    res = geppetto("run", "--profile", "sim", "--base-url", geppetto_sim.openai_url, "weather?", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    # the built-in call's line follows: the engine publishes it, after the citations, when the call ends
    assert res.stdout.startswith(f"Sunny in Paris.\n\n{SOURCES}\n⚙ web_search("), res.stdout


def test_a_changed_answer_is_printed_with_its_sources(geppetto_sim: Simulator, tmp_path: Path) -> None:
    geppetto_sim.queue(_searched())
    args = ["--profile", "sim", "--base-url", geppetto_sim.openai_url, "--with-uppercase", "weather?"]
    res = geppetto("run", *args, config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    # the answer once, as the middleware left it, then its sources
    assert res.stdout.split(")\n", 1)[1] == f"SUNNY IN PARIS.\n\n{SOURCES}", res.stdout


def test_the_printer_numbers_each_source_once_with_its_title_and_address() -> None:
    out = io.StringIO()
    sink = text_printer(out)
    cited = [
        {"url": "https://a.example/x", "title": "A page", "start": 0, "end": 4},
        {"document": "file-123", "title": "report.pdf", "cited_text": "42"},
        {"url": "https://a.example/x", "title": "A page", "start": 5, "end": 9},  # cited twice, listed once
        {"url": "https://b.example/"},  # no title: the address alone
    ]
    for event in (EventTextDelta(META, delta="Both."), EventCitations(META, cited), EventFinal(META, "Both.")):
        sink(event)
    assert out.getvalue() == (
        "Both.\n\nSources:\n  [1] A page — https://a.example/x\n  [2] report.pdf — file-123\n  [3] https://b.example/\n\n"
    )
    quiet = io.StringIO()
    text_printer(quiet, text=False)(EventCitations(META, cited))
    assert quiet.getvalue() == ""  # the command prints the changed answer and its sources itself
    nothing = io.StringIO()
    text_printer(nothing)(EventCitations(META, []))
    assert nothing.getvalue() == ""
