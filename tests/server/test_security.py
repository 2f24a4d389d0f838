"""``geppetto serve`` against hostile pages and hostile text: cross-site and DNS-rebinding requests
refused (and let through when the deployment allows them), no credentials or server paths in what reaches
clients or the log, text the stores cannot hold refused with a 422 naming the field."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Worker, running_app, sim_profile, sse_events, write_sim_profile

from geppetto.server import create_app
from geppetto.session.stores import redact_url
from geppetto.simulator import Simulator

EVIL = "https://evil.example"
APP = "https://app.example"
CHAT = {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hello"}]}]}
RUN = {
    "threadId": "t1",
    "runId": "r1",
    "state": {},
    "messages": [{"id": "m1", "role": "user", "content": "Hello"}],
    "tools": [],
    "context": [],
    "forwardedProps": {},
}


def serve(sim: Simulator, path: Path, **options: Any) -> Any:
    return running_app(create_app(sim_profile(sim), store=str(path / "s.db"), **options))


@pytest.fixture
def server(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[httpx.Client]:
    with serve(geppetto_sim, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def sessions(client: httpx.Client) -> list[str]:
    return [s["session_id"] for s in client.get("/api/sessions").json()["sessions"]]


# -- pages on other sites ----------------------------------------------------------------------------


def test_a_cross_site_text_plain_post_starts_nothing(server: httpx.Client) -> None:
    made = server.post("/api/sessions", json={"id": "mine"})
    assert made.status_code == 201
    # What a page on another site can send without a preflight: a text/plain body, its Origin attached.
    for path, body in [
        ("/api/sessions", '{"id": "theirs"}'),
        ("/api/sessions/mine/messages", '{"text": "spend the key"}'),
        ("/api/chat", '{"id": "c", "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]}'),
    ]:
        refused = server.post(path, content=body, headers={"content-type": "text/plain", "origin": EVIL})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "origin_not_allowed"
        assert f"--allowed-origin {EVIL}" in refused.json()["error"]["message"]
        assert "access-control-allow-origin" not in refused.headers
        # The same body without an Origin (not a browser) is still not JSON by its Content-Type.
        plain = server.post(path, content=body, headers={"content-type": "text/plain"})
        assert plain.status_code == 415, plain.text
        assert plain.json()["error"] == {
            "message": "the body was sent with Content-Type 'text/plain'; send JSON with "
            "'Content-Type: application/json'",
            "type": "not_json",
        }
    no_type = server.post("/api/sessions/mine/messages", content=b'{"text": "hi"}', headers={"content-type": ""})
    assert no_type.status_code == 415 and "no Content-Type" in no_type.json()["error"]["message"]
    assert sessions(server) == ["mine"]
    assert server.get("/api/sessions/mine").json()["inferences"] == []


def test_a_foreign_origin_cannot_change_state_even_with_a_json_body(server: httpx.Client) -> None:
    sid = server.post("/api/sessions", json={}).json()["id"]
    for method, path, body in [
        ("POST", "/api/sessions", {}),
        ("POST", f"/api/sessions/{sid}/messages", {"text": "hi"}),
        ("POST", f"/api/sessions/{sid}/cancel", {}),
        ("POST", "/api/chat", CHAT),
        ("POST", "/ag-ui", RUN),
        ("DELETE", f"/api/sessions/{sid}", None),
    ]:
        refused = server.request(method, path, json=body, headers={"origin": EVIL})
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json()["error"]["type"] == "origin_not_allowed"
    # A preflight from it gets no CORS grant either.
    preflight = server.options("/api/sessions", headers={"origin": EVIL, "access-control-request-method": "POST"})
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    assert sessions(server) == [sid]
    assert server.get(f"/api/sessions/{sid}").json()["inferences"] == []


def test_a_dns_rebinding_host_reads_nothing(server: httpx.Client) -> None:
    sid = server.post("/api/sessions", json={}).json()["id"]
    port = httpx.URL(str(server.base_url)).port
    for path in ["/api/sessions", f"/api/sessions/{sid}", f"/api/sessions/{sid}/events", "/api/info", "/"]:
        refused = server.get(path, headers={"host": f"attacker.example:{port}"})
        assert refused.status_code == 421, (path, refused.text)
        assert refused.json()["error"]["type"] == "host_not_allowed"
        assert "--allowed-host attacker.example" in refused.json()["error"]["message"]
        assert sid not in refused.text
    # The loopback names, with or without a port, are the server's own.
    for host in ["localhost", f"localhost:{port}", "127.0.0.1", f"127.0.0.1:{port}", "[::1]", f"[::1]:{port}"]:
        assert server.get("/api/sessions", headers={"host": host}).status_code == 200, host
    # A liveness probe addresses a worker by its IP: /healthz answers any Host.
    assert server.get("/healthz", headers={"host": "10.1.2.3:8000"}).status_code == 200


def test_the_same_requests_pass_when_the_deployment_allows_them(geppetto_sim: Simulator, tmp_path: Path) -> None:
    with (
        serve(geppetto_sim, tmp_path, allowed_hosts=["chat.example"], allowed_origins=[APP]) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        port = httpx.URL(url).port
        assert client.get("/api/sessions", headers={"host": f"chat.example:{port}"}).status_code == 200
        assert client.get("/api/sessions", headers={"host": "chat.example"}).status_code == 200
        assert client.get("/api/sessions", headers={"host": "other.example"}).status_code == 421

        preflight = client.options(
            "/api/sessions",
            headers={
                "origin": APP,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, authorization",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == APP
        assert preflight.headers["access-control-allow-headers"] == "content-type, authorization"
        assert "POST" in preflight.headers["access-control-allow-methods"]

        made = client.post("/api/sessions", json={"id": "s1"}, headers={"origin": APP})
        assert made.status_code == 201 and made.headers["access-control-allow-origin"] == APP
        assert "Origin" in made.headers["vary"]
        started = client.post("/api/sessions/s1/messages", json={"text": "Hello"}, headers={"origin": APP})
        assert started.status_code == 202 and started.headers["access-control-allow-origin"] == APP
        with client.stream(
            "GET",
            "/api/sessions/s1/events",
            params={"after": started.json()["after"], "until": "finished"},
            headers={"origin": APP},
        ) as response:
            assert response.headers["access-control-allow-origin"] == APP
            assert list(sse_events(response.iter_lines()))[-1]["data"]["status"] == "completed"
        # The allowed origin still sends JSON as JSON.
        plain = client.post(
            "/api/sessions", content='{"id": "s2"}', headers={"content-type": "text/plain", "origin": APP}
        )
        assert plain.status_code == 415 and plain.headers["access-control-allow-origin"] == APP
        # Same-origin requests (the bundled web page) need no configuration, and get no CORS headers.
        own = client.post("/api/sessions", json={"id": "s3"}, headers={"origin": url})
        assert own.status_code == 201 and "access-control-allow-origin" not in own.headers
        assert client.post("/api/sessions", json={}, headers={"origin": EVIL}).status_code == 403


def test_no_cors_headers_unless_origins_are_configured(server: httpx.Client) -> None:
    own = str(server.base_url).rstrip("/")
    for origin in [own, EVIL]:
        answer = server.get("/api/sessions", headers={"origin": origin})
        assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers
    assert server.post("/api/sessions", json={"id": "same"}, headers={"origin": own}).status_code == 201
    # Same origin means the same port too: another local server's page is another site.
    other_port = own.rsplit(":", 1)[0] + ":1"
    assert server.post("/api/sessions", json={}, headers={"origin": other_port}).status_code == 403
    assert server.post("/api/sessions", json={}, headers={"origin": "null"}).status_code == 403


def test_serve_takes_allowed_hosts_and_origins_from_flags_and_the_environment(geppetto_sim: Simulator) -> None:
    write_sim_profile(geppetto_sim)
    worker = Worker(
        "--profile",
        "simtest",
        "--allowed-host",
        "chat.example",
        "--allowed-origin",
        APP,
        env={"GEPPETTO_SERVER_ALLOWED_HOSTS": "ignored.example", "GEPPETTO_SERVER_ALLOWED_ORIGINS": EVIL},
    )
    try:
        assert httpx.get(worker.url + "/api/info", headers={"host": "chat.example"}).status_code == 200
        assert httpx.get(worker.url + "/api/info", headers={"host": "ignored.example"}).status_code == 421
        assert httpx.post(worker.url + "/api/sessions", json={}, headers={"origin": APP}).status_code == 201
        assert httpx.post(worker.url + "/api/sessions", json={}, headers={"origin": EVIL}).status_code == 403
    finally:
        worker.stop()
    worker = Worker("--profile", "simtest", env={"GEPPETTO_SERVER_ALLOWED_HOSTS": "a.example b.example"})
    try:
        for host in ("a.example", "b.example"):
            assert httpx.get(worker.url + "/api/info", headers={"host": host}).status_code == 200
        assert httpx.get(worker.url + "/api/info", headers={"host": "c.example"}).status_code == 421
    finally:
        worker.stop()


# -- what reaches clients and the log ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("redis://:secret@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
        ("nats://u:secret@127.0.0.1:4222", "nats://u:***@127.0.0.1:4222"),
        ("nats://s3cr3ttoken@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
        ("redis://:p@ss@host:6379/0", "redis://:***@host:6379/0"),
        ("postgresql://u:secret@db.example/geppetto", "postgresql://u:***@db.example/geppetto"),
        ("host=db user=u password=secret dbname=x", "host=db user=u password=*** dbname=x"),
        (
            "postgresql://app@db:5432/g?password=secret&sslmode=require",
            "postgresql://app@db:5432/g?password=***&sslmode=require",
        ),
        (
            "the Redis event bus rediss://default:secret@cache:6380/0 failed: timeout; check that Redis runs there",
            "the Redis event bus rediss://default:***@cache:6380/0 failed: timeout; check that Redis runs there",
        ),
        ("http://127.0.0.1:8000/api/x?a=b@c", "http://127.0.0.1:8000/api/x?a=b@c"),
        ("postgresql://app@db:5432/geppetto", "postgresql://app@db:5432/geppetto"),
    ],
)
def test_redact_url_hides_every_credential_form(text: str, shown: str) -> None:
    assert redact_url(text) == shown
    assert redact_url(shown) == shown


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["redis", "nats"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A broker of its own on a free loopback port that wants a password: (bus URL with it, process)."""
    port = _free_port()
    if request.param == "redis":
        binary = shutil.which("redis-server")
        command = ["--port", str(port), "--requirepass", "secret", "--save", "", "--appendonly", "no"]
        url = f"redis://:secret@127.0.0.1:{port}/0"
    else:
        binary = shutil.which("nats-server") or shutil.which("nats-server", path="/usr/sbin")
        command = ["-js", "-a", "127.0.0.1", "-p", str(port), "--user", "u", "--pass", "secret", "-sd", str(tmp_path)]
        url = f"nats://u:secret@127.0.0.1:{port}"
    if binary is None:
        pytest.skip(f"{request.param} is not installed (its server binary is not on PATH); install it to run this test")
    proc = subprocess.Popen([binary, *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{request.param} did not listen on {port} within 10 s")
            time.sleep(0.05)
    yield url, proc
    proc.kill()
    proc.wait()


def test_a_broker_password_never_reaches_clients_or_the_log(
    broker: tuple[str, subprocess.Popen[bytes]],
    geppetto_sim: Simulator,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, process = broker
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    with serve(geppetto_sim, tmp_path, bus=url) as base, httpx.Client(base_url=base, timeout=60) as client:
        assert client.post("/api/sessions", json={"id": "s"}).status_code == 201
        process.kill()  # the broker goes away
        process.wait()
        answers = [
            client.post("/api/sessions/s/messages", json={"text": "Hello"}),
            client.post("/api/chat", json=CHAT),
        ]
        for answer in answers:
            seen.append(answer.text)
            assert answer.status_code >= 400, answer.text
            assert "***@127.0.0.1" in answer.json()["error"]["message"]
        # AG-UI has sent RUN_STARTED before the run could begin: the failure is its RUN_ERROR event.
        agui = client.post("/ag-ui", json=RUN)
        seen.append(agui.text)
        assert agui.status_code == 200 and '"RUN_ERROR"' in agui.text and "***@127.0.0.1" in agui.text
        with client.stream("GET", "/api/sessions/s/events") as response:
            events = list(sse_events(response.iter_lines()))
            seen.append(str(events))
        assert events and events[-1]["event"] == "error" and "***" in events[-1]["data"]["message"]
    logged = caplog.text + "".join(capfd.readouterr())
    assert "secret" not in "".join(seen)
    assert "secret" not in logged
    assert "***@127.0.0.1" in logged  # the log says which broker failed, without its password


def test_an_existing_session_id_is_409_without_the_store_path(
    server: httpx.Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="geppetto.server")
    assert server.post("/api/sessions", json={"id": "mine"}).status_code == 201
    again = server.post("/api/sessions", json={"id": "mine"})
    assert again.status_code == 409
    assert again.json()["error"] == {
        "message": "session 'mine' already exists in the server's session store; pick another id",
        "type": "conflict",
    }
    assert str(tmp_path) not in again.text
    assert str(tmp_path / "s.db") in caplog.text  # the server's log keeps the detail


# -- text the stores cannot hold --------------------------------------------------------------------


@pytest.mark.parametrize(("bad", "what"), [("\ud800", "lone surrogate"), ("\x00", "NUL character")])
def test_nul_and_lone_surrogates_are_422_naming_the_field(server: httpx.Client, bad: str, what: str) -> None:
    sid = server.post("/api/sessions", json={"id": "ok"}).json()["id"]
    bad_chat = {**CHAT, "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": f"a{bad}"}]}]}
    for path, body, field in [
        ("/api/sessions", {"id": f"x{bad}"}, "id"),
        ("/api/sessions", {"system": f"be{bad}"}, "system"),
        (f"/api/sessions/{sid}/messages", {"text": f"hi{bad}"}, "text"),
        ("/api/chat", {**CHAT, "id": f"c{bad}"}, "id"),
        ("/api/chat", bad_chat, "messages[0].parts[0].text"),
        ("/ag-ui", {**RUN, "threadId": f"t{bad}"}, "threadId"),
        ("/ag-ui", {**RUN, "messages": [{"id": "m1", "role": "user", "content": f"x{bad}"}]}, "messages[0].content"),
    ]:
        # json.dumps writes them as \u escapes, as a client's JSON encoder does.
        answer = server.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
        assert answer.status_code == 422, (path, field, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "invalid_text"
        assert error["message"].startswith(f"{field!r} holds a {what}"), error["message"]
    for path in ["/api/sessions/a%00b", "/api/sessions/a%00b/events", "/api/sessions/a%00b/inspect"]:
        answer = server.get(path)
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["error"]["message"].startswith("'session_id' holds a NUL character")
    answer = server.get(f"/api/sessions/{sid}/events", params={"after": "1\x00"})
    assert answer.status_code == 422 and answer.json()["error"]["message"].startswith("'after' holds a NUL")
    assert sessions(server) == [sid]
    assert server.get(f"/api/sessions/{sid}").json()["inferences"] == []


# -- the API document and the server agree ------------------------------------------------------------


def test_a_405_says_which_methods_the_path_takes(server: httpx.Client) -> None:
    for method, path, allow in [
        ("PUT", "/api/sessions", "GET, HEAD, POST"),
        ("PATCH", "/api/sessions/s1", "DELETE, GET, HEAD"),
        ("GET", "/api/sessions/s1/messages", "POST"),
        ("DELETE", "/api/chat", "POST"),
        ("OPTIONS", "/ag-ui", "POST"),
    ]:
        answer = server.request(method, path)
        assert answer.status_code == 405, (method, path)
        assert answer.headers["allow"] == allow
        assert answer.json()["error"] == {
            "message": f"{method} is not allowed on {path} (it takes {allow}); see /openapi.json",
            "type": "bad_method",
        }


def test_the_document_requires_a_key_only_when_the_server_does(
    server: httpx.Client, geppetto_sim: Simulator, tmp_path: Path
) -> None:
    assert server.get("/openapi.json").json()["security"] == []
    with serve(geppetto_sim, tmp_path / "keyed", api_key="k") as url:
        assert httpx.get(url + "/openapi.json").json()["security"] == [{"bearer": []}]


def _valid(schema: dict[str, Any], value: Any) -> bool:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema).is_valid(value)


def test_request_schemas_refuse_what_the_server_refuses(server: httpx.Client) -> None:
    """The cases schemathesis found looser in the document than in the server, each sent to both."""
    document = server.get("/openapi.json").json()
    paths = document["paths"]

    def body_schema(path: str) -> dict[str, Any]:
        return dict(paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"])

    sid = server.post("/api/sessions", json={"id": "s1"}).json()["id"]
    session = body_schema("/api/sessions")
    message = body_schema("/api/sessions/{session_id}/messages")
    chat, run = body_schema("/api/chat"), body_schema("/ag-ui")
    user = {"id": "m", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
    cases: list[tuple[str, dict[str, Any], Any, int]] = [
        ("/api/sessions", session, {"id": ""}, 422),
        ("/api/sessions", session, {"id": "   "}, 422),
        ("/api/sessions", session, {"id": "x" * 201}, 422),
        ("/api/sessions", session, {"id": "a\x00"}, 422),
        ("/api/sessions", session, {"system": "a\x00"}, 422),
        ("/api/sessions", session, {"id": "fine", "system": "", "model": ""}, 201),
        (f"/api/sessions/{sid}/messages", message, {"text": ""}, 422),
        (f"/api/sessions/{sid}/messages", message, {"text": "  "}, 422),
        (f"/api/sessions/{sid}/messages", message, {"text": "hi", "extra": 1}, 422),
        (f"/api/sessions/{sid}/messages", message, {"text": "hi\x00"}, 422),
        ("/api/chat", chat, {"id": "", "messages": [user]}, 422),
        ("/api/chat", chat, {"id": "c", "messages": []}, 422),
        ("/api/chat", chat, {"id": "c", "messages": [{**user, "parts": []}]}, 422),
        ("/api/chat", chat, {"id": "c", "messages": [user, {"role": "user", "parts": []}]}, 422),
        ("/api/chat", chat, {"id": "c", "messages": [user], "trigger": "submit-message", "x": "\x00"}, 200),
        ("/ag-ui", run, {**RUN, "threadId": " "}, 422),
        ("/ag-ui", run, {**RUN, "messages": [{"id": "m", "role": "user", "content": ""}]}, 422),
        ("/ag-ui", run, {**RUN, "messages": [{"id": "m", "role": "assistant", "content": "x"}]}, 422),
        ("/ag-ui", run, {**RUN, "messages": [{"id": "d", "role": "developer"}, *RUN["messages"]]}, 422),
        ("/ag-ui", run, {**RUN, "threadId": "t2", "context": None, "tools": None, "state": {"x": "\x00"}}, 200),
    ]
    for path, schema, body, status in cases:
        answer = server.post(path, json=body)
        assert answer.status_code == status, (path, body, answer.text)
        assert _valid(schema, body) == (status < 400), (path, body)


def test_serve_allows_the_address_it_listens_on_unless_it_is_every_address() -> None:
    from geppetto.server._serve import ServeOptions, allowed_hosts

    assert allowed_hosts(ServeOptions(host="192.0.2.7", allowed_hosts=["chat.example"])) == [
        "192.0.2.7",
        "chat.example",
    ]
    assert allowed_hosts(ServeOptions(host="0.0.0.0", allowed_hosts=["chat.example"])) == ["chat.example"]
    assert allowed_hosts(ServeOptions(host="::")) == []
