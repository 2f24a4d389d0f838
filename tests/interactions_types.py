"""Strict validation of Interactions API bodies against the official ``google-genai`` types.

The SDK's generated models accept unknown fields (``extra="allow"``), keep unknown union members as
``Unknown*`` placeholders and unknown enum values as ``UnrecognizedStr``: lenient on purpose, so a client
survives a newer server. Tests want the opposite, so every function here validates with the SDK's model and
then refuses any field, union member or enum value the types do not name, with the path of the first one.

    validate_request(body)         # POST /v1beta/interactions body (a model interaction)
    validate_interaction(body)     # an Interaction (create, get, cancel answers)
    validate_event(data)           # one SSE event's data
    validate_error(body)           # an error answer ({"error": {"code", "message"}})
"""

from __future__ import annotations

import warnings
from typing import Any

import pydantic
from google.genai._gaos.errors.createinteraction import CreateInteractionClientErrorData
from google.genai._gaos.types.basemodel import UnrecognizedStr
from google.genai._gaos.types.interactions import (
    CreateModelInteraction,
    Interaction,
    InteractionSSEStreamEvent,
)

__all__ = ["StrictTypeError", "validate_error", "validate_event", "validate_interaction", "validate_request"]


class StrictTypeError(AssertionError):
    """A body the google-genai types refuse, or accept only leniently (the message names the path)."""


def _walk(value: Any, path: str) -> None:
    if isinstance(value, pydantic.BaseModel):
        name = type(value).__name__
        if getattr(value, "is_unknown", False) is True or name.startswith("Unknown"):
            raise StrictTypeError(f"{path}: not a member of its union ({name}): {getattr(value, 'raw', value)!r}")
        extra = value.model_extra or {}
        if extra:
            raise StrictTypeError(f"{path}: unknown field(s) {sorted(extra)} on {name}")
        for field in type(value).model_fields:
            _walk(getattr(value, field), f"{path}.{field}")
    elif isinstance(value, UnrecognizedStr) and not path.endswith(".model"):  # model names are an open set
        raise StrictTypeError(f"{path}: unknown enum value {str(value)!r}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (pydantic.BaseModel, list, dict)):
                _walk(item, f"{path}.{key}")


def _validate(model: type[pydantic.BaseModel], body: Any, what: str) -> Any:
    if not isinstance(body, dict):
        raise StrictTypeError(f"{what} must be a JSON object, got {type(body).__name__}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # response_mime_type and a few others
        try:
            parsed = model.model_validate(body)
        except pydantic.ValidationError as err:
            raise StrictTypeError(f"{what} does not validate against {model.__name__}: {err}") from None
        _walk(parsed, what)
    return parsed


def validate_request(body: Any) -> CreateModelInteraction:
    """A create-interaction request body for a model (not an agent), strictly."""
    return _validate(CreateModelInteraction, body, "request")  # type: ignore[no-any-return]


def validate_interaction(body: Any) -> Interaction:
    """An Interaction resource as create, get and cancel answer it, strictly."""
    return _validate(Interaction, body, "interaction")  # type: ignore[no-any-return]


def validate_event(data: Any) -> Any:
    """One server-sent event's data (``interaction.created``, ``step.delta``, ...), strictly; the event."""
    return _validate(InteractionSSEStreamEvent, {"data": data}, "event").data


def validate_error(body: Any) -> Any:
    """An error answer's body, strictly."""
    return _validate(CreateInteractionClientErrorData, body, "error")
