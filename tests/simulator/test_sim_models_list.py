"""The simulator's model lists, read by the official SDKs unchanged: OpenAI and Anthropic ``GET /v1/models``
(one path, told apart by Anthropic's header and key check) and Gemini ``GET /v1beta/models``."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from geppetto.simulator import Simulator
from geppetto.simulator._models_list import MODELS


def test_the_openai_sdk_lists_the_simulators_models(geppetto_sim: Simulator) -> None:
    client = openai.OpenAI(api_key="sk-test", base_url=geppetto_sim.openai_url, max_retries=0)
    ids = [m.id for m in client.models.list()]
    assert ids == list(MODELS["openai"]) and "sim-reasoner" in ids


def test_the_anthropic_sdk_lists_claude_models(geppetto_sim: Simulator) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=geppetto_sim.url, max_retries=0)
    assert [m.id for m in client.models.list()] == list(MODELS["anthropic"])
    keyless = httpx.get(f"{geppetto_sim.url}/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert keyless.status_code == 401 and keyless.json()["error"]["type"] == "authentication_error"


def test_the_gemini_sdk_lists_gemini_models(geppetto_sim: Simulator) -> None:
    genai = pytest.importorskip("google.genai")
    client = genai.Client(api_key="k", http_options={"base_url": geppetto_sim.url})
    names = [m.name for m in client.models.list()]
    assert names == [f"models/{m}" for m in MODELS["gemini"]]


def test_a_list_without_a_key_is_refused_as_openai_refuses_it(geppetto_sim: Simulator) -> None:
    res = httpx.get(f"{geppetto_sim.openai_url}/models")
    assert res.status_code == 401 and "API key" in res.json()["error"]["message"]
