"""Regenerate the README's and docs/web.md's screenshots from what a new user runs: `geppetto serve
--profile sim --with-tools`, a session on the simulator's reasoning model, a question that calls a tool.

Usage: python scripts/screenshots.py [OUT_DIR]   (default: docs/images)
Needs the dev extra (Playwright) and Chromium (/usr/bin/chromium, or $GEPPETTO_TEST_CHROMIUM).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect, sync_playwright

CHROMIUM = os.environ.get("GEPPETTO_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
PROMPTS = ["Hello! What can you do?", "What is the weather in Paris?", "And the weather in Lisbon?"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send(page: Page, text: str) -> None:
    finished = int(page.locator("#messages").get_attribute("data-finished") or 0)
    page.fill("#prompt", text)
    page.keyboard.press("Enter")
    page.locator(f"#messages[data-finished='{finished + 1}']").wait_for(state="attached")
    expect(page.locator("#send")).to_be_enabled()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "GEPPETTO_DATA_DIR": data, "GEPPETTO_CONFIG_DIR": data}
        command = [sys.executable, "-m", "geppetto", "serve", "--profile", "sim", "--with-tools", "--port", str(port)]
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    if httpx.get(url + "/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
                page.goto(url + "/")
                page.locator("#server-info").filter(has_text="get_weather").wait_for()
                page.fill("#new-model", "sim-reasoner")
                page.click("#create-session")
                page.locator("#prompt").wait_for()
                for prompt in PROMPTS:
                    send(page, prompt)
                page.locator("#messages details.reasoning").first.evaluate("d => { d.open = true; }")
                page.locator("#messages").evaluate("m => { m.scrollTop = 0; }")
                page.screenshot(path=str(out / "chat.png"))
                page.click("#open-inspector")
                page.locator("#requests tbody tr").first.wait_for()
                page.screenshot(path=str(out / "inspector.png"))
                page.click("#nav-dashboard")
                page.locator("#session-table a.session-name").first.wait_for()
                page.screenshot(path=str(out / "dashboard.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait(15)
    print(f"wrote chat.png, inspector.png and dashboard.png to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs" / "images")
