"""What a Responses request that failed after it went out left on the server (see ``providers._landed``).

- A stream that broke after ``response.created`` named its response: the response is read back with
  ``GET /responses/{id}`` (waited for while it is in progress) and its rest read as the rest of the stream,
  instead of a second ``POST /responses``. A 404 proves it did not land: the break is raised as before,
  saying that sending again is safe.
- A conversation request whose connection broke before any answer: before the transport sends it again,
  the conversation's newest items are read; items after the last one the Turn knows mean the request
  landed (its input is in the conversation), so it is not sent again.
- A foreground request another process created and did not finish reading (a server worker that died after
  ``response.created``; ``geppetto serve`` hears the id through the background observer, as for a background
  response): the next process reads the response back by its id (:func:`pending_events`) instead of sending
  the step again; only a response the server proves it does not hold (404), or one it cancelled, is sent again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from geppetto._exceptions import ProviderError, StreamError
from geppetto.events import EventMetadata
from geppetto.providers._background import BACKGROUND_OBSERVER, PendingResponse
from geppetto.providers._http import SSEEvent
from geppetto.providers._landed import LandedCheck, NotLanded, await_landed
from geppetto.turns import PAYLOAD_ITEM_ID, Turn

from ._background import Cursor, final_events
from ._plan import Plan
from ._stream import StreamState, consume_stream

__all__ = [
    "ConversationCheck",
    "as_events",
    "conversation_check",
    "landed_answer",
    "pending_events",
    "read_back",
    "told_created",
]

log = logging.getLogger("geppetto.providers.openai_responses")

_SERVER_SAID = frozenset({"response.failed", "error"})
"""Events after which a broken stream is the server's own end, not a cut (nothing more to read back)."""
_PAGE = 100
"""The most items one conversation listing returns."""


async def as_events(events: list[SSEEvent]) -> AsyncIterator[SSEEvent]:
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
    await consume_stream(as_events(final_events(response, cursor)), state, meta)


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


class ConversationCheck:
    """The :data:`LandedCheck` of a conversation request: whether its earlier attempt landed, read from the
    conversation's newest items; when it did, the items it added (``added``, oldest first: its input, then
    the answer the server stored), from which the answer is read instead of sending the input again."""

    def __init__(self, http: Any, conversation_id: str, known: str | None, seeded: int | None) -> None:
        self.http, self.conversation_id, self.known, self.seeded = http, conversation_id, known, seeded
        self.added: list[dict[str, Any]] | None = None

    async def __call__(self) -> bool | None:
        # a cut before any answer: what the conversation holds now says whether the input went in
        cid = self.conversation_id
        page = await self.http.get(f"conversations/{cid}/items", {"limit": _PAGE, "order": "desc"})
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            return None
        items = [item for item in data if isinstance(item, dict)]
        ids = [item.get("id") for item in items]
        if self.seeded is not None and not page.get("has_more"):
            newer = items[: max(len(items) - self.seeded, 0)]  # a conversation made for this request: seed, input
        elif self.known is not None and self.known in ids:
            newer = items[: ids.index(self.known)]  # newer items than the last known one: the input landed
        else:
            return None  # the last known item is not on the newest page: nothing proves either way
        if newer:
            self.added = list(reversed(newer))
        return bool(newer)


def conversation_check(http: Any, turn: Turn, plan: Plan) -> ConversationCheck | None:
    """For a conversation request: whether its earlier attempt landed, read from the conversation's items
    (None for a request in no conversation)."""
    cid = plan.conversation_id
    if plan.mode != "conversation" or not cid:
        return None
    return ConversationCheck(
        http, cid, _last_known_item(turn, plan), len(plan.seed_items or []) if plan.created else None
    )


def appended_check(http: Any, conversation_id: str, before: int, adding: int) -> LandedCheck:
    """The check of ``POST /conversations/{id}/items`` adding ``adding`` items to a conversation that held
    ``before`` (a seed being put in): True when it holds both, False when it still holds ``before`` alone,
    None otherwise (counted by paging through its items, oldest first)."""

    async def landed() -> bool | None:
        count, after = 0, None
        while True:
            params: dict[str, Any] = {"limit": _PAGE, "order": "asc", **({"after": after} if after else {})}
            page = await http.get(f"conversations/{conversation_id}/items", params)
            data = page.get("data") if isinstance(page, dict) else None
            if not isinstance(data, list):
                return None
            count += len(data)
            if not page.get("has_more") or not data:
                break
            after = data[-1].get("id") if isinstance(data[-1], dict) else None
            if not after:
                return None
        return True if count == before + adding else False if count == before else None

    return landed


_OUTPUT_TYPES = frozenset({"message", "function_call", "reasoning", "custom_tool_call"})


def landed_answer(check: LandedCheck | None, body: dict[str, Any]) -> list[SSEEvent] | None:
    """The answer a conversation request that landed left in its conversation (``check`` found its items),
    as the final events of its stream: the items after its input, when the server stored them (None: no
    answer to read, the request is not sent again)."""
    if not isinstance(check, ConversationCheck) or not check.added:
        return None
    sent = body.get("input")
    inputs = len(sent) if isinstance(sent, list) else 1
    output = check.added[inputs:]
    if not output or not all(item.get("type") in _OUTPUT_TYPES for item in output):
        return None
    if any(item.get("type") == "message" and item.get("role") != "assistant" for item in output):
        return None
    log.warning(
        "responses: the answer to the request in conversation %s was lost with its connection; read %d items of "
        "it from the conversation instead of sending the input again",
        check.conversation_id,
        len(output),
    )
    # a conversation's items do not name the response that added them: the blocks are labelled with the
    # conversation and their last item (what anchors a conversation request is the conversation and item ids)
    response = {
        "id": f"{check.conversation_id}:{output[-1].get('id') or len(check.added)}",
        "object": "response",
        "status": "completed",
        "output": output,
        "conversation": {"id": check.conversation_id},
        "model": body.get("model"),
    }
    return final_events(response, Cursor(texts={}))


def told_created(
    turn: Turn, body: dict[str, Any], check: Callable[[dict[str, Any]], None] | None, known: str = ""
) -> Callable[[dict[str, Any]], None] | None:
    """The ``on_created`` of a foreground request: ``check``, and the background observer (``geppetto serve``)
    told the id of a stored response, so another process can read it back if this one stops before its end
    (``known``: the id of a response picked up, not told again)."""
    observer = BACKGROUND_OBSERVER.get()
    if observer is None or body.get("store") is False:
        return check

    def created(response: dict[str, Any]) -> None:
        response_id = str(response.get("id") or "")
        if response_id and response_id != known:
            observer.created(response_id, turn)
        if check is not None:
            check(response)

    return created


async def pending_events(
    http: Any,
    pending: PendingResponse,
    body: dict[str, Any],
    landed: LandedCheck | None,
    *,
    poll_interval: float,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> AsyncGenerator[SSEEvent, None]:
    """The events of the foreground response ``pending`` another process created for this step: read back with
    ``GET /responses/{id}`` (waited for while in progress) as its final events (the text deltas that process
    published are not published again); ``body`` is sent only when the server proves it does not hold the
    response (404) or cancelled it."""
    response_id = pending.response_id
    what = f"response {response_id}"
    try:
        response: dict[str, Any] | None = await await_landed(
            lambda: http.get(f"responses/{response_id}"), what, response_id, poll_interval=poll_interval, sleep=sleep
        )
    except NotLanded as exc:
        log.warning("responses: %s; sending the step again (it did not land)", exc.message)
        response = None
    if response is not None and response.get("status") == "cancelled":
        log.warning("responses: %s was cancelled on the server before it finished; sending the step again", what)
        response = None
    if response is None:
        async with aclosing(http.stream("responses", body, landed)) as events:
            async for event in events:
                yield event
        return
    log.info("responses: picked up %s by reading it back (status %s)", what, response.get("status"))
    for event in final_events(response, Cursor(response_id=response_id, texts=None)):
        yield event
