"""The OpenAPI 3.1 document of the server's API, served at ``/openapi.json``: generated from the routes and
their models (:mod:`~geppetto.server._models`), with the API key's security scheme."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

__all__ = ["openapi_document"]


def openapi_document(app: FastAPI, keyed: bool = True) -> dict[str, Any]:
    """``app``'s document; ``keyed``: the server requires ``Authorization: Bearer`` (else no route does).
    Generated once per app (the routes do not change while it runs)."""
    generated: dict[str, Any] | None = getattr(app.state, "openapi_generated", None)
    if generated is None:
        generated = get_openapi(
            title=app.title,
            version=app.version,
            openapi_version=app.openapi_version,
            description=app.description,
            routes=[_without_head(route) for route in app.routes],
        )
        generated.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        app.state.openapi_generated = generated
    document = copy.deepcopy(generated)
    document["security"] = [{"bearer": []}] if keyed else []
    return document


def _without_head(route: BaseRoute) -> BaseRoute:
    """``route`` as documented: a GET's HEAD is implied."""
    if not isinstance(route, APIRoute) or not route.methods or "HEAD" not in route.methods:
        return route
    documented = copy.copy(route)
    documented.methods = route.methods - {"HEAD"}
    return documented
