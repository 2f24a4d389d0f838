"""Property: whatever a client does with Gemini interactions (continue any stored one, send the whole
history without storing, answer function calls, delete or let interactions expire), the simulator's
history of each stored interaction equals the client's own record of that conversation."""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geppetto.simulator import Simulator
from interactions_types import validate_interaction, validate_request

MODEL = "gemini-3-flash-preview"  # a thinking model: its signed thoughts must come back intact
TOOL = {
    "type": "function",
    "name": "lookup",
    "description": "Look up a word",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
}

# One client action: (kind, which earlier interaction, text). Kinds: "new" starts a conversation,
# "next" continues a stored interaction by id, "replay" sends a conversation's whole history with
# store false, "drop" deletes a stored interaction, "expire" forgets one.
ACTION = st.tuples(
    st.sampled_from(["new", "next", "next", "replay", "drop", "expire"]),
    st.integers(0, 50),
    st.sampled_from(["hello", "lookup the word cat", "thanks", "lookup the word dog"]),
)


def _user(text: str) -> dict[str, Any]:
    return {"type": "user_input", "content": [{"type": "text", "text": text}]}


def _post(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    validate_request(body)
    return client.post("/v1beta/interactions", json=body)


def _answer_calls(client: httpx.Client, iid: str, history: list[dict[str, Any]], answer: dict[str, Any]) -> str:
    """Answer function calls by continuing the interaction until it completes; the last interaction id."""
    while answer["status"] == "requires_action":
        results = [
            {"type": "function_result", "call_id": s["id"], "name": s["name"], "result": "a word"}
            for s in answer["steps"]
            if s["type"] == "function_call"
        ]
        history += results
        response = _post(client, {"model": MODEL, "input": results, "tools": [TOOL], "previous_interaction_id": iid})
        assert response.status_code == 200, response.text
        answer = response.json()
        validate_interaction(answer)
        history += answer["steps"]
        iid = answer["id"]
    return iid


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(ACTION, min_size=1, max_size=12))
def test_the_server_history_equals_the_clients(geppetto_sim: Simulator, actions: list[tuple[str, int, str]]) -> None:
    geppetto_sim.reset()
    stored: dict[str, list[dict[str, Any]]] = {}  # interaction id -> the history the client believes it holds
    with httpx.Client(base_url=geppetto_sim.url, headers={"x-goog-api-key": "k"}, timeout=10) as client:
        for kind, pick, text in actions:
            ids = sorted(stored)
            target = ids[pick % len(ids)] if ids else None
            if kind in ("drop", "expire") and target is not None:
                if kind == "drop":
                    assert client.delete(f"/v1beta/interactions/{target}").status_code == 200
                else:
                    geppetto_sim.forget(target)
                del stored[target]
                continue
            history = list(stored[target]) if target is not None and kind != "new" else []
            body: dict[str, Any] = {"model": MODEL, "input": text, "tools": [TOOL]}
            if kind == "next" and target is not None:
                body["previous_interaction_id"] = target
            elif kind == "replay":
                body.update(input=[*history, _user(text)], store=False)
            response = _post(client, body)
            assert response.status_code == 200, response.text
            answer = response.json()
            history += [_user(text), *answer["steps"]]
            if kind == "replay":
                assert geppetto_sim.context_items(answer["id"]) == history[: -len(answer["steps"])]
                continue
            stored[_answer_calls(client, answer["id"], history, answer)] = history
        for iid, history in stored.items():
            assert geppetto_sim.held_steps(iid) == history
