"""The web chat, Turn inspector and dashboard in a real browser: Debian's chromium, headless, driven by
Playwright (no browser download). Each test saves a screenshot of the pages it saw under
``test-artifacts/web/`` (or ``$GEPPETTO_TEST_ARTIFACTS/web``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import (
    edited_session_report,
    input_bytes,
    model_calls,
    node_modules,
    running_app,
    save_long_session,
    sim_profile,
)

import geppetto as gp
from geppetto.runtime import demo_registry
from geppetto.server import create_app
from geppetto.simulator import Reply, Simulator

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the browser fixture skips
    expect = sync_playwright = None

CHROMIUM = os.environ.get("GEPPETTO_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("GEPPETTO_TEST_ARTIFACTS") or Path(__file__).parents[2] / "test-artifacts") / "web"
# The flags a closed network needs: without them chromium keeps trying to reach Google's hosts.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if sync_playwright is None:
        pytest.skip("playwright is not installed: pip install -e '.[dev]'")
    if not Path(CHROMIUM).is_file():
        pytest.skip(
            f"chromium is not installed at {CHROMIUM}: apt-get install chromium (.ci/run does), "
            "or point GEPPETTO_TEST_CHROMIUM at a Chromium binary"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def served(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[str]:
    app = create_app(sim_profile(geppetto_sim, mode="chained"), store=str(tmp_path / "s.db"), tools=demo_registry())
    with running_app(app) as url:
        yield url


class Page:
    """A browser page that fails the test on any script error or console error, and saves screenshots."""

    def __init__(self, browser: Any, name: str, **context: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, **context)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.name = name
        self.errors: list[str] = []
        self.errors_expected = False
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)

    def shot(self, what: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{what}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    opened = Page(browser, request.node.name)
    yield opened
    opened.close()
    if not opened.errors_expected:
        assert opened.errors == []


def open_settings(p: Any) -> None:
    """Unfold the new session's settings (model, mode, system prompt): folded until asked for."""
    if not p.locator("#new-settings").evaluate("d => d.open"):
        p.click("#new-settings summary")


def new_session(p: Any, url: str) -> str:
    p.goto(url + "/")
    p.locator("#server-info").filter(has_text="get_weather").wait_for()
    open_settings(p)
    p.select_option("#new-mode", "chained")
    p.click("#create-session")
    p.locator("#prompt").wait_for()
    return str(p.evaluate("decodeURIComponent(location.hash.split('/')[2])"))


def send(p: Any, text: str) -> None:
    """Type ``text`` in the focused prompt, send it with Enter and wait for the answer to end."""
    expect(p.locator("#send")).to_be_enabled()  # the previous answer has ended (its stream is closed)
    finished = int(p.locator("#messages").get_attribute("data-finished") or 0)
    p.locator("#prompt").focus()
    p.keyboard.type(text)
    p.keyboard.press("Enter")
    p.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    expect(p.locator("#send")).to_be_enabled()


def test_chat_with_tools_then_the_inspector_matches_the_simulator(
    served: str, page: Page, geppetto_sim: Simulator
) -> None:
    p = page.page
    new_session(p, served)
    geppetto_sim.queue(Reply(text="Let me check.", reasoning="The user wants the weather; call the tool."))
    send(p, "Hello **there**")
    assert p.locator("#messages details.reasoning summary").first.inner_text() == "Reasoning"
    assert not p.locator("#messages details.reasoning").first.evaluate("d => d.open")  # collapsed
    send(p, "What is the weather in Paris?")
    card = p.locator("#messages .tool-card").first
    assert "get_weather" in card.locator("h3").inner_text()
    assert "Paris" in card.locator(".args").inner_text()
    assert "foggy" in card.locator(".result").inner_text() or "temperature_c" in card.locator(".result").inner_text()
    assert "done" in card.locator(".badge").inner_text()
    assert "Here is what the tools returned" in p.locator("#messages .msg.assistant").last.inner_text()
    send(p, "And the weather in Rome?")
    assert p.locator("#messages .msg.user").count() == 3
    page.shot("chat")

    # reload: the same history, read back from the store
    p.reload()
    p.locator("#messages .tool-card").first.wait_for()
    assert p.locator("#messages .msg.user .body").all_inner_texts() == [
        "Hello **there**",
        "What is the weather in Paris?",
        "And the weather in Rome?",
    ]
    assert p.locator("#messages .tool-card").count() == 2  # Paris and Rome

    # the inspector: every request, its anchor and delta as the simulator received them
    p.click("#open-inspector")
    p.locator("#requests tbody tr").first.wait_for()
    sent = model_calls(geppetto_sim)
    rows = p.locator("#requests tbody tr")
    assert rows.count() == len(sent) == 5  # one per model call: 1 + 2 (tool call, answer) + 2
    for k, body in enumerate(sent):
        row = rows.nth(k)
        row.get_by_role("button").click()
        assert row.get_by_role("button").get_attribute("aria-pressed") == "true"
        assert (row.get_attribute("data-anchor") or None) == body.get("previous_response_id")
        delta = p.locator("#blocks tbody tr[data-mark='delta']")
        anchor = p.locator("#blocks tbody tr[data-mark='anchor']")
        if body.get("previous_response_id"):
            # the delta: one input item per block here (user text, tool result)
            assert delta.count() == len(body["input"])
            assert anchor.count() == 1
            assert body["previous_response_id"].startswith(anchor.locator("td").nth(6).locator("code").inner_text())
            detail = p.locator("#request-detail").inner_text()
            assert body["previous_response_id"] in detail
        else:
            assert anchor.count() == 0
            assert "whole Turn" in p.locator("#request-detail").inner_text()
        assert row.locator("td").nth(5).inner_text() == f"{input_bytes(body)} B"
        for item, block in zip(body["input"][-1:], delta.all()[-1:], strict=False):
            if item.get("type") == "function_call_output":
                assert item["output"][:40] in block.locator("td.content").inner_text()
            elif isinstance(item.get("content"), str):
                assert block.locator("td.content").inner_text() == item["content"]
    # the next request, as the engine's planning code works it out: it chains on the last answer
    next_request = p.locator("#next-request")
    held = (
        f"chained: the server holds all {p.locator('#blocks tbody tr').count()} blocks; the next prompt is sent alone"
    )
    assert next_request.inner_text().startswith(held), next_request.inner_text()
    assert next_request.inner_text().endswith(
        f"with previous_response_id={p.locator('#requests tbody tr').last.get_attribute('data-response-id')}"
    )
    page.shot("inspector")

    p.click("#nav-dashboard")
    p.locator("#tile-requests .value").filter(has_text=str(len(sent))).wait_for()
    assert p.locator("#tile-chained .value").inner_text() == str(sum(1 for b in sent if b.get("previous_response_id")))
    assert p.locator("#bytes-plot svg rect").count() == 2
    page.shot("dashboard")


def stalled(sim: Simulator, n: int) -> None:
    """Wait until the simulator has the ``n``-th model request (the stalled one): a cancel sent before
    the request leaves would leave the queued stall to the next prompt."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while len(model_calls(sim)) < n:
        assert time.monotonic() < deadline, "the model request was never sent"
        time.sleep(0.02)


def test_keyboard_only_send_and_cancel(served: str, page: Page, geppetto_sim: Simulator) -> None:
    p = page.page
    new_session(p, served)
    assert p.evaluate("document.activeElement.id") == "prompt"  # the chat opens with the prompt focused
    geppetto_sim.fail_next(stall_after=1, stall_seconds=30)
    p.keyboard.type("Tell me a long story")
    p.keyboard.press("Enter")
    expect(p.locator("#cancel")).to_be_enabled()
    stalled(geppetto_sim, 1)
    p.keyboard.press("Tab")  # Send is disabled while answering: the next stop is Cancel
    assert p.evaluate("document.activeElement.id") == "cancel"
    p.keyboard.press("Enter")
    p.locator("#messages .note").filter(has_text="Cancelled").wait_for()
    expect(p.locator("#send")).to_be_enabled()
    assert p.evaluate("document.activeElement.id") == "prompt"  # focus comes back to the prompt
    page.shot("cancelled")

    # and Escape cancels too
    geppetto_sim.fail_next(stall_after=1, stall_seconds=30)
    p.keyboard.type("Another long one")
    p.keyboard.press("Enter")
    expect(p.locator("#cancel")).to_be_enabled()
    stalled(geppetto_sim, 2)
    p.keyboard.press("Escape")
    p.locator("#messages .note").nth(1).wait_for()
    send(p, "Hello")
    assert p.locator("#messages .msg.assistant").last.inner_text().endswith("You said: Hello")


def test_model_html_is_shown_as_text(served: str, page: Page, geppetto_sim: Simulator) -> None:
    p = page.page
    new_session(p, served)
    hostile = (
        '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> '
        "[click](javascript:window.__pwned=3) **bold** `code`"
    )
    send(p, hostile)
    answer = p.locator("#messages .msg.assistant").last
    text = answer.inner_text()
    assert "<script>window.__pwned = 1</script>" in text
    assert '<img src=x onerror="window.__pwned = 2">' in text
    assert p.locator("#messages script, #messages img, #messages a[href^='javascript']").count() == 0
    assert answer.locator("strong").inner_text() == "bold"  # Markdown still renders
    assert answer.locator("code").inner_text() == "code"
    p.click("#open-inspector")
    p.locator("#blocks tbody tr").first.wait_for()
    assert "<script>" in p.locator("#blocks").inner_text()
    assert p.locator("main script, main img").count() == 0
    assert p.evaluate("window.__pwned === undefined")
    page.shot("escaped")


def test_provider_errors_are_shown_in_place(served: str, page: Page, geppetto_sim: Simulator) -> None:
    p = page.page
    new_session(p, served)
    geppetto_sim.fail_next(400)
    send(p, "Hello")
    alert = p.locator("#messages .error[role='alert']")
    assert alert.count() == 1
    assert "400" in alert.inner_text()
    send(p, "Hello again")  # the session goes on
    assert "You said: Hello again" in p.locator("#messages .msg.assistant").last.inner_text()


def axe_findings(p: Any, axe: Path) -> list[str]:
    p.add_script_tag(path=str(axe))
    result = p.evaluate("async () => (await axe.run(document)).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in result
        if v["impact"] in ("serious", "critical")
    ]


def test_pages_pass_axe(browser: Any, served: str, geppetto_sim: Simulator) -> None:
    axe = node_modules() / "axe-core" / "axe.min.js"
    opened = Page(browser, "axe", bypass_csp=True)  # to inject axe-core's script into the page
    try:
        p = opened.page
        session = new_session(p, served)
        geppetto_sim.queue(Reply(text="# Title\n\n- one\n- two\n\n```\ncode\n```", reasoning="thinking"))
        send(p, "Hello")
        send(p, "What is the weather in Paris?")
        findings = {"chat": axe_findings(p, axe)}
        p.goto(f"{served}/#/inspect/{session}")
        p.locator("#blocks tbody tr").first.wait_for()
        findings["inspector"] = axe_findings(p, axe)
        p.goto(f"{served}/#/dashboard")
        p.locator("#bytes-plot").wait_for()
        findings["dashboard"] = axe_findings(p, axe)
        assert findings == {"chat": [], "inspector": [], "dashboard": []}
        assert opened.errors == []
    finally:
        opened.close()


def test_the_inspect_html_page_stands_alone(browser: Any, tmp_path: Path, geppetto_sim: Simulator) -> None:
    from geppetto.turns import Turn, save_turn

    async def conversation() -> Turn:
        async with geppetto_sim.engine("openai-responses") as engine:
            session = gp.Session(engine)
            await session.run("Hello <script>window.__pwned = 1</script>")
            return await session.run("And more")

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        turn = pool.submit(asyncio.run, conversation()).result()
    source = save_turn(tmp_path / "turn.yaml", turn)
    out = tmp_path / "inspect.html"
    done = subprocess.run(
        [sys.executable, "-m", "geppetto", "inspect", str(source), "--html", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    opened = Page(browser, "standalone")
    try:
        p = opened.page
        p.route("**/*", lambda route: route.abort() if not route.request.url.startswith("file:") else route.continue_())
        p.goto(out.as_uri())
        p.locator("#blocks tbody tr").first.wait_for()
        assert p.locator("#blocks tbody tr").count() == len(turn.blocks)
        assert p.locator("#requests tbody tr").count() >= 2
        assert "<script>" in p.locator("#blocks").inner_text()
        assert p.evaluate("window.__pwned === undefined")
        opened.shot("page")
        assert opened.errors == []
    finally:
        opened.close()


def test_the_inspector_shows_middleware_edits_and_fallbacks(
    browser: Any, tmp_path: Path, geppetto_sim: Simulator
) -> None:
    from geppetto.web import standalone_html

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        report = pool.submit(asyncio.run, edited_session_report(geppetto_sim, tmp_path / "s.db")).result()
    out = tmp_path / "edited.html"
    out.write_text(standalone_html(report, title="edited"), encoding="utf-8")
    opened = Page(browser, "edits")
    try:
        p = opened.page
        p.goto(out.as_uri())
        rows = p.locator("#requests tbody tr")
        assert rows.count() == 3
        assert rows.nth(2).locator("td").nth(7).inner_text() == "fingerprint_mismatch"
        assert "fingerprint_mismatch: no valid anchor" in p.locator("#request-detail .fallback").inner_text()
        change = p.locator("#changes li")
        assert change.count() == 1
        assert "edited system" in change.inner_text() and "by system_prompt" in change.inner_text()
        assert change.locator("del").all_inner_texts() == ["terse"]
        assert change.locator("ins").all_inner_texts() == ["verbose"]
        # the whole Turn was sent: every block before the response is in its delta, and none is an anchor
        assert p.locator("#blocks tbody tr[data-mark='anchor']").count() == 0
        assert p.locator("#blocks tbody tr[data-mark='delta']").count() == report["requests"][2]["context_blocks"]
        opened.shot("page")
        assert opened.errors == []
    finally:
        opened.close()


def test_a_server_with_a_key_asks_for_it_once(page: Page, geppetto_sim: Simulator, tmp_path: Path) -> None:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), tools=demo_registry(), api_key="k3y")
    with running_app(app) as url:
        p = page.page
        page.errors_expected = True  # the first requests are refused (401) until the key is given
        p.goto(url + "/")
        p.locator("#api-key").wait_for()
        assert p.evaluate("document.activeElement.id") == "api-key"
        p.keyboard.type("k3y")
        p.keyboard.press("Enter")
        p.locator("#server-info").filter(has_text="get_weather").wait_for()
        p.click("#create-session")
        p.locator("#prompt").wait_for()
        assert p.locator("#key-dialog").is_hidden()


def test_the_inspector_pages_through_a_long_session(page: Page, geppetto_sim: Simulator, tmp_path: Path) -> None:
    from geppetto.session.stores import open_store

    path = tmp_path / "s.db"

    async def make() -> None:
        with open_store(str(path)) as store:
            await save_long_session(store, "long", 45)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        pool.submit(asyncio.run, make()).result()
    app = create_app(sim_profile(geppetto_sim), store=str(path))
    with running_app(app) as url:
        p = page.page
        p.goto(f"{url}/#/inspect/long")
        window = p.locator("#inspector-window")
        expect(window).to_contain_text("Snapshots 26 to 45 of 45")
        assert p.locator("#requests tbody tr").count() == 20
        assert p.locator("#newer-requests").count() == 0
        p.click("#older-requests")
        expect(window).to_contain_text("Snapshots 6 to 25 of 45")
        assert p.locator("#requests tbody tr").count() == 20
        assert p.locator("#blocks tbody tr").count() == 50  # the blocks of snapshot 25
        p.click("#older-requests")
        expect(window).to_contain_text("Snapshots 1 to 5 of 45")
        assert p.locator("#older-requests").count() == 0
        p.click("#newer-requests")
        expect(window).to_contain_text("Snapshots 6 to 25 of 45")
        page.shot("window")
        p.click("#newer-requests")
        expect(window).to_contain_text("Snapshots 26 to 45 of 45")
