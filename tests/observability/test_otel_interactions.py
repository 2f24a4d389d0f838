"""The Interactions engine's spans and metrics say how the context travelled and why it fell back, through
the same attributes and instruments as the Responses engine's (one mechanism for both stateful engines)."""

from __future__ import annotations

from test_otel import Otel, otel  # noqa: F401 - the fixture

from geppetto import Session
from geppetto.providers._http import RetryPolicy
from geppetto.simulator import Simulator

FAST = RetryPolicy(max_retries=0)


async def test_interactions_spans_say_how_the_context_travelled_and_why_it_fell_back(
    geppetto_sim: Simulator,
    otel: Otel,  # noqa: F811 - the fixture imported above
) -> None:
    async with geppetto_sim.engine("gemini-interactions", model="gemini-2.5-flash", retry=FAST) as engine:
        session = Session(engine)
        await session.run("first")
        await session.run("second")
        assert session.latest is not None
        session.latest.blocks[0].payload["text"] = "first, edited"  # the server's copy no longer matches
        await session.run("third")
    chats = [s for s in otel.finished() if s.name == "chat gemini-2.5-flash"]
    modes = [(s.attributes["geppetto.responses.mode"], s.attributes["geppetto.responses.full_turn"]) for s in chats]
    assert modes == [("stateless", True), ("chained", False), ("stateless", True)]
    assert chats[1].attributes["geppetto.responses.anchor"].startswith("v1_")
    assert chats[1].attributes["geppetto.responses.items"] == 1
    assert chats[2].attributes["geppetto.responses.fallback_reason"] == "fingerprint_mismatch"
    requests = {p.attributes["mode"]: p.value for p in otel.points("geppetto.responses.requests")}
    assert requests == {"stateless": 2, "chained": 1}
    (fallback,) = otel.points("geppetto.responses.fallbacks")
    assert fallback.attributes == {"reason": "fingerprint_mismatch"} and fallback.value == 1
