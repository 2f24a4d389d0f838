"""``/docs``, the API document to read: a page of the web front-end (its own files, the same Content
Security Policy), nothing loaded from another origin; in Chromium it lists every route by tag with its
parameters, body and answers, and the filter keeps the routes whose path matches."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import test_web
from server_support import node_modules, running_app, sim_profile
from test_web import Page, axe_findings

from geppetto.server import create_app
from geppetto.simulator import Simulator
from geppetto.web import CONTENT_SECURITY_POLICY, MODULES, asset

pytest.importorskip("fastapi")

browser, page = test_web.browser, test_web.page  # the fixtures of the web tests: Chromium, a checked page

_IMPORT = re.compile(r'^import \{[^}]*\} from "\./([\w-]+\.js)";$', re.M)
_REFERENCE = re.compile(r'(?:src|href)="([^"]*)"')
# The one "http" dom.js holds that names no address to load: the SVG namespace (an identifier); its
# Markdown's https?:// pattern only lets a model's link through as a link, never loaded by the page.
_NOT_LOADED = ("http://www.w3.org/2000/svg", r"/^(https?:\/\/|mailto:)/i")


@pytest.fixture
def served(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[str]:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), api_key="sekrit")
    with running_app(app) as url:
        yield url


def _scripts(entry: str) -> list[str]:
    """``entry`` and every module it imports, directly or not."""
    seen = [entry]
    for name in seen:
        seen += [m for m in _IMPORT.findall(asset(name).decode()) if m not in seen]
    return seen


def test_docs_is_a_page_of_its_own_files_under_the_policy(served: str) -> None:
    with httpx.Client(base_url=served) as client:
        docs = client.get("/docs")  # open, as /openapi.json is, on a server with a key
        assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
        assert docs.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "default-src 'none'" in CONTENT_SECURITY_POLICY
        assert docs.headers["x-content-type-options"] == "nosniff"
        assert docs.content == asset("docs.html") == client.get("/ui/docs.html").content
        assert "http" not in docs.text and "<script>" not in docs.text and " style=" not in docs.text
        references = _REFERENCE.findall(docs.text)
        assert "/ui/docs.js" in references
        assert all(re.fullmatch(r"(/(?!/)|#)\S*|data:,", r) for r in references), references
        scripts = _scripts("docs.js")
        assert scripts == ["docs.js", "dom.js"] and set(scripts) <= set(MODULES)
        for name in scripts:
            served_script = client.get(f"/ui/{name}")
            assert served_script.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            text = served_script.text
            for literal in _NOT_LOADED:
                text = text.replace(literal, "")
            assert "http" not in text and "//" not in text.replace("// ", "").replace("\n//", ""), name


def test_docs_in_chromium_lists_the_routes_with_no_request_leaving_the_server(served: str, page: Page) -> None:
    p = page.page
    requested: list[str] = []
    p.on("request", lambda r: requested.append(r.url))
    p.goto(served + "/docs")
    sessions = p.locator(".operation[data-path='/api/sessions'][data-method='get']")
    sessions.wait_for()
    document = httpx.get(served + "/openapi.json").json()
    every = [(path, m) for path, ops in document["paths"].items() for m in ops]
    assert p.locator(".operation").count() == len(every)
    tags = {op["tags"][0] for ops in document["paths"].values() for op in ops.values()}
    assert sorted(p.locator("section.tag").evaluate_all("s => s.map(e => e.dataset.tag)")) == sorted(tags)
    summary = document["paths"]["/api/sessions"]["get"]["summary"]
    assert summary in sessions.locator(".op-head").inner_text()
    create = p.locator(".operation[data-path='/api/sessions'][data-method='post']")
    assert document["paths"]["/api/sessions"]["post"]["summary"] in create.locator(".op-head").inner_text()
    create.locator(".op-head").click()
    codes = create.locator(".answers tbody tr").evaluate_all("rows => rows.map(r => r.dataset.code)")
    assert codes == list(document["paths"]["/api/sessions"]["post"]["responses"])
    assert {"201", "401", "409", "422"} <= set(codes)
    conflict = document["paths"]["/api/sessions"]["post"]["responses"]["409"]["description"]
    assert conflict in create.locator(".answers tr[data-code='409']").inner_text()
    assert "application/json: ErrorBody" in create.locator(".answers tr[data-code='409']").inner_text()
    assert "Authorization: Bearer" in p.locator("main > .note").inner_text()  # this server has a key
    health = p.locator(".operation[data-path='/healthz']")
    health.locator(".op-head").click()
    assert health.locator(".note").inner_text() == "Open: no API key needed."
    assert create.locator(".note").count() == 0
    body = create.locator(".body-fields").inner_text()
    for field in ("id", "model", "mode", "system"):
        assert re.search(rf"^{field}\t", body, re.M), body
    assert '"properties"' in create.locator("pre").text_content()
    snapshot = p.locator(".operation[data-path='/api/sessions/{session_id}/snapshots/{seq}'][data-method='get']")
    snapshot.locator(".op-head").click()
    params = snapshot.locator(".params tbody").inner_text()
    assert re.search(r"^session_id\tpath\tyes", params, re.M) and re.search(r"^seq\tpath\tyes", params, re.M)
    page.shot("docs")
    p.fill("#route-filter", "approvals")
    shown = p.locator(".operation:visible").evaluate_all("ops => ops.map(o => o.dataset.path)")
    assert shown and all("approvals" in path for path in shown)
    assert sessions.is_hidden()
    p.fill("#route-filter", "")
    assert p.locator(".operation:visible").count() == len(every)
    outside = [u for u in requested if not u.startswith(served + "/") and not u.startswith("data:")]
    assert outside == [] and served + "/openapi.json" in requested


def test_docs_passes_axe(browser: Any, served: str) -> None:
    axe = node_modules() / "axe-core" / "axe.min.js"
    opened = Page(browser, "docs-axe", bypass_csp=True)  # to inject axe-core's script into the page
    try:
        p = opened.page
        p.goto(served + "/docs")
        create = p.locator(".operation[data-path='/api/sessions'][data-method='post']")
        create.locator(".op-head").click()
        create.locator(".body-fields").wait_for()
        assert axe_findings(p, axe) == []
        assert opened.errors == []
    finally:
        opened.close()
