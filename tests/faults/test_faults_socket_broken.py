"""Every engine against answers broken in shape rather than in pace, on a real loopback socket: a connection
cut inside the headers, a server that sends not one byte, headers and then silence, a stream that ends cleanly
halfway, an event of malformed JSON, a 200 that is not an event stream, and 429s past the retries. Each is one
error of the exact type whose message names what happened, the history holds only the prompt (nothing
half-saved), and the same session then answers the next prompt."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from faultserver import ANSWER, PROVIDERS, MisbehavingServer, Script, answers_again, engine_for

import geppetto as gp

# The server in these cells sends nothing more for 30 s, so a short read timeout races nothing.
SHORT_READ = httpx.Timeout(10.0, read=0.5)
TERMINAL = {
    "openai-responses": "the stream ended without response.completed",
    "openai-chat": "the chat completions stream ended before a finish_reason",
    "anthropic": "the messages stream ended before message_stop",
    "gemini": "the Gemini stream ended before a finishReason",
}


async def _one_error(
    provider: str, server: MisbehavingServer, body: bytes, expected: type[gp.ProviderError], **options: Any
) -> gp.ProviderError:
    """Run one prompt that must fail with ``expected``; check nothing was half-saved and the next prompt works."""
    async with engine_for(provider, server, **options) as engine:
        session = gp.Session(engine)
        with pytest.raises(expected) as raised:
            await session.run("Hi")
        assert type(raised.value) is expected
        assert not session.running
        assert len(session.history) == 1  # the prompt's seed only
        assert [b.kind for b in session.history[0].blocks] == [gp.BlockKind.USER]
        await answers_again(session, server, body)
        assert session.history[-1].blocks[-1].text == ANSWER
    return raised.value


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_connection_cut_inside_the_headers_is_retried_then_a_connection_error(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="drop_head", body=body)
    error = await _one_error(provider, bad_server, body, gp.ProviderConnectionError)
    assert "could not reach http://127.0.0.1:" in str(error)
    assert "3 attempts); check the base URL and the network" in str(error)
    assert len(bad_server.paths) == 3 + 1  # first try, max_retries=2 retries, then the good prompt


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_that_sends_not_one_byte_is_a_connection_error_naming_the_read_timeout(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="silent", body=body)
    error = await _one_error(provider, bad_server, body, gp.ProviderConnectionError, timeout=SHORT_READ)
    assert "sent no answer within 0.5 s (read timeout, 3 attempts); to wait longer pass the engine timeout=" in str(
        error
    )
    assert len(bad_server.paths) == 3 + 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_headers_then_silence_is_a_stream_error_naming_the_read_timeout(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="stall_head", body=body)
    error = await _one_error(provider, bad_server, body, gp.StreamError)  # 3 s: the headers come well before
    assert "broke off after" in str(error)
    assert "no data for 3 s (read timeout); to wait longer pass the engine timeout=" in str(error)
    assert len(bad_server.paths) == 1 + 1  # a stream that began is never sent again


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_ends_cleanly_halfway_names_the_missing_terminal_event(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="truncate", body=body)
    error = await _one_error(provider, bad_server, body, gp.StreamError)
    assert str(error).startswith(f"[{error.provider}] {TERMINAL[provider]}")
    assert "; received: " in str(error)
    if provider == "openai-responses":
        # the response's id had arrived: it is read back before anything is sent again (this server answers
        # the GET with the stream again, so whether it landed stays unknown and the error says so)
        assert "back failed too" in str(error) and "whether it landed is not known" in str(error)
        assert len(bad_server.paths) == 3 and bad_server.paths[1].startswith("/v1/responses/resp_")
    else:
        assert len(bad_server.paths) == 1 + 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_event_of_malformed_json_is_a_stream_error_quoting_it(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="malformed", body=body)
    error = await _one_error(provider, bad_server, body, gp.StreamError)
    assert "malformed" in str(error)
    assert """'{"type": "oops", "delta":""" in str(error)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_json_document_where_a_stream_was_asked_is_a_stream_error(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="json", content_type="application/json", body=body)
    error = await _one_error(provider, bad_server, body, gp.StreamError)
    assert str(error).startswith(f"[{error.provider}] {bad_server.url(provider)}")
    assert "answered with application/json and no event where an event stream was asked for (it began '{" in str(error)


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_valid_stream_under_another_content_type_is_still_read(
    provider: str, content_type: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    bad_server.script = Script(content_type=content_type, body=recorded_streams[provider])
    async with engine_for(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")
    assert out.blocks[-1].text == ANSWER


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limits_past_the_retries_are_one_rate_limit_error(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(statuses=[429, 429, 429], body=body)
    error = await _one_error(provider, bad_server, body, gp.RateLimitError)
    assert error.status == 429
    assert "try again" in str(error)  # the provider's own message
    assert len(bad_server.paths) == 3 + 1  # the first try and max_retries=2 retries, then the good prompt


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_server_errors_whose_body_breaks_off_are_retried_then_one_server_error(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(statuses=[500, 500, 500], cut_errors=True, body=body)
    error = await _one_error(provider, bad_server, body, gp.ServerError)
    assert error.status == 500
    assert len(bad_server.paths) == 3 + 1
