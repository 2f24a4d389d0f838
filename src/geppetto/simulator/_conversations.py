"""OpenAI Conversations API: create, get, update, delete, and item add/list/get/delete."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from ._call import Call, Handler
from ._errors import SimError
from ._openai import conversation_or_404, paginate
from ._openai_items import normalize_input
from ._state import Conversation, new_id
from ._validate import validate


def _resource(conv: Conversation) -> dict[str, Any]:
    return {"id": conv.id, "object": "conversation", "created_at": conv.created_at, "metadata": conv.metadata}


def _add_items(call: Call, conv: Conversation, raw: Any) -> list[dict[str, Any]]:
    items = [{**item, "status": "completed"} for item in normalize_input(call.state, raw)]
    known = {i["id"] for i in conv.items}
    for item in items:
        if item["id"] in known:
            raise SimError(
                400,
                f"Duplicate item found with id {item['id']}. Remove duplicate items from your input and try again.",
                param="items",
            )
        known.add(item["id"])
    conv.items.extend(items)
    for item in items:
        call.state.items[item["id"]] = item
    return items


def _conv(call: Call) -> Conversation:
    return conversation_or_404(call.state, call.request.path_params["conversation_id"], param=None)


async def create(call: Call) -> ASGIApp:
    """POST /v1/conversations."""
    body = call.obj()
    validate("CreateConversationBody", body)
    with call.state.lock:
        conv = Conversation(new_id("conv_"), call.state.now(), dict(body.get("metadata") or {}))
        _add_items(call, conv, body.get("items") or [])
        call.state.conversations[conv.id] = conv
        return JSONResponse(_resource(conv))


async def get(call: Call) -> ASGIApp:
    """GET /v1/conversations/{id}."""
    with call.state.lock:
        return JSONResponse(_resource(_conv(call)))


async def update(call: Call) -> ASGIApp:
    """POST /v1/conversations/{id}: replace the metadata."""
    body = call.obj()
    validate("UpdateConversationBody", body)
    with call.state.lock:
        conv = _conv(call)
        conv.metadata = dict(body.get("metadata") or {})
        return JSONResponse(_resource(conv))


async def delete(call: Call) -> ASGIApp:
    """DELETE /v1/conversations/{id} (its items stay addressable, as the service documents)."""
    with call.state.lock:
        conv = _conv(call)
        conv.deleted = True
        return JSONResponse({"id": conv.id, "object": "conversation.deleted", "deleted": True})


async def add_items(call: Call) -> ASGIApp:
    """POST /v1/conversations/{id}/items."""
    body = call.obj()
    validate("CreateConversationItemsBody", body)
    with call.state.lock:
        added = copy.deepcopy(_add_items(call, _conv(call), body["items"]))
    return JSONResponse(
        {
            "object": "list",
            "data": added,
            "first_id": added[0]["id"] if added else None,
            "last_id": added[-1]["id"] if added else None,
            "has_more": False,
        }
    )


async def list_items(call: Call) -> ASGIApp:
    """GET /v1/conversations/{id}/items (default order desc)."""
    with call.state.lock:
        return JSONResponse(paginate(call, copy.deepcopy(_conv(call).items)))


def _item_index(call: Call, conv: Conversation) -> int:
    item_id = call.request.path_params["item_id"]
    for index, item in enumerate(conv.items):
        if item.get("id") == item_id:
            return index
    raise SimError(404, f"Item with id '{item_id}' not found.", param=None)


async def get_item(call: Call) -> ASGIApp:
    """GET /v1/conversations/{id}/items/{item_id}."""
    with call.state.lock:
        conv = _conv(call)
        return JSONResponse(copy.deepcopy(conv.items[_item_index(call, conv)]))


async def delete_item(call: Call) -> ASGIApp:
    """DELETE /v1/conversations/{id}/items/{item_id}: answers with the conversation resource."""
    with call.state.lock:
        conv = _conv(call)
        del conv.items[_item_index(call, conv)]
        return JSONResponse(_resource(conv))


def routes(r: Callable[[str, str, Handler, list[str]], Route]) -> list[Route]:
    """The Conversations routes, built with the app's endpoint wrapper `r(path, api, handler, methods)`."""
    base = "/v1/conversations"
    return [
        r(base, "openai", create, ["POST"]),
        r(base + "/{conversation_id}", "openai", get, ["GET"]),
        r(base + "/{conversation_id}", "openai", update, ["POST"]),
        r(base + "/{conversation_id}", "openai", delete, ["DELETE"]),
        r(base + "/{conversation_id}/items", "openai", add_items, ["POST"]),
        r(base + "/{conversation_id}/items", "openai", list_items, ["GET"]),
        r(base + "/{conversation_id}/items/{item_id}", "openai", get_item, ["GET"]),
        r(base + "/{conversation_id}/items/{item_id}", "openai", delete_item, ["DELETE"]),
    ]
