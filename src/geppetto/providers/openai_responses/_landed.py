"""What a Responses request that failed after it went out left on the server (see ``providers._landed``).

- A stream that broke after ``response.created`` named its response: the response is read back with
  ``GET /responses/{id}`` (waited for while it is in progress) and its rest read as the rest of the stream,
  instead of a second ``POST /responses``. A 404 proves it did not land: the break is raised as before,
  saying that sending again is safe.
- A conversation request whose connection broke before any answer: before the transport sends it again,
  the conversation's newest items are read; items after the last one the Turn knows mean the request
  landed (its input is in the conversation), so it is not sent again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from geppetto._exceptions import ProviderError, StreamError
from geppetto.events import EventMetadata
from geppetto.providers._http import SSEEvent
from geppetto.providers._landed import LandedCheck, NotLanded, await_landed
from geppetto.turns import PAYLOAD_ITEM_ID, Turn

from ._answer import StreamState, consume_stream
from ._background import Cursor, final_events
from ._request import Plan

__all__ = ["conversation_check", "read_back"]

log = logging.getLogger("geppetto.providers.openai_responses")

_SERVER_SAID = frozenset({"response.failed", "error"})
"""Events after which a broken stream is the server's own end, not a cut (nothing more to read back)."""
_PAGE = 100
"""The most items one conversation listing returns."""


async def _as_events(events: list[SSEEvent]) -> AsyncIterator[SSEEvent]:
    for event in events:
        yield event


async def read_back(
    http: Any,
    body: dict[str, Any],
    state: StreamState,
    meta: EventMetadata,
    broken: StreamError,
    *,
    background: bool,
    poll_interval: float,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> None:
    """Finish ``state``, a stream of the request ``body`` that broke with ``broken``, from its response read
    back from the server. ``broken`` is raised as it is when there is nothing to read back (no id arrived,
    the response is not stored, or a background reader already did all it could), and with what was found
    when the response did not land."""
    response_id = str(state.response.get("id") or "")
    if background or not response_id or body.get("store") is False or getattr(http, "whole", False):
        raise broken
    if state.event_types and state.event_types[-1] in _SERVER_SAID:
        raise broken  # not a cut: the server ended the response itself
    what = f"response {response_id}"
    log.warning("responses: the stream of %s broke (%s); reading it back instead of sending again", what, broken)
    try:
        response = await await_landed(
            lambda: http.get(f"responses/{response_id}"), what, response_id, poll_interval=poll_interval, sleep=sleep
        )
    except NotLanded as exc:
        raise StreamError(
            f"{broken.message}; {exc.message}: it did not land, so sending the request again is safe",
            received=state.received(),
            provider="openai",
        ) from broken
    except ProviderError as exc:  # the break is what the caller has to know; what landed is not known
        raise StreamError(
            f"{broken.message}; reading {what} back failed too ({exc.message}), so whether it landed is not known",
            received=state.received(),
            provider="openai",
        ) from broken
    if response.get("status") == "cancelled":
        raise StreamError(
            f"{broken.message}; {what} was cancelled on the server before it finished",
            received=state.received(),
            provider="openai",
        ) from broken
    cursor = Cursor(response_id=response_id, texts=state.published_texts())
    await consume_stream(_as_events(final_events(response, cursor)), state, meta)


def _last_known_item(turn: Turn, plan: Plan) -> str | None:
    """The id of the last item the Turn knows the conversation holds: the item of the last block before the
    plan's delta that came from the server (None when the delta is the whole Turn)."""
    if plan.full:
        return None
    start = len(turn.blocks) - len(plan.blocks)
    for block in reversed(turn.blocks[:start]):
        item_id = block.payload.get(PAYLOAD_ITEM_ID)
        if item_id:
            return str(item_id)
    return None


def conversation_check(http: Any, turn: Turn, plan: Plan) -> LandedCheck | None:
    """For a conversation request: whether its earlier attempt landed, read from the conversation's items
    (None for a request in no conversation)."""
    cid = plan.conversation_id
    if plan.mode != "conversation" or not cid:
        return None
    known = _last_known_item(turn, plan)
    seeded = len(plan.seed_items or []) if plan.created else None

    async def landed() -> bool | None:
        # a cut before any answer: what the conversation holds now says whether the input went in
        page = await http.get(f"conversations/{cid}/items", {"limit": _PAGE, "order": "desc"})
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            return None
        ids = [item.get("id") for item in data if isinstance(item, dict)]
        if seeded is not None and not page.get("has_more"):
            return len(ids) > seeded  # a conversation made for this request holds its seed, then the input
        if known is None or known not in ids:
            return None  # the last known item is not on the newest page: nothing proves either way
        return ids.index(known) > 0  # newer items than the last known one: the input landed

    return landed
