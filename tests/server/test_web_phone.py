"""The web chat as ``geppetto serve --profile sim --with-tools`` serves it, in Chromium: on a phone (390x844)
nothing scrolls sideways, the conversation comes before the folded new-session settings, the demo tool
``book_table`` shows its approval card and is approved or denied (a denied card reads denied), a file over
the old 1 MiB body limit is taken, a body over the limit is refused naming the file, its size and the flag,
and the Turn inspector words a healthy chain and a middleware's edit as ``geppetto inspect`` does."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import Worker
from test_web import Page, browser, expect, page, send  # noqa: F401  (the browser fixtures)

from geppetto.simulator import Simulator

PHONE = {"width": 390, "height": 844}
LONG = "x" * 180  # one word no line can break at a space
URL = "https://example.com/" + "a/" * 60


@pytest.fixture(scope="module")
def serve_with_tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("phone") / "s.db"
    worker = Worker("--profile", "sim", "--with-tools", "--store", str(store))
    try:
        yield worker.url
    finally:
        worker.stop()


@pytest.fixture
def phone(page: Page) -> Any:  # noqa: F811
    page.page.set_viewport_size(PHONE)
    return page


def start_chat(p: Any, url: str) -> None:
    p.goto(url + "/")
    p.locator("#server-info").filter(has_text="book_table").wait_for()
    p.click("#create-session")
    p.locator("#prompt").wait_for()


def no_sideways_scroll(p: Any) -> None:
    width = p.evaluate("document.documentElement.scrollWidth")
    # what sticks out, to name it when the test fails
    wide = p.evaluate(
        "w => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w)"
        ".slice(0, 5).map(e => `${e.tagName}.${e.className}#${e.id}`)",
        PHONE["width"],
    )
    assert width <= PHONE["width"], f"the page is {width} px wide in a {PHONE['width']} px viewport: {wide}"


def test_a_phone_shows_the_chat_first_and_never_scrolls_sideways(serve_with_tools: str, phone: Page) -> None:
    p = phone.page
    p.goto(serve_with_tools + "/")
    p.locator("#server-info").filter(has_text="book_table").wait_for()
    # the new session's settings are folded; the Create button is at hand
    assert not p.locator("#new-settings").evaluate("d => d.open")
    expect(p.locator("#new-mode")).to_be_hidden()
    expect(p.locator("#create-session")).to_be_visible()
    no_sideways_scroll(p)
    p.click("#create-session")
    p.locator("#prompt").wait_for()
    # the conversation and its composer come before the sessions and the new-session form
    assert p.locator("#messages").bounding_box()["y"] < p.locator(".sidebar").bounding_box()["y"]
    send_box = p.locator("#send").bounding_box()  # the prompt and Send are on the first screen
    assert send_box["y"] + send_box["height"] <= PHONE["height"], send_box
    send(p, f'echo "{LONG}" and see {URL}')
    card = p.locator("#messages .tool-card").first
    expect(card.locator(".badge")).to_have_text("done")
    assert LONG in card.locator(".args").inner_text() and LONG in card.locator(".result").inner_text()
    send(p, "What is the weather in Paris?")
    expect(p.locator("#messages .tool-card").nth(1).locator(".badge")).to_have_text("done")
    no_sideways_scroll(p)
    for box in ("#messages .tool-card .args", "#messages .msg.user"):  # each long box fits the viewport
        right = p.locator(box).first.bounding_box()
        assert right["x"] + right["width"] <= PHONE["width"], box
    phone.shot("chat-390")

    # the Turn inspector: its tables scroll in their own box, and a healthy chain reads as geppetto inspect says
    p.click("#open-inspector")
    p.locator("#requests tbody tr").first.wait_for()
    no_sideways_scroll(p)
    blocks = p.locator("#blocks tbody tr").count()
    next_request = p.locator("#next-request").inner_text()
    last_response = p.locator("#requests tbody tr").last.get_attribute("data-response-id")
    assert next_request == (
        f"chained: the server holds all {blocks} blocks; the next prompt is sent alone, "
        f"with previous_response_id={last_response}"
    )
    marks = p.locator("#blocks tbody tr td.mark").all_inner_texts()
    assert marks.count("anchor") == 1 and "held" in marks and marks.count("sent") < blocks, marks
    assert marks[0] == "held"  # the first prompt: the server holds it, it is not sent again
    phone.shot("inspector-390")


def test_book_table_waits_for_approval_and_is_approved_or_denied(serve_with_tools: str, phone: Page) -> None:
    p = phone.page
    start_chat(p, serve_with_tools)
    send(p, "Book a table at Chez Paul for 8pm")
    card = p.locator(".tool-card.waiting")
    expect(card.locator(".badge")).to_have_text("waits for your approval")
    assert "book_table" in card.locator("h3").inner_text() and "Paul" in card.locator(".args").inner_text()
    no_sideways_scroll(p)
    phone.shot("book-table-waiting")
    finished = int(p.locator("#messages").get_attribute("data-finished") or 0)
    card.locator(".approve").click()
    p.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    approved = p.locator(".tool-card").first
    expect(approved.locator(".badge")).to_have_text("done")
    assert "booked a table at Paul" in approved.locator(".result").inner_text()

    send(p, "Book a table at Chez Paul for 9pm")
    finished = int(p.locator("#messages").get_attribute("data-finished") or 0)
    p.locator(".tool-card.waiting .deny").click()
    p.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    denied = p.locator(".tool-card").nth(1)
    expect(denied.locator(".badge")).to_have_text("denied")
    expect(denied.locator(".result")).to_have_text("not run: the user denied this tool call; do not retry it")
    classes = (denied.get_attribute("class") or "").split()
    assert "denied" in classes and "failed" not in classes
    # it looks different from a failure: a failed card's border is red, a denied one's is grey and dashed
    style = denied.evaluate("c => [getComputedStyle(c).borderLeftStyle, getComputedStyle(c).borderLeftColor]")
    assert style[0] == "dashed" and style[1] != "rgb(138, 28, 18)", style
    phone.shot("book-table-denied")
    p.reload()  # read back from the store: still denied, not failed
    reloaded = p.locator(".tool-card").nth(1)
    expect(reloaded.locator(".badge")).to_have_text("denied")
    expect(p.locator(".tool-card").first.locator(".badge")).to_have_text("done")


def test_a_file_over_the_old_1_mib_limit_is_taken(serve_with_tools: str, phone: Page) -> None:
    p = phone.page
    start_chat(p, serve_with_tools)
    pdf = b"%PDF-1.4\n" + b"0" * (3 << 20)  # 3 MiB: 4 MiB as base64, four times the old limit
    p.set_input_files("#attach", files=[{"name": "report.pdf", "mimeType": "application/pdf", "buffer": pdf}])
    send(p, "Summarize.")
    assert p.locator("#messages .msg.user .attached").inner_text() == "Attached: report.pdf"
    answer = p.locator("#messages .msg.assistant").last.inner_text()
    assert f"Attached: report.pdf (application/pdf, {len(pdf)} bytes)" in answer
    assert p.locator("#messages .error").count() == 0


def test_a_body_over_the_limit_names_the_file_its_size_and_the_flag(tmp_path: Path, phone: Page) -> None:
    worker = Worker("--profile", "sim", "--store", str(tmp_path / "s.db"), "--max-body", "4000")
    try:
        p = phone.page
        phone.errors_expected = True  # the browser logs the 413
        p.goto(worker.url + "/")
        expect(p.locator("#server-info")).not_to_be_empty()
        p.click("#create-session")
        p.locator("#prompt").wait_for()
        p.set_input_files("#attach", files=[{"name": "a.pdf", "mimeType": "application/pdf", "buffer": b"0" * 5120}])
        p.locator("#prompt").fill("Summarize.")
        p.click("#send")
        error = p.locator("#messages .error")
        error.wait_for()
        text = error.inner_text()
        assert text.startswith("Error: Not sent: a.pdf (5.0 KiB) is too large for this server. The request is ")
        assert "over this server's limit of 3.9 KiB (4,000 bytes)" in text
        assert text.endswith("restart the server with geppetto serve --max-body BYTES to take larger ones.")
        assert p.locator("#attach").evaluate("input => input.files.length") == 1  # kept for another try
        no_sideways_scroll(p)
    finally:
        worker.stop()


async def uppercased_report(sim: Simulator) -> dict[str, Any]:
    """The report of a Turn whose answer a middleware edited after the server stored it."""
    import geppetto as gp
    from geppetto.cli._console import uppercase_middleware
    from geppetto.web import session_report

    async with sim.engine("openai-responses") as engine:
        session = gp.Session(engine, middlewares=[uppercase_middleware()])
        await session.run("hello there")
        assert session.latest is not None
        return session_report([session.latest])


def test_the_inspector_names_the_block_and_middleware_behind_a_mismatch(
    browser: Any,  # noqa: F811
    tmp_path: Path,
    geppetto_sim: Simulator,
) -> None:
    from geppetto.web import standalone_html

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        report = pool.submit(asyncio.run, uppercased_report(geppetto_sim)).result()
    out = tmp_path / "edited.html"
    out.write_text(standalone_html(report, title="edited"), encoding="utf-8")
    opened = Page(browser, "mismatch")
    try:
        opened.page.goto(out.as_uri())
        text = opened.page.locator("#next-request").inner_text()
        answer = report["blocks"][-1]
        assert "the whole Turn" in text and "fingerprint" in text, text
        assert f"most likely block #{answer['index']} (llm_text {answer['id'][:8]}), which the middleware " in text
        assert "'uppercase' made or edited" in text
        assert opened.errors == []
    finally:
        opened.close()
