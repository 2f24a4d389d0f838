"""Every genuine recorded answer of the real services, replayed through the matching engine.

An ``httpx.MockTransport`` answers the engine with the recorded status, headers and body (a whole JSON
answer, or the recorded Server-Sent Events; an error status must raise the matching error). The Turn it
leaves must hold everything: building the next request from it sends the answer back as the service
gave it, a trip through a store's JSON form changes nothing, and every built-in tool block was announced
by an ``EventBuiltinTool``. The ``expected_*`` functions hold the only normalizations, each a documented
rule of the engine: what a service refuses as input (Claude's blank text blocks), how a stream splits
text (Gemini's text runs), what a provider does not take back (Gemini's unsigned thought summaries,
Chat's output-only ``annotations``), ids the engine makes where a service gives none, and the Responses
pairing rules. Loaded from ``tests/fixtures/recorded``, else ``../shared/reference/recorded`` (``tests/recorded.py``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from geppetto import ProviderError
from geppetto.events import Event, EventBuiltinTool, EventCitations, with_sinks
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.providers.openai_responses._items import REPLAYABLE_ITEM_TYPES, blocks_to_items
from geppetto.turns import (
    PAYLOAD_CITATIONS,
    Block,
    BlockKind,
    Turn,
    builtin_of,
    citation_sources,
    turn_from_dict,
    turn_to_dict,
)
from recorded import MISSING, ROOT, Exchange, exchanges

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)


def _of(api: str) -> list[Exchange]:
    return [e for e in exchanges() if e.api == api] if ROOT.is_dir() else []


def _client(exchange: Exchange, seen: list[httpx.Request]) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(exchange.status, headers=exchange.headers, content=exchange.body_bytes)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


def _turn() -> Turn:
    return Turn(blocks=[Block.user("go on")])


async def _run(engine: Any) -> tuple[Turn, list[Event]]:
    """Run ``engine`` on a one-question Turn; the Turn and the events it published."""
    events: list[Event] = []
    with with_sinks(events.append):
        turn = await engine.run_inference(_turn())
    return turn, events


def _stored(turn: Turn) -> Turn:
    """``turn`` after a trip through a store's JSON form."""
    return turn_from_dict(json.loads(json.dumps(turn_to_dict(turn))))


def _check_builtin(turn: Turn, events: list[Event]) -> None:
    """Each built-in tool block of the Turn was announced by one event, in order, and what its text cites by
    one ``citations`` event (none when it cites nothing)."""
    announced = [(e.call_id, e.tool, e.phase) for e in events if isinstance(e, EventBuiltinTool)]
    typed = [builtin_of(b) for b in turn.blocks]
    assert announced == [(t["call_id"], t["tool"], t["phase"]) for t in typed if t is not None]
    cited = [
        c
        for b in turn.blocks
        if b.kind in (BlockKind.LLM_TEXT, BlockKind.OTHER)
        for c in citation_sources(b.payload.get(PAYLOAD_CITATIONS))
    ]
    assert [e.citations for e in events if isinstance(e, EventCitations)] == ([cited] if cited else [])


# -- Claude ------------------------------------------------------------------------------------------


def expected_claude(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content as it goes back: Claude refuses blank text blocks, so those are left out; a ``null`` or
    empty ``citations`` says nothing."""
    out = []
    for block in content:
        if block.get("type") == "text":
            if not str(block.get("text") or "").strip():
                continue
            block = {k: v for k, v in block.items() if not (k == "citations" and not v)}
        out.append(block)
    return out


@pytest.mark.parametrize("exchange", _of("anthropic"), ids=lambda e: e.name)
async def test_claude_replays_the_recorded_answer_exactly(exchange: Exchange) -> None:
    seen: list[httpx.Request] = []
    body = exchange.body
    engine = ClaudeEngine(  # no cache breakpoints: they mark the request, not the content replayed
        str(body.get("model") or "claude"),
        api_key="k",
        http=_client(exchange, seen),
        stream=bool(body.get("stream")),
        prompt_cache=False,
    )
    turn, events = await _run(engine)
    assert json.loads(seen[0].content)["stream"] is bool(body.get("stream"))
    _check_builtin(turn, events)
    recorded = _claude_streamed_content(exchange) if exchange.streamed else exchange.response["parsed_body"]["content"]
    assert len(turn.blocks) == 1 + len(recorded)  # one block per content block, nothing dropped
    messages = engine.build_request(turn)["messages"]
    replayed = messages[-1]["content"] if messages[-1]["role"] == "assistant" else []
    assert replayed == expected_claude(recorded)
    assert engine.build_request(_stored(turn)) == engine.build_request(turn)


def _claude_streamed_content(exchange: Exchange) -> list[dict[str, Any]]:
    """The content blocks a recorded stream carried, assembled independently of the engine."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for line in str(exchange.response["body"]["string"]).splitlines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        index = event.get("index")
        if event["type"] == "content_block_start":
            blocks[index] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[index]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[index] = partial.get(index, "") + delta["partial_json"]
            elif delta["type"] == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
    for index, raw in partial.items():
        blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
    return [blocks[i] for i in sorted(blocks)]


# -- Gemini ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exchange", _of("gemini"), ids=lambda e: e.name)
async def test_gemini_replays_the_recorded_answer_exactly(exchange: Exchange) -> None:
    seen: list[httpx.Request] = []
    model = exchange.request["uri"].split("/models/", 1)[1].split(":", 1)[0]
    engine = GeminiEngine(model, api_key="k", http=_client(exchange, seen), stream=exchange.streamed)
    turn, events = await _run(engine)
    _check_builtin(turn, events)
    assert seen[0].url.path.endswith(":streamGenerateContent" if exchange.streamed else ":generateContent")
    contents = engine.build_request(turn)["contents"]
    replayed = contents[-1]["parts"] if contents[-1]["role"] == "model" else []
    parts = _gemini_parts(exchange)
    expected = expected_gemini(parts)
    for sent, came in zip(replayed, expected, strict=False):
        if "functionCall" in came and "id" not in came["functionCall"]:
            # Gemini before 3 names no call id: the engine makes one (the service takes client ids back).
            came["functionCall"] = {**came["functionCall"], "id": sent.get("functionCall", {}).get("id")}
            assert str(came["functionCall"]["id"]).startswith("call_")
    assert replayed == expected
    assert engine.build_request(_stored(turn)) == engine.build_request(turn)
    # Thought summaries without a signature are not sent back, but the Turn keeps them.
    thoughts = "".join(p["text"] for p in parts if p.get("thought"))
    assert "".join(b.text for b in turn.blocks if b.kind is BlockKind.REASONING) == thoughts


def _gemini_parts(exchange: Exchange) -> list[dict[str, Any]]:
    if not exchange.streamed:
        chunks = [exchange.response["parsed_body"]]
    else:
        text = str(exchange.response["body"]["string"])
        chunks = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    parts: list[dict[str, Any]] = []
    for chunk in chunks:
        for candidate in chunk.get("candidates") or []:
            parts.extend((candidate.get("content") or {}).get("parts") or [])
    return parts


def _signed_runs_only(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts without thought runs that carry no signature (Gemini takes back only signed thoughts)."""
    kept: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for part in [*parts, {}]:
        if part.get("thought") and set(part) <= {"text", "thought", "thoughtSignature"}:
            run.append(part)
            continue
        if any("thoughtSignature" in p for p in run):
            kept.extend(run)
        run = []
        if part:
            kept.append(part)
    return kept


def expected_gemini(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts as they go back: consecutive text parts of one kind (thought or not) are one run until a
    part with a signature ends it (a stream splits text anywhere, and sends the run's signature on its
    last, often empty, part); an empty text part without a signature says nothing."""
    out: list[dict[str, Any]] = []
    for part in _signed_runs_only(parts):
        textual = set(part) <= {"text", "thought", "thoughtSignature"} and "text" in part
        if textual and not part.get("text") and "thoughtSignature" not in part:
            continue
        last = out[-1] if out else None
        if (
            textual
            and last is not None
            and set(last) <= {"text", "thought"}
            and "text" in last
            and bool(last.get("thought")) == bool(part.get("thought"))
        ):
            out[-1] = {**last, **part, "text": last["text"] + part["text"]}
            continue
        out.append(dict(part))
    return out


# -- OpenAI Responses --------------------------------------------------------------------------------


@pytest.mark.parametrize("exchange", _of("responses"), ids=lambda e: e.name)
async def test_responses_replays_the_recorded_answer_exactly(exchange: Exchange) -> None:
    seen: list[httpx.Request] = []
    body = exchange.body
    engine = ResponsesEngine(
        str(body.get("model") or "gpt-5"),
        api_key="k",
        http=_client(exchange, seen),
        stream=bool(body.get("stream")),
        mode="stateless",
    )
    if exchange.status >= 400:
        with pytest.raises(ProviderError) as info:
            await engine.run_inference(_turn())
        assert info.value.status == exchange.status
        return
    turn, events = await _run(engine)
    assert json.loads(seen[0].content)["stream"] is bool(body.get("stream"))
    _check_builtin(turn, events)
    replayed = blocks_to_items(turn.blocks[1:])
    assert blocks_to_items(_stored(turn).blocks[1:]) == replayed
    stored = _responses_answer(exchange).get("store") is not False
    assert replayed == expected_responses(_responses_answer(exchange).get("output") or [], stored=stored)


def _responses_answer(exchange: Exchange) -> dict[str, Any]:
    if not exchange.streamed:
        return dict(exchange.response["parsed_body"])
    for line in str(exchange.response["body"]["string"]).splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            return dict(json.loads(line[5:])["response"])
    raise AssertionError("the recorded stream has no response.completed")


def expected_responses(output: list[dict[str, Any]], *, stored: bool) -> list[dict[str, Any]]:
    """The output items as the engine's documented rules send them back (``_items`` and ``_parts``): a
    reasoning item goes (encrypted, or by reference when the response was stored) only right before the
    item it produced, which then keeps its id; a message with more than plain text (annotations, several
    parts) goes with its id too when no reasoning came before it in a stored response, or when the
    reasoning last before it was sent; other messages go as plain assistant messages (the API refuses an
    id whose reasoning is missing); token logprobs and plaintext-only reasoning are never sent; hosted
    tool items the server completed go as they came."""
    out: list[dict[str, Any]] = []
    paired, reasoned, sent = -1, False, False
    for index, item in enumerate(output):
        kind = item.get("type")
        follower = output[index + 1] if index + 1 < len(output) else {}
        if kind == "reasoning":
            reasoned = True
            sent = bool(_produces(follower) and (item.get("encrypted_content") or stored))
            if sent:
                out.append(_reasoning(item))
                paired = index + 1
            continue
        if kind == "message":
            message = _message(item, with_id=index == paired, standalone=(stored and not reasoned) or sent)
            if message is not None:
                out.append(message)
        elif kind == "function_call" and item.get("status") != "incomplete":
            call = {k: item[k] for k in ("type", "call_id", "name", "arguments")}
            out.append({**call, "id": item["id"]} if index == paired else call)
        elif kind in REPLAYABLE_ITEM_TYPES and item.get("id"):
            out.append(item)
    return out


def _message(item: dict[str, Any], *, with_id: bool, standalone: bool) -> dict[str, Any] | None:
    parts = item["content"]
    text = "".join(p.get("text") or p.get("refusal") or "" for p in parts)
    if not text.strip():
        return None
    phase = {"phase": item["phase"]} if item.get("phase") else {}
    plain = len(parts) == 1 and parts[0].get("type") == "output_text" and not parts[0].get("annotations")
    if not with_id and not (standalone and not plain):
        return {"role": "assistant", "content": text, **phase}
    if plain:
        content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    else:
        content = [
            {**p, "annotations": p.get("annotations") or [], "logprobs": []} if p.get("type") == "output_text" else p
            for p in parts
        ]
    return {
        "type": "message",
        "id": item["id"],
        "role": "assistant",
        "status": "completed",
        "content": content,
        **phase,
    }


def _produces(item: dict[str, Any]) -> bool:
    if item.get("type") == "function_call":
        return item.get("status") != "incomplete"
    if item.get("type") == "message":
        return bool("".join(p.get("text") or "" for p in item.get("content") or []).strip())
    return item.get("type") in REPLAYABLE_ITEM_TYPES


def _reasoning(item: dict[str, Any]) -> dict[str, Any]:
    if not item.get("encrypted_content"):
        return {"type": "item_reference", "id": item["id"]}
    summary = [{"type": "summary_text", "text": s["text"]} for s in item.get("summary") or []]
    out = {"type": "reasoning", "id": item["id"], "summary": summary, "encrypted_content": item["encrypted_content"]}
    texts = [
        {"type": "reasoning_text", "text": c["text"]}
        for c in item.get("content") or []
        if c.get("type") == "reasoning_text"
    ]
    return {**out, "content": texts} if texts else out


# -- OpenAI Chat Completions -------------------------------------------------------------------------


@pytest.mark.parametrize("exchange", _of("chat"), ids=lambda e: e.name)
async def test_chat_replays_the_recorded_answer_exactly(exchange: Exchange) -> None:
    seen: list[httpx.Request] = []
    body = exchange.body
    engine = ChatEngine(
        str(body.get("model") or "gpt-4o"), api_key="k", http=_client(exchange, seen), stream=bool(body.get("stream"))
    )
    if exchange.status >= 400:
        with pytest.raises(ProviderError) as info:
            await engine.run_inference(_turn())
        assert info.value.status == exchange.status
        return
    turn = await engine.run_inference(_turn())
    assert json.loads(seen[0].content)["stream"] is bool(body.get("stream"))
    assert engine.build_request(_stored(turn)) == engine.build_request(turn)
    messages = engine.build_request(turn)["messages"]
    replayed = messages[-1] if messages[-1]["role"] == "assistant" else None
    expected = expected_chat(_chat_message(exchange))
    for sent, came in zip(
        (replayed or {}).get("tool_calls") or [], (expected or {}).get("tool_calls") or [], strict=True
    ):
        if not came["id"]:  # a compatible server that names no call id: the engine makes one
            assert sent["id"].startswith("call_")
            came["id"] = sent["id"]
    assert replayed == expected
    text = next((b for b in turn.blocks if b.kind is BlockKind.LLM_TEXT), None)
    annotations = _chat_message(exchange).get("annotations")
    if annotations:
        assert text is not None and text.payload[PAYLOAD_CITATIONS] == annotations


def _chat_message(exchange: Exchange) -> dict[str, Any]:
    if not exchange.streamed:
        return dict(exchange.response["parsed_body"]["choices"][0]["message"])
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    for line in str(exchange.response["body"]["string"]).splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        for choice in json.loads(line[5:]).get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                message["content"] = (message["content"] or "") + delta["content"]
            for fragment in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    fragment["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = call["id"] or fragment.get("id") or ""
                function = fragment.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def expected_chat(message: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant message as it goes back: its text (or refusal), tool calls and the fields geppetto has
    no name for (Gemini's ``extra_content``); ``annotations`` and ``refusal`` are output-only fields (kept
    in the Turn, checked above)."""
    text = message.get("content") or message.get("refusal") or None
    calls = [
        {
            **{k: v for k, v in c.items() if k not in ("index", "id", "type", "function") and v is not None},
            "id": c["id"],
            "type": "function",
            "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
        }
        for c in message.get("tool_calls") or []
    ]
    if not text and not calls:
        return None
    named = {"role", "content", "refusal", "annotations", "tool_calls", "audio", "function_call", "reasoning_content"}
    out: dict[str, Any] = {k: v for k, v in message.items() if k not in named and v is not None}
    out.update({"role": "assistant", "content": text})
    if calls:
        out["tool_calls"] = calls
    return out
