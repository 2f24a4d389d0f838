"""The web chat's Approve and Deny buttons on a tool card that waits, in Chromium: reached and pressed with the
keyboard only, and shown again after a reload while the call still waits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import test_web
from server_support import running_app, sim_profile
from test_web import Page, new_session, send

import geppetto as gp
from geppetto.runtime import demo_registry
from geppetto.server import create_app
from geppetto.simulator import Simulator

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips
    expect = None

browser, page = test_web.browser, test_web.page  # the fixtures of the web tests: Chromium, a checked page
deleted: list[str] = []


@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


@pytest.fixture
def served(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[str]:
    deleted.clear()
    tools = demo_registry()
    tools.add(delete_file)
    app = create_app(sim_profile(geppetto_sim, mode="chained"), store=str(tmp_path / "s.db"), tools=tools)
    with running_app(app) as url:
        yield url


def test_approve_and_deny_with_the_keyboard_and_a_reload_shows_what_waits(served: str, page: Page) -> None:
    p = page.page
    new_session(p, served)
    send(p, "delete_file for 'a.txt'")
    card = p.locator(".tool-card.waiting")
    expect(card.locator(".badge")).to_have_text("waits for your approval")
    assert p.evaluate("document.activeElement.textContent") == "Approve"  # focus is on the question
    assert p.evaluate("document.activeElement.getAttribute('aria-label')") == "Approve delete_file"
    page.shot("waiting")
    finished = int(p.locator("#messages").get_attribute("data-finished") or 0)
    p.keyboard.press("Enter")
    p.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    done = p.locator(".tool-card").first
    expect(done.locator(".result")).to_have_text("deleted a.txt")
    expect(done.locator(".badge")).to_have_text("done")
    assert deleted == ["a.txt"] and p.locator(".approval").count() == 0
    assert "deleted a.txt" in p.locator("#messages .msg.assistant").last.inner_text()

    # answered at once, before the run that asked has finished: the answer waits for that end
    expect(p.locator("#send")).to_be_enabled()
    p.locator("#prompt").focus()
    p.keyboard.type("delete_file for 'c.txt'")
    p.keyboard.press("Enter")
    p.locator(".tool-card.waiting .approve").wait_for()
    p.keyboard.press("Enter")
    expect(p.locator(".tool-card").nth(1).locator(".result")).to_have_text("deleted c.txt")
    expect(p.locator("#send")).to_be_enabled()
    assert deleted == ["a.txt", "c.txt"]

    send(p, "delete_file for 'b.txt'")
    waiting = p.locator(".tool-card.waiting")
    expect(waiting.locator(".deny")).to_be_visible()
    p.reload()  # what waits is shown again from the session
    expect(p.locator(".tool-card.waiting .badge")).to_have_text("waits for your approval")
    p.locator(".tool-card.waiting .approve").focus()
    p.keyboard.press("Tab")  # the next stop after Approve is Deny
    assert p.evaluate("document.activeElement.textContent") == "Deny"
    finished = int(p.locator("#messages").get_attribute("data-finished") or 0)
    p.keyboard.press("Enter")
    p.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    denied = p.locator(".tool-card").nth(2)
    expect(denied.locator(".result")).to_have_text("not run: the user denied this tool call; do not retry it")
    expect(denied.locator(".badge")).to_have_text("denied")  # a refusal, not a failure
    assert "denied" in (denied.get_attribute("class") or "") and "failed" not in (denied.get_attribute("class") or "")
    assert deleted == ["a.txt", "c.txt"]
    page.shot("denied")


def test_a_prompt_while_a_call_waits_says_what_to_press_and_the_box_goes_once_answered(served: str, page: Page) -> None:
    p = page.page
    page.errors_expected = True  # the browser logs the 409 the prompt gets
    new_session(p, served)
    send(p, "delete_file for 'd.txt'")
    expect(p.locator(".tool-card.waiting .badge")).to_have_text("waits for your approval")
    p.locator("#prompt").focus()
    p.keyboard.type("something else")
    p.keyboard.press("Enter")
    box = p.locator("#messages .error")
    expect(box).to_have_text(
        "Error: A tool call above waits for your decision: press Approve or Deny on its card, "
        "then send your message again."
    )
    assert "session.resume" not in p.locator("#messages").inner_text()
    finished = int(p.locator("#messages").get_attribute("data-finished") or 0)
    p.locator(".tool-card.waiting .approve").click()
    p.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    expect(p.locator(".tool-card").first.locator(".result")).to_have_text("deleted d.txt")
    expect(box).to_have_count(0)
    assert deleted == ["d.txt"]


def test_a_call_denied_by_another_client_shows_denied_not_failed(served: str, page: Page) -> None:
    p = page.page
    sid = new_session(p, served)
    send(p, "delete_file for 'e.txt'")
    expect(p.locator(".tool-card.waiting .badge")).to_have_text("waits for your approval")
    [call] = httpx.get(f"{served}/api/sessions/{sid}").json()["pending_approvals"]
    # another tab, or any HTTP client, answers it: this page only sees the events
    answer = httpx.post(f"{served}/api/sessions/{sid}/approvals", json={"decisions": {call["call_id"]: False}})
    assert answer.status_code == 202, answer.text
    card = p.locator(".tool-card").first
    expect(card.locator(".badge")).to_have_text("denied")
    expect(card.locator(".result")).to_have_text("not run: the user denied this tool call; do not retry it")
    assert "failed" not in (card.get_attribute("class") or "") and deleted == []
