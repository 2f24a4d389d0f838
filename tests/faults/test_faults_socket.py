"""Every engine against a server that misbehaves on a real loopback socket: a stream dripped a few bytes at
a time, cut after N bytes, stalled past the read timeout, led by one huge event, or refused with 429/503
before it is served and with 500s until retries run out. Each ends in the answer or in one clear error, and
the same session then answers the next prompt."""

from __future__ import annotations

import pytest
from faultserver import ANSWER, LABEL, PROVIDERS, RETRY, MisbehavingServer, Script, answers_again, engine_for

import geppetto as gp
from geppetto.providers._http import HttpTransport
from geppetto.providers._http_errors import anthropic_error_info, gemini_error_info, openai_error_info


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_dripped_a_few_bytes_at_a_time_arrives_whole(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    bad_server.script = Script(mode="drip", body=recorded_streams[provider])
    async with engine_for(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")
    assert out.blocks[-1].text == ANSWER


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_cut_after_n_bytes_is_one_stream_error(
    provider: str, cut: float, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="drop", drop_after=int(len(body) * cut), body=body)
    async with engine_for(provider, bad_server) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.StreamError) as err:
            await session.run("Hi")
        assert str(err.value).startswith(f"[{LABEL[provider]}] ")
        assert len(session.history) == 1  # the prompt's seed: nothing half-saved
        await answers_again(session, bad_server, body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_stalls_ends_with_the_read_timeout_named(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="stall", body=body)
    async with engine_for(provider, bad_server) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.StreamError, match=r"broke off after [\d.]+ s: no data for 3 s \(read timeout\)"):
            await session.run("Hi")
        await answers_again(session, bad_server, body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_one_huge_event_passes_under_the_bound_and_is_refused_over_it(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="huge", huge_bytes=3 << 20, body=body)
    async with engine_for(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")  # 3 MiB is well under the default bound
    assert out.blocks[-1].text == ANSWER
    parser = {"anthropic": anthropic_error_info, "gemini": gemini_error_info}.get(provider, openai_error_info)
    transport = HttpTransport(
        bad_server.url(provider), provider=LABEL[provider], error_parser=parser, retry=RETRY, max_event_size=1 << 20
    )
    bad_server.script = Script(mode="huge", huge_bytes=3 << 20, body=body)
    async with transport, engine_for(provider, bad_server, http=transport) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.StreamError, match=r"grew past 1,048,576 characters \(max_event_size\)"):
            await session.run("Hi")
        await answers_again(session, bad_server, body)


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_refusals_with_retry_after_are_retried_then_answered(
    provider: str, status: int, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    bad_server.script = Script(statuses=[status, status], body=recorded_streams[provider])
    async with engine_for(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")
    assert out.blocks[-1].text == ANSWER
    assert len(bad_server.paths) == 3  # two refusals, then the answer


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_server_errors_past_the_retries_are_one_server_error(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(statuses=[500, 500, 500], body=body)
    async with engine_for(provider, bad_server) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.ServerError) as err:
            await session.run("Hi")
        assert err.value.status == 500
        assert len(bad_server.paths) == 3  # the first try and max_retries=2 retries
        await answers_again(session, bad_server, body)
