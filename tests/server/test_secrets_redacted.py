"""A provider (or a proxy) that quotes the API key in its error text: the key reaches no HTTP answer, no
event, no stored row and no log line, on every engine and through ``geppetto serve``."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running_app, sse_events
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import geppetto as gp
from geppetto._redact import redact_secrets
from geppetto.profiles import Profile
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine, InteractionsEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.server import create_app

KEY = "sk-proj-Echoed0123456789abcdefKEY"
PLAIN_KEY = "proxy-secret-42x"  # not shaped like a key: hidden by value, because it was sent
GOOGLE_KEY = "AIzaSyEchoed0123456789abcdefghijklmn"


def _sent_key(request: Request) -> str:
    headers = request.headers
    value = headers.get("authorization") or headers.get("x-api-key") or headers.get("x-goog-api-key") or ""
    return value.removeprefix("Bearer ")


async def _refuse(request: Request) -> JSONResponse:
    # What some proxies do: quote the key they refused, in the provider's own error shape.
    key = _sent_key(request)
    message = f"Incorrect API key provided: {key}. You can find your API key in your account."
    if "/v1beta/" in request.url.path:
        body: dict[str, Any] = {"error": {"code": 401, "message": message, "status": "UNAUTHENTICATED"}}
    elif request.url.path.endswith("/messages"):
        body = {"type": "error", "error": {"type": "authentication_error", "message": message}}
    else:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
    return JSONResponse(body, status_code=401)


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    app = Starlette(routes=[Route("/{path:path}", _refuse, methods=["GET", "POST"])])
    with running_app(app) as url:
        yield url


def test_key_shapes_are_hidden_whoever_owns_them() -> None:
    text = (
        "keys sk-ant-api03-abcdefghijklmnop_QRST and sk-proj-0123456789abcdefXYZ, "
        f"{GOOGLE_KEY}, Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123 and "
        "https://host/v1beta/models?key=anything-at-all&alt=sse"
    )
    shown = redact_secrets(text)
    assert shown == ("keys *** and ***, ***, Authorization: Bearer *** and https://host/v1beta/models?key=***&alt=sse")
    # Ordinary words that merely start alike stay.
    assert redact_secrets("sk-learn and Bearer short") == "sk-learn and Bearer short"


ENGINES = {
    "openai-responses": lambda url, key: ResponsesEngine(model="m", api_key=key, base_url=url + "/v1"),
    "openai-chat": lambda url, key: ChatEngine(model="m", api_key=key, base_url=url + "/v1"),
    "anthropic": lambda url, key: ClaudeEngine(model="m", api_key=key, base_url=url),
    "gemini": lambda url, key: GeminiEngine(model="m", api_key=key, base_url=url),
    "gemini-interactions": lambda url, key: InteractionsEngine(model="m", api_key=key, base_url=url),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("key", [KEY, PLAIN_KEY, GOOGLE_KEY])
async def test_a_session_never_shows_the_echoed_key(
    echo_url: str, engine: str, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[Any] = []
    session = gp.Session(ENGINES[engine](echo_url, key), sinks=[seen.append])
    with caplog.at_level(logging.DEBUG), pytest.raises(gp.AuthenticationError) as raised:
        await session.run("hello")
    error = raised.value
    assert "Incorrect API key provided: ***." in str(error)
    assert key not in str(error) and key not in error.message
    assert key not in json.dumps(error.body)
    assert key not in repr(error.args)
    assert all(key not in repr(event) for event in seen)
    assert all(key not in record.getMessage() for record in caplog.records)


def _store_text(path: Path) -> str:
    return "".join(p.read_bytes().decode("latin-1") for p in path.parent.glob(path.name + "*"))


@pytest.mark.parametrize("key", [KEY, PLAIN_KEY])
def test_serve_never_shows_the_echoed_key(
    echo_url: str, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ECHO_TEST_KEY", key)
    profile = Profile(
        name="echo", provider="openai-responses", model="m", base_url=echo_url + "/v1", api_key_env="ECHO_TEST_KEY"
    )
    store = tmp_path / "store.db"
    app = create_app(profile, store=str(store))
    answers: list[str] = []
    with caplog.at_level(logging.DEBUG), running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        created = client.post("/api/sessions", json={})
        sid = created.json()["id"]
        started = client.post(f"/api/sessions/{sid}/messages", json={"text": "hello"})
        assert started.status_code == 202, started.text
        with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
            lines: list[str] = []
            for line in stream.iter_lines():
                lines.append(line)
                if '"run_finished"' in line:
                    break
        events = list(sse_events([*lines, ""]))
        answers.append("\n".join(lines))
        finished = [e for e in events if isinstance(e.get("data"), dict) and e["data"].get("type") == "run_finished"]
        assert finished and finished[-1]["data"]["status"] == "failed"
        assert "***" in finished[-1]["data"]["error"]
        for route in (f"/api/sessions/{sid}", f"/api/sessions/{sid}/snapshots", "/api/sessions"):
            answers.append(client.get(route).text)
    assert all(key not in text for text in answers), [t for t in answers if key in t]
    assert key not in _store_text(store)
    assert all(key not in record.getMessage() for record in caplog.records)
    with contextlib.suppress(FileNotFoundError):
        assert key not in (tmp_path / "server.log").read_text()
