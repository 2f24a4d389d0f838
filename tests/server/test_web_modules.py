"""The web page's script as ES modules: each served with its media type, each import naming a module that
exports the name, no HTML sink in any of them, and the one-file inspector's script (the modules joined)
free of repeated top-level names and of module syntax (``docs.js``, ``/docs``'s page, left out). The report's rows for built-in tool blocks and
cited text."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from server_support import running_app, sim_profile

from geppetto import Block, Turn
from geppetto.server import create_app
from geppetto.simulator import Simulator
from geppetto.turns import BlockKind, BuiltinTool, raw_block
from geppetto.web import ASSETS, MODULES, asset, page_script, turn_report
from geppetto.web._report import describe

_DECLARED = re.compile(r"^(?:export )?(?:async function\*?|function|const|let|class) ([\w$]+)", re.M)
_EXPORTED = re.compile(r"^export (?:async function\*?|function|const|let|class) ([\w$]+)", re.M)
_IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([\w-]+\.js)";$', re.M)


def _module(name: str) -> str:
    return asset(name).decode()


def test_every_module_is_served_and_imports_only_what_another_exports(geppetto_sim: Simulator, tmp_path: Path) -> None:
    assert [n for n in ASSETS if n.endswith(".js")] == list(MODULES) and MODULES[-1] == "app.js"
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"))
    with running_app(app) as url, httpx.Client(base_url=url) as client:
        assert '<script type="module" src="/ui/app.js"></script>' in client.get("/").text
        for name in MODULES:
            served = client.get(f"/ui/{name}")
            assert served.status_code == 200 and served.headers["content-type"].startswith("text/javascript")
            assert served.content == asset(name)
    loaded: list[str] = []
    for name in MODULES:
        for names, source in _IMPORT.findall(_module(name)):
            assert source in loaded, f"{name} imports {source}, which comes later in MODULES"
            exported = set(_EXPORTED.findall(_module(source)))
            for imported in (n.strip() for n in names.split(",")):
                assert imported in exported, f"{name} imports {imported}, which {source} does not export"
        loaded.append(name)


def test_no_module_writes_html_or_counts_with_s_in_brackets() -> None:
    for name in MODULES:
        script = _module(name)
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in script.replace("no HTML is ever assigned", ""), (name, sink)
        assert "(s)" not in script.replace("(s) =>", ""), name


def test_the_one_file_script_joins_the_modules() -> None:
    script = page_script()
    assert not re.search(r"^\s*(import|export)\b", script, re.M)
    names = _DECLARED.findall("\n".join(_module(n) for n in MODULES))
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert repeated == [], f"top-level names declared by two modules: {repeated}"
    for name in MODULES:  # every module's code is in it, but /docs's page of its own
        last = _module(name).splitlines()[-1].removeprefix("export ")
        assert (last in script) is (name != "docs.js"), name


def test_the_report_names_built_in_blocks_and_keeps_citations() -> None:
    call: BuiltinTool = {"tool": "web_search", "phase": "call", "call_id": "s1", "input": {"query": "paris"}}
    found: BuiltinTool = {
        "tool": "web_search",
        "phase": "result",
        "call_id": "s1",
        "sources": [{"url": "https://example.com/a", "title": "A"}],
    }
    ran: BuiltinTool = {"tool": "code_execution", "phase": "result", "call_id": "", "output": "2\n"}
    failed: BuiltinTool = {"tool": "mcp", "phase": "result", "call_id": "m", "error": True, "output": "denied"}
    cited = [{"type": "url_citation", "url": "https://example.com/a", "title": "A"}]
    text = Block.llm_text("Sunny.")
    text.payload["citations"] = cited
    blocks = [Block.user("go"), *(raw_block({"type": "x"}, b) for b in (call, found, ran, failed)), text]
    assert all(b.kind is BlockKind.OTHER for b in blocks[1:5])
    assert [describe(b) for b in blocks[1:5]] == [
        '⚙ web_search({"query": "paris"})',
        "⚙ web_search: 1 source",
        "⚙ code_execution: 2\n",
        "⚙ mcp: error: denied",
    ]
    rows = turn_report(Turn(blocks=blocks))["blocks"]
    assert [r.get("builtin") for r in rows] == [None, call, found, ran, failed, None]
    assert [r.get("citations") for r in rows] == [None] * 5 + [cited]
    assert rows[-1]["sources"] == [{"url": "https://example.com/a", "title": "A"}]  # what the page lists
