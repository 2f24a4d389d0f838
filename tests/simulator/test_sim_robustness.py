"""Bad input never yields a 5xx, and 200 concurrent streams complete."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geppetto.simulator import Simulator, serve

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "model",
                    "input",
                    "messages",
                    "role",
                    "content",
                    "type",
                    "id",
                    "call_id",
                    "parts",
                    "contents",
                    "items",
                    "tools",
                    "max_tokens",
                    "metadata",
                    "text",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
ENDPOINTS = [
    ("/v1/responses", {"authorization": "Bearer k"}),
    ("/v1/chat/completions", {"authorization": "Bearer k"}),
    ("/v1/conversations", {"authorization": "Bearer k"}),
    ("/v1/messages", {"x-api-key": "k"}),
    ("/v1beta/models/g:generateContent", {"x-goog-api-key": "k"}),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=JSON, which=st.integers(0, len(ENDPOINTS) - 1))
def test_random_bodies_get_4xx_or_200(oai: httpx.Client, body: Any, which: int) -> None:
    path, headers = ENDPOINTS[which]
    r = oai.post(oai.base_url.join(path), json=body, headers={"authorization": "", **headers})
    assert r.status_code < 500, (path, body, r.text)
    if r.status_code >= 400:
        assert "error" in r.json()


def test_bad_json_unknown_ids_and_oversize(oai: httpx.Client) -> None:
    r = oai.post("/responses", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("We could not parse the JSON body")
    r = oai.post("/responses", json=[1, 2])
    assert r.json()["error"]["message"] == "The request body must be a JSON object."
    r = oai.post("/responses", json={"model": "m", "input": 7})
    assert (r.status_code, r.json()["error"]["param"]) == (400, "input")
    assert oai.get("/responses/resp_unknown").json() == {
        "error": {
            "message": "Response with id 'resp_unknown' not found.",
            "type": "invalid_request_error",
            "param": "response_id",
            "code": None,
        }
    }
    assert oai.get("/nothing/here").status_code == 404
    with serve(max_body=1000) as small:
        r = httpx.post(
            small.openai_url + "/responses",
            json={"model": "m", "input": "x" * 2000},
            headers={"authorization": "Bearer k"},
        )
        assert r.status_code == 413 and "limit is 1000 bytes" in r.json()["error"]["message"]
    r = httpx.post(oai.base_url.join("/v1/responses"), json={"model": "m", "input": "x"})
    assert r.status_code == 401


async def test_200_concurrent_streams(geppetto_sim: Simulator) -> None:
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(
        base_url=geppetto_sim.openai_url, headers={"authorization": "Bearer k"}, limits=limits, timeout=30
    ) as client:

        async def one(i: int) -> str:
            async with client.stream("POST", "/responses", json={"model": "m", "input": f"n{i}", "stream": True}) as r:
                body = (await r.aread()).decode()
            return body.strip().split("\n\n")[-1].split("\n")[0]

        finals = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), timeout=60)
    assert finals == ["event: response.completed"] * 200
