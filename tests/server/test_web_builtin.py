"""Provider built-in tools and citations in a real browser: the simulator runs a scripted web search and a
code run for each provider's API; the chat shows each as a built-in tool card (with the search's sources
where the provider sends them) and lists the sources the answer cites, live and after a reload; the Turn
inspector, served and as one file, names the built-in blocks and lists the citations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from test_openapi import _conforms
from test_protocols_builtin import HITS, provider, search_and_run, url  # noqa: F401  (url: a server per API)
from test_web import Page, browser, expect, page, send  # noqa: F401  (the browser fixtures)

from geppetto.simulator import Simulator
from geppetto.turns import PAYLOAD_CITATIONS, BlockKind, citation_sources, turn_from_dict

ANSWER = "Sunny in Paris, and 2."


def open_session(p: Any, base: str) -> str:
    p.goto(base + "/")
    expect(p.locator("#server-info")).not_to_be_empty()
    p.click("#create-session")
    p.locator("#prompt").wait_for()
    return str(p.evaluate("decodeURIComponent(location.hash.split('/')[2])"))


def check_chat(p: Any, searched: bool) -> None:
    """The built-in cards and the answer's sources, as the chat shows them."""
    code = p.locator("#messages .tool-card.builtin[data-tool='code_execution']")
    expect(code).to_have_count(1)
    assert "Built-in code_execution" in code.locator("h3").inner_text()
    assert "1+1" in code.locator(".args").inner_text()
    search = p.locator("#messages .tool-card.builtin[data-tool='web_search']")
    expect(search).to_have_count(1 if searched else 0)
    if searched:
        assert "paris weather" in search.locator(".args").inner_text()
    answer = p.locator("#messages .msg.assistant").last
    assert answer.locator(".body").inner_text().strip() == ANSWER
    cited = answer.locator(".citations ol.sources li a")
    expect(cited.first).to_be_visible()
    assert cited.first.get_attribute("href") == HITS[0]["url"]
    assert cited.first.inner_text() == HITS[0]["title"]
    assert cited.first.get_attribute("rel") == "noopener noreferrer nofollow"


def check_session_sources(base: str, session: str) -> None:
    """The session's answer carries each cited text block's citations normalized, as its API document says."""
    view = httpx.get(f"{base}/api/sessions/{session}").json()
    cited = [
        b
        for b in turn_from_dict(view["latest"]).blocks
        if b.kind is BlockKind.LLM_TEXT and b.payload.get(PAYLOAD_CITATIONS)
    ]
    assert cited
    assert view["sources"] == {b.id: citation_sources(b.payload[PAYLOAD_CITATIONS]) for b in cited}
    assert view["sources"][cited[-1].id][0]["url"] == HITS[0]["url"]
    document = httpx.get(f"{base}/openapi.json").json()
    schema = document["paths"]["/api/sessions/{session_id}"]["get"]["responses"]["200"]["content"]
    assert _conforms(document, schema["application/json"]["schema"], view) == []


def test_builtin_tools_and_citations_in_the_chat_and_the_inspector(
    url: str,  # noqa: F811
    page: Page,  # noqa: F811
    geppetto_sim: Simulator,
    tmp_path: Path,
) -> None:
    p = page.page
    name = provider(url)
    session = open_session(p, url)
    geppetto_sim.queue(search_and_run())
    send(p, "Search the weather in Paris and compute 1+1")
    searched = name != "gemini"  # Gemini's search is only its grounding: the answer's citations
    check_chat(p, searched)
    code = p.locator("#messages .tool-card.builtin[data-tool='code_execution']")
    search = p.locator("#messages .tool-card.builtin[data-tool='web_search']")
    if name == "openai":  # a Responses call item holds the whole call: no separate result
        assert code.locator(".badge").inner_text() == "run by the provider"
    else:
        assert code.locator(".result").inner_text().strip() == "2"
        assert code.locator(".badge").inner_text() == "done"
    if name == "anthropic":  # Claude's search result lists what it found
        links = search.locator("ol.sources a")
        assert links.all_inner_texts() == [h["title"] for h in HITS]
        assert [links.nth(i).get_attribute("href") for i in range(2)] == [h["url"] for h in HITS]
    page.shot(f"{name}-chat")

    live = p.locator("#messages .msg.assistant .citations ol.sources li").all_inner_texts()
    p.reload()  # the saved blocks show the same, with the sources the session's answer normalized
    p.locator("#messages .msg.assistant").first.wait_for()
    check_chat(p, searched)
    assert p.locator("#messages .msg.assistant .citations ol.sources li").all_inner_texts() == live
    check_session_sources(url, session)

    p.click("#open-inspector")
    rows = p.locator("#blocks tbody tr[data-builtin='code_execution']")
    expect(rows.first).to_be_visible()
    assert "built-in code_execution call" in rows.first.locator("td").nth(1).inner_text()
    assert rows.first.locator("td.content").inner_text().startswith("⚙ code_execution(")
    assert (
        p.locator("#blocks tbody tr[data-builtin='web_search']").count()
        == (
            {"anthropic": 2, "openai": 1, "gemini": 0}[name]  # Claude: call and result; Responses: the call item
        )
    )
    cited = p.locator("#blocks tbody tr[data-kind='llm_text'] td.content .citations a").first
    assert cited.get_attribute("href") == HITS[0]["url"]
    page.shot(f"{name}-inspector")

    from geppetto.web import session_report, standalone_html

    latest = httpx.get(f"{url}/api/sessions/{session}").json()["latest"]
    out = tmp_path / "builtin.html"
    out.write_text(standalone_html(session_report([turn_from_dict(latest)]), title="built-in"), encoding="utf-8")
    p.goto(out.as_uri())
    expect(p.locator("#blocks tbody tr[data-builtin='code_execution']").first).to_be_visible()
    assert p.locator("#blocks td.content .citations a").first.get_attribute("href") == HITS[0]["url"]
    page.shot(f"{name}-one-file")
