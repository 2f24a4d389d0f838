"""The web pages as a new user meets them (a real browser, as in test_web): Send and Cancel on screen at
1280x720, an unknown session said in words, sessions named by their first prompt, reasoning shown offline
by the simulator's reasoning models, and the inspector's counts in conversation mode."""

from __future__ import annotations

from typing import Any

from test_web import Page, browser, new_session, open_settings, page, send, served

from geppetto.simulator import Simulator

__all__ = ["browser", "page", "served"]  # the fixtures this module shares with test_web


def test_send_and_cancel_stay_above_the_fold_at_1280x720(browser: Any, served: str) -> None:
    small = Page(browser, "fold-720")
    try:
        p = small.page
        p.set_viewport_size({"width": 1280, "height": 720})
        new_session(p, served)
        for text in ("Hello", "What is the weather in Paris?", "And in Rome?"):
            send(p, text)
        for button in ("#send", "#cancel"):
            box = p.locator(button).bounding_box()
            assert box is not None and box["y"] + box["height"] <= 720, (button, box)
        small.shot("chat")
    finally:
        small.close()
    assert small.errors == []


def test_an_unknown_session_is_said_in_words(page: Page, served: str) -> None:
    p = page.page
    page.errors_expected = True  # the browser logs the 404 of the API call
    for route in ("chat", "inspect"):
        p.goto(f"{served}/#/{route}/no-such-session")
        problem = p.locator("#session-problem")
        problem.wait_for()
        text = problem.inner_text()
        assert text.startswith("There is no session no-such-session on this server"), text
        assert "GET /api" not in text and "POST" not in text
        assert problem.get_by_role("link", name="Start a new chat").count() == 1


def test_the_dashboard_names_sessions_by_their_first_prompt(page: Page, served: str) -> None:
    p = page.page
    sid = new_session(p, served)
    send(p, "Plan a weekend   in Lisbon with a friend")
    p.click("#nav-dashboard")
    link = p.locator("#session-table a.session-name").first
    link.wait_for()
    assert link.inner_text() == "Plan a weekend in Lisbon with a friend"
    assert link.get_attribute("title") == sid
    assert sid[:8] in p.locator("#session-table tbody tr").first.inner_text()
    page.shot("dashboard")


def test_reasoning_is_shown_offline_with_a_simulator_reasoning_model(page: Page, served: str) -> None:
    p = page.page
    p.goto(served + "/")
    p.locator("#server-info").filter(has_text="get_weather").wait_for()
    open_settings(p)
    p.fill("#new-model", "sim-reasoner")
    p.click("#create-session")
    p.locator("#prompt").wait_for()
    send(p, "Hello")
    reasoning = p.locator("#messages details.reasoning").first
    reasoning.locator("summary").click()
    assert reasoning.locator("strong").inner_text() == "Considering the request"  # Markdown, rendered
    assert "No tool is needed" in reasoning.inner_text() and "**" not in reasoning.inner_text()
    page.shot("reasoning")


def test_the_inspector_counts_conversation_requests_as_such(page: Page, served: str, geppetto_sim: Simulator) -> None:
    p = page.page
    p.goto(served + "/")
    p.locator("#server-info").filter(has_text="get_weather").wait_for()
    open_settings(p)
    p.select_option("#new-mode", "conversation")
    p.click("#create-session")
    p.locator("#prompt").wait_for()
    send(p, "Hello")
    send(p, "Again")
    p.click("#open-inspector")
    summary = p.locator("#inspector-summary")
    summary.wait_for()
    text = summary.inner_text()
    assert "2 requests" in text and "2 conversation" in text and "0 chained" in text, text
    assert "1 stateless" not in text and "0 fallbacks" in text
    assert p.locator("#next-heading").inner_text() == "Next request (conversation mode)"
    next_request = p.locator("#next-request").inner_text()
    assert next_request.startswith("conversation: the server holds all ") and "previous_response_id" not in next_request
    assert "the next prompt is sent alone, with conversation=conv_" in next_request, next_request
    page.shot("inspector-conversation")
