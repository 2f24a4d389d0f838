"""The rules that judge one stateful answer without an exact echo (``_evidence``), figure by figure."""

from __future__ import annotations

from typing import Any

import pytest

from geppetto.providers.openai_responses._evidence import (
    ITEM_PAD,
    MAX_AGE,
    Endpoint,
    EndpointMemory,
    Sent,
    Verdict,
    fresh,
    judge,
    judge_count,
    judge_stored,
    lost_calls,
    settle,
    token_bound,
)

PREV = "resp_anchor"


def _sent(**kw: Any) -> Sent:
    base: dict[str, Any] = {
        "previous_response_id": PREV,
        "bound": 60,
        "delta_bound": 20,
        "anchor": PREV,
        "anchor_input": 100,
        "anchor_output": 30,
        "items": 1,
    }
    return Sent(**{**base, **kw})


def _answer(tokens: int | None, echo: Any = "missing", cached: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"id": "resp_new"}
    if echo != "missing":
        out["previous_response_id"] = echo
    if tokens is not None:
        out["usage"] = {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": cached}}
    return out


def test_an_exact_echo_is_proof_whatever_the_usage() -> None:
    verdict = judge(_sent(), _answer(1, echo=PREV))
    assert (verdict.previous_response_id, verdict.echo, verdict.evidence) == ("kept", True, "echo")


@pytest.mark.parametrize("echo", ["missing", None, "resp_upstream"])
def test_more_tokens_than_the_request_holds_show_the_stored_context_was_read(echo: Any) -> None:
    verdict = judge(_sent(anchor_input=None), _answer(61, echo=echo))
    assert (verdict.previous_response_id, verdict.evidence) == ("kept", "usage")
    assert "more than the 60 this request can hold" in verdict.detail


def test_the_anchors_input_plus_the_delta_shows_it_too() -> None:
    # 120 is within what the request alone could hold (bound 200), but it is the anchor's 100 plus the
    # at most 20 of the new input: only a server that read the anchor's context counts that many
    verdict = judge(_sent(bound=200), _answer(120))
    assert verdict.kept and verdict.evidence == "usage"
    assert "at least the 100 anchor resp_anchor read plus the 20" in verdict.detail


def test_fewer_tokens_than_the_anchor_alone_read_show_it_was_not_used() -> None:
    verdict = judge(_sent(bound=200), _answer(40, echo=None))
    assert verdict.ignored and verdict.evidence == "usage"
    assert verdict.detail == "a null echo; 40 input tokens, fewer than the 100 anchor resp_anchor alone read"


def test_cached_tokens_counted_apart_are_not_taken_for_forgetting() -> None:
    # a server that reports cached tokens apart from input_tokens read 40 + 70 = 110 >= 100
    verdict = judge(_sent(bound=200), _answer(40, cached=70))
    assert verdict.previous_response_id == "unknown"


def test_a_context_the_server_may_shrink_never_shows_forgetting() -> None:
    assert judge(_sent(bound=200, shrinks=True), _answer(40)).previous_response_id == "unknown"


@pytest.mark.parametrize(
    ("sent", "answer", "why"),
    [
        (
            _sent(bound=200),
            _answer(110),
            "110 input tokens (this request holds at most 200, anchor resp_anchor read 100)",
        ),
        (_sent(bound=200, anchor_input=None), _answer(110), "110 input tokens (this request holds at most 200)"),
        (_sent(), _answer(None), "no echo and no usage"),
        (_sent(), {"usage": {"input_tokens": 0}}, "no echo and no usage"),
    ],
)
def test_anything_in_between_is_unknown_never_ignored(sent: Sent, answer: dict[str, Any], why: str) -> None:
    verdict = judge(sent, answer)
    assert verdict.previous_response_id == "unknown" and why in verdict.detail


def test_the_servers_count_of_the_request_alone_settles_it() -> None:
    sent = _sent(anchor_output=30)
    assert judge_count(sent, _answer(150), 100).kept  # 50 more: at least half the anchor's 30 output
    assert judge_count(sent, _answer(100), 100).ignored  # exactly what the request alone counts
    assert judge_count(sent, _answer(110), 100).previous_response_id == "unknown"  # 10 < 15: too close
    assert judge_count(sent, _answer(None), 100).previous_response_id == "unknown"
    assert judge_count(_sent(shrinks=True), _answer(90), 100).previous_response_id == "unknown"


def test_the_stored_response_read_back_settles_it_when_it_says_something() -> None:
    sent = _sent()
    echo = judge_stored(sent, {"previous_response_id": PREV})
    assert echo.kept and echo.evidence == "response_get" and echo.detail.startswith("read back: ")
    held = judge_stored(sent, {"previous_response_id": None, "input": [{}, {}, {}]})
    assert held.kept and "holds 3 input items; 1 were sent" in held.detail
    assert judge_stored(sent, {"previous_response_id": None, "input": [{}]}).previous_response_id == "unknown"


def test_the_token_bound_is_the_text_bytes_plus_a_pad_per_item() -> None:
    item = {"type": "message", "role": "user", "id": "msg_1", "content": [{"type": "input_text", "text": "héllo"}]}
    assert token_bound([item]) == ITEM_PAD + len("héllo".encode())
    call = {"type": "function_call_output", "call_id": "call_123", "output": '{"t": 1}'}
    assert token_bound([item, call]) == 2 * ITEM_PAD + 6 + 8


def test_a_refused_tool_result_shows_a_server_that_forgot_its_call() -> None:
    items = [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]
    verdict = lost_calls(items, 400, "No tool call found for function call output with call_id call_9.")
    assert verdict is not None and verdict.ignored and verdict.evidence == "error"
    chat = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
    assert lost_calls(items, 400, chat) is not None
    assert lost_calls(items, 400, "Invalid value for 'temperature'") is None
    assert lost_calls(items, 500, "No tool call found for call_9") is None
    assert lost_calls([{"type": "message", "content": "hi"}], 400, "No tool call found") is None


class _Api:
    def __init__(self, answer: Any = None, fail: Exception | None = None) -> None:
        self.answer, self.fail, self.calls = answer, fail, []  # type: ignore[var-annotated]

    async def post(self, path: str, body: Any) -> Any:
        self.calls.append(("POST", path, body))
        if self.fail:
            raise self.fail
        return self.answer

    async def get(self, path: str, params: Any = None) -> Any:
        self.calls.append(("GET", path, None))
        if self.fail:
            raise self.fail
        return self.answer


async def test_settling_asks_for_the_count_with_usage_and_reads_back_without() -> None:
    api = _Api({"object": "response.input_tokens", "input_tokens": 100})
    verdict = await settle(api, _sent(), _answer(100), {"model": "m", "input": []})
    assert verdict.ignored and api.calls == [("POST", "responses/input_tokens", {"model": "m", "input": []})]
    api = _Api({"previous_response_id": PREV})
    verdict = await settle(api, _sent(), _answer(None), {})
    assert verdict.kept and api.calls == [("GET", "responses/resp_new", None)]


async def test_a_server_without_the_route_leaves_it_unknown() -> None:
    import geppetto as gp

    api = _Api(fail=gp.NotFoundError("Not Found", provider="openai", status=404))
    verdict = await settle(api, _sent(), _answer(100), {})
    assert verdict.previous_response_id == "unknown" and verdict.evidence == "input_tokens"
    assert "POST /responses/input_tokens failed: " in verdict.detail
    assert (await settle(_Api({"nothing": 1}), _sent(), _answer(100), {})).previous_response_id == "unknown"


class _Store:
    def __init__(self, fail: bool = False) -> None:
        self.saved: dict[tuple[str, str], dict[str, Any]] = {}
        self.reads = 0
        self.fail = fail

    async def load_endpoint_verdict(self, base_url: str, model: str) -> dict[str, Any] | None:
        self.reads += 1
        if self.fail:
            raise OSError("disk gone")
        return self.saved.get((base_url, model))

    async def save_endpoint_verdict(self, base_url: str, model: str, verdict: dict[str, Any]) -> None:
        if self.fail:
            raise OSError("disk gone")
        self.saved[(base_url, model)] = verdict


async def test_an_endpoint_remembers_in_memory_and_store_and_reads_the_store_once() -> None:
    store, memory = _Store(), EndpointMemory()
    ep = Endpoint("http://h/v1/", "m", memory=memory, store=store)
    assert ep.pending and await ep.load() is None and store.reads == 1 and not ep.pending
    await ep.learn(Verdict("kept", evidence="usage", detail="a"))
    await ep.learn(Verdict("kept", evidence="usage", detail="b"))  # says the same: not written again
    assert store.saved[("http://h/v1", "m")]["detail"] == "a"
    other = Endpoint("http://h/v1", "m", memory=EndpointMemory(), store=store)
    loaded = await other.load()
    assert loaded is not None and loaded.kept and loaded.detail == "a"


async def test_an_old_verdict_in_the_store_is_learned_again_and_a_failing_store_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = Verdict("ignored", evidence="usage", learned_at=1.0)
    assert fresh(old) is None and fresh(Verdict("kept", learned_at=MAX_AGE * 2), now=MAX_AGE * 2.5) is not None
    store = _Store()
    store.saved[("http://h/v1", "m")] = old.to_dict()
    assert await Endpoint("http://h/v1", "m", memory=EndpointMemory(), store=store).load() is None
    broken = Endpoint("http://h/v1", "m", memory=EndpointMemory(), store=_Store(fail=True))
    assert await broken.load() is None
    await broken.learn(Verdict("kept", evidence="usage"))
    assert broken.current() is not None and "could not save the verdict" in caplog.text
    assert "could not read the verdict" in caplog.text


def test_a_refused_previous_response_id_parameter_shows_a_server_that_does_not_chain() -> None:
    from geppetto.providers.openai_responses._evidence import refused_state

    verdict = refused_state(400, None, "Unrecognized request argument supplied: previous_response_id")
    assert verdict is not None and verdict.previous_response_id == "rejected" and verdict.ignored
    assert refused_state(400, "previous_response_id", "Extra inputs are not permitted") is not None
    assert refused_state(400, "previous_response_id", "Previous response with id 'r' not found.") is None
    assert refused_state(400, "temperature", "Unsupported value: temperature") is None
    assert refused_state(422, "previous_response_id", "unsupported") is None


async def test_an_engine_whose_chained_request_is_refused_for_the_parameter_goes_stateless() -> None:
    import json

    import httpx

    import geppetto as gp
    from geppetto.providers._http import HttpTransport
    from geppetto.providers._retry import RetryPolicy
    from geppetto.providers.openai_responses import ResponsesEngine, ResponsesMetrics

    def sse(rid: str, text: str) -> httpx.Response:
        message = {"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed"}
        message["content"] = [{"type": "output_text", "text": text, "annotations": []}]
        done = {"id": rid, "object": "response", "status": "completed", "output": [message]}
        events = [{"type": "response.created", "response": {**done, "status": "in_progress", "output": []}}]
        events.append({"type": "response.completed", "response": done})
        body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    bodies: list[dict[str, Any]] = []
    refusal = {"error": {"message": "Unrecognized request argument supplied: previous_response_id", "type": "x"}}
    answers = [lambda: sse("r1", "One."), lambda: httpx.Response(400, json=refusal), lambda: sse("r2", "Two.")]

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return answers[len(bodies) - 1]()

    http = HttpTransport("http://t/v1", provider="openai", transport=httpx.MockTransport(handler), retry=RetryPolicy(0))
    metrics = ResponsesMetrics()
    eng = ResponsesEngine("gpt-4.1", api_key="k", http=http, metrics=metrics)
    turn = await eng.run_inference(gp.Turn(blocks=[gp.Block.user("hi")]))
    turn.append(gp.Block.user("more"))
    turn = await eng.run_inference(turn)
    assert [("previous_response_id" in b, len(b["input"])) for b in bodies] == [(False, 1), (True, 1), (False, 3)]
    assert turn.blocks[-1].text == "Two." and metrics.counters["fallback:server_ignores_state"] == 1
    assert eng.server_ignores_state and eng.endpoint_verdict is not None
    assert eng.endpoint_verdict.previous_response_id == "rejected" and eng.endpoint_verdict.evidence == "error"
