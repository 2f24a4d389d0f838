"""The typed requests and answers of the server's API: the routes validate request bodies with these models
and the OpenAPI document is generated from them, so the two cannot drift apart.

A request model names, per field, the message a client gets when that field is wrong (``invalid``) and
what its unknown fields are told (``takes``); a field validator's own ``ValueError`` message wins over both.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from ._messages import prompt_files

__all__ = [
    "MAX_ID",
    "MAX_WHOLE",
    "Approvals",
    "Cancelling",
    "ChatRequest",
    "CreateSession",
    "ErrorBody",
    "Health",
    "Info",
    "Prompt",
    "RequestModel",
    "RunAgentInput",
    "SessionCreated",
    "SessionList",
    "SessionView",
    "Snapshot",
    "SnapshotPage",
    "SnapshotSummary",
    "Source",
    "Started",
]

MAX_ID = 200
"""The longest session id (characters)."""
MAX_WHOLE = 2**63 - 1
"""The largest whole number a route takes (what the stores' 64-bit columns hold)."""

# What the server accepts as text: no NUL (PostgreSQL cannot store it; lone surrogates, which JSON can
# carry as escapes, are refused too but cannot be written as a pattern), and for ids and prompts some
# non-blank character.
_NON_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
Text = Annotated[str, Field(pattern=r"^[^\u0000]*$")]
NonBlank = Annotated[str, Field(pattern=_NON_BLANK)]
SessionId = Annotated[str, Field(min_length=1, max_length=MAX_ID, pattern=_NON_BLANK)]
Mode = Literal["stateless", "chained", "conversation"]


class RequestModel(BaseModel):
    """A JSON request body: unknown fields are refused, every field has its message."""

    model_config = ConfigDict(extra="forbid")
    invalid: ClassVar[dict[str, str]] = {}
    takes: ClassVar[str] = ""


class CreateSession(RequestModel):
    """A new session's settings; every field is optional."""

    id: SessionId | SkipJsonSchema[None] = Field(default=None, description="the session id (a fresh UUID when absent)")
    model: Text | SkipJsonSchema[None] = Field(default=None)
    mode: Mode | SkipJsonSchema[None] = Field(default=None)
    system: Text | SkipJsonSchema[None] = Field(default=None, description="a system prompt for every inference")

    invalid: ClassVar[dict[str, str]] = {
        "id": f"'id' must be a string of 1 to {MAX_ID} characters, not all blank",
        "model": "'model' must be a string",
        "mode": "'mode' must be stateless, chained or conversation",
        "system": "'system' must be a string",
    }
    takes: ClassVar[str] = "a session takes model, mode, system"

    @field_validator("id", "model", "mode", "system", mode="before")
    @classmethod
    def _given(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:  # left out is fine; null is not a setting
            raise ValueError(cls.invalid[str(info.field_name)])
        return value

    def settings(self) -> dict[str, Any]:
        """The settings given (empty strings dropped), without the id."""
        return {k: v for k, v in self.model_dump(include={"model", "mode", "system"}).items() if v}


_SOURCES = ("data", "url", "file_id")
FileText = Annotated[str, Field(min_length=1, pattern=r"^[^\u0000]*$")]


class Attachment(BaseModel):
    """A prompt's file: a media type and exactly one of base64 data, a URL (http(s) or ``data:``) or a
    provider file id."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [{"required": [name]} for name in _SOURCES]})
    media_type: FileText
    data: FileText | SkipJsonSchema[None] = Field(default=None, json_schema_extra={"contentEncoding": "base64"})
    url: FileText | SkipJsonSchema[None] = Field(default=None, description="http(s), or a data: URL (RFC 2397)")
    file_id: FileText | SkipJsonSchema[None] = Field(default=None)
    filename: Text | SkipJsonSchema[None] = Field(default=None)

    @field_validator(*_SOURCES, "filename", mode="before")
    @classmethod
    def _given(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:  # left out is fine; null is not a string
            raise ValueError(f"a file's {info.field_name!r} must be a string when given")
        return value


class Prompt(RequestModel):
    """A user message: its text and, optionally, its files."""

    text: NonBlank
    files: list[Attachment] | SkipJsonSchema[None] = Field(
        default=None, description="Attachments: a media type and one of base64 data, a URL or a provider file id"
    )

    invalid: ClassVar[dict[str, str]] = {"text": 'send the prompt as {"text": "..."} with some text'}
    takes: ClassVar[str] = "a prompt takes text and files only"

    @field_validator("files", mode="before")
    @classmethod
    def _files(cls, value: Any) -> Any:
        if value is None:  # left out is fine; null is not a list of files
            raise ValueError('files is a list of {"media_type": ..., one of "data" (base64), "url" or "file_id"}')
        return prompt_files(value)  # its ValueError names what is wrong

    def file_dicts(self) -> list[dict[str, Any]] | None:
        return None if self.files is None else [f.model_dump(exclude_none=True) for f in self.files]


class Approvals(RequestModel):
    """Decisions for the tool calls that wait: true approves, false or a reason denies, a client-side tool's
    call id takes its result."""

    decisions: dict[str, Any] = Field(min_length=1)

    invalid: ClassVar[dict[str, str]] = {
        "decisions": 'send {"decisions": {"<call_id>": true | false | "reason to deny"}} (a client-side tool\'s '
        "call id takes its result); GET /api/sessions/{id} lists pending_approvals"
    }
    takes: ClassVar[str] = 'send {"decisions": {...}}'


# -- the front-end protocols' requests: documented here, read by the protocol modules -------------------
_USER: JsonDict = {"required": ["role"], "properties": {"role": {"const": "user"}}}


class Rewind(RequestModel):
    """``POST .../rewind``: how many prompts to drop with their answers."""

    n: int = Field(default=1, ge=1, le=MAX_WHOLE, description="prompts to drop with their answers (1 or more)")

    invalid: ClassVar[dict[str, str]] = {
        "n": 'send {"n": N}: the number of prompts to drop with their answers (1 or more)'
    }
    takes: ClassVar[str] = 'send {"n": N}: the number of prompts to drop with their answers (1 or more)'

    @field_validator("n", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        # A JSON number is a whole number when its value is (2.0 is 2, as the schema's "integer" says);
        # text, true and false are not numbers.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(cls.invalid["n"])
        return value


class Fork(RequestModel):
    """``POST .../fork``: the new session's id (a fresh UUID when absent)."""

    id: SessionId | SkipJsonSchema[None] = Field(default=None, description="the new session's id")

    invalid: ClassVar[dict[str, str]] = {"id": f"'id' must be a string of 1 to {MAX_ID} characters, not all blank"}
    takes: ClassVar[str] = 'send {} or {"id": "<new session id>"}'

    @field_validator("id", mode="before")
    @classmethod
    def _given(cls, value: Any) -> Any:
        if value is None:  # left out is a fresh id; null is not one
            raise ValueError(cls.invalid["id"])
        return value


class _TextPart(BaseModel):
    type: Literal["text"]
    text: NonBlank


class _Part(BaseModel):
    type: Text | SkipJsonSchema[None] = Field(default=None)
    text: Text | SkipJsonSchema[None] = Field(default=None)


class _ChatMessage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "if": _USER,
            "then": {"required": ["parts"], "properties": {"parts": {"contains": _TextPart.model_json_schema()}}},
        }
    )
    id: Text | SkipJsonSchema[None] = Field(default=None)
    role: Literal["system", "user", "assistant"]
    parts: list[_Part] | SkipJsonSchema[None] = Field(default=None)


class ChatRequest(BaseModel):
    """What the Vercel AI SDK's ``useChat`` sends: the chat id and its messages; every user message has some
    text (the last one is the prompt)."""

    id: SessionId = Field(description="the chat id: the session (made on first use)")
    messages: list[_ChatMessage] = Field(json_schema_extra={"contains": _USER})


class _Named(BaseModel):
    name: str
    description: str


class _ContextItem(BaseModel):
    description: str
    value: str


class _AGUIMessage(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": _USER,
                    "then": {
                        "required": ["content"],
                        "properties": {"content": {"type": "string", "pattern": _NON_BLANK}},
                    },
                },
                {
                    "if": {"required": ["role"], "properties": {"role": {"enum": ["developer", "system"]}}},
                    "then": {"required": ["content"]},
                },
            ]
        }
    )
    id: Text
    role: Literal["developer", "system", "assistant", "user"]
    content: Text | SkipJsonSchema[None] = Field(default=None)


class RunAgentInput(BaseModel):
    """AG-UI's ``RunAgentInput``: what the server reads of it (the ag-ui package's own types check the rest)."""

    thread_id: SessionId = Field(alias="threadId", description="the session (made on first use)")
    run_id: Text = Field(alias="runId")
    messages: list[_AGUIMessage] = Field(json_schema_extra={"contains": _USER})
    state: Any = None
    tools: list[_Named] | None = None
    context: list[_ContextItem] | None = None
    forwarded_props: Any = Field(default=None, alias="forwardedProps")


# -- answers ---------------------------------------------------------------------------------------------
class _ErrorDetail(BaseModel):
    message: str = Field(description="what went wrong and how to fix it")
    type: str = Field(description="a stable kind: not_found, invalid_request, session_busy, ...")


class ErrorBody(BaseModel):
    """Every error the server answers."""

    error: _ErrorDetail


class SessionCreated(BaseModel):
    id: str
    settings: dict[str, str]


class SessionList(BaseModel):
    sessions: list[dict[str, Any]]


class SnapshotSummary(BaseModel):
    seq: int
    turn_id: str
    inference_id: str | None
    saved_at: float | None
    blocks: int


class Source(BaseModel):
    """One citation of an answer's text, normalized from the provider's form (see
    :func:`geppetto.turns.citation_sources`): ``url`` for a web page, else ``document`` (a provider's file
    id, a document's title or index)."""

    url: str | None = Field(None, description="the cited web page (http or https)")
    document: str | None = Field(None, description="the cited file id or document, when it is no web page")
    title: str | None = None
    cited_text: str | None = Field(None, description="the quoted source text, when the provider gives it")
    start: int | None = Field(None, description="where the citing span of the answer's text starts")
    end: int | None = Field(None, description="where the citing span of the answer's text ends")


class SessionView(BaseModel):
    """A session: settings, status, its latest Turn (blocks with provenance), the count and last page of its
    snapshots (older pages at ``older_snapshots``), its last inferences, the tool calls waiting for a decision,
    and what each cited text block of the latest Turn cites, normalized (``sources``)."""

    id: str
    settings: dict[str, Any]
    status: Literal["running", "idle"]
    running_inference: str | None
    last_event_id: str | None = Field(description="the newest event's id; None while the event bus is away")
    latest: dict[str, Any] | None
    pending_approvals: list[dict[str, Any]]
    snapshot_count: int
    snapshots: list[SnapshotSummary]
    older_snapshots: str | None = Field(description="the route of the page before, None at the first")
    inferences: list[dict[str, Any]]
    sources: dict[str, list[Source]] = Field(
        description="per id of a text block of `latest` that cites something, its citations normalized (the "
        "block's payload keeps the provider's own form), in the provider's order, a source cited twice twice"
    )


class SnapshotPage(BaseModel):
    snapshots: list[SnapshotSummary]
    older: str | None = Field(description="the route of the page before, None at the first")


class Snapshot(BaseModel):
    seq: int
    turn: dict[str, Any]


class Rewound(BaseModel):
    id: str
    rewound: int
    turn_id: str
    blocks: int


class Forked(BaseModel):
    id: str
    # the session the fork was made from
    from_: str = Field(alias="from")
    settings: dict[str, str]
    blocks: int


class Started(BaseModel):
    """An inference started: read its events after ``after`` (``events`` is that route)."""

    inference_id: str
    after: str
    events: str


class Cancelling(BaseModel):
    inference_id: str
    cancelling: bool


class Info(BaseModel):
    profile: str
    provider: str
    model: str
    mode: str | None
    tools: list[str]
    worker: str


class Health(BaseModel):
    status: Literal["ok"]
    worker: str
