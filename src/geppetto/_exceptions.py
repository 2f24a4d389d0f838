"""Every error geppetto raises, under one root.

```
GeppettoError
├── UsageError                 the caller asked for something that cannot work; the message names the fix
│   ├── ConfigurationError     an engine, profile or session set up inconsistently (e.g. store=False + chained)
│   ├── KeyFormatError         a typed-key string that is not ``namespace.name@vN``
│   ├── PrefixChangedError     replayed reasoning after a changed prefix, under ``prefix_policy="error"``
│   └── SessionBusyError       a second inference started while one is running
├── TurnFormatError            a turn file or mapping that cannot be read (names the file and field)
├── MetadataTypeError          a typed key read a value of the wrong type, or set one that is not JSON
├── ToolDefinitionError        a function that cannot become a tool (names the function and parameter)
├── MaxIterationsError         the tool loop hit its bound while tool calls were still pending
├── UsageLimitExceeded         a session's UsageLimits would be passed by the next request (names limit, figure, fix)
├── StoreError                 a persistent store is unreadable, unreachable or from a newer schema
├── ProviderError              a provider answered with an error (status, provider message, request id)
│   ├── AuthenticationError    401/403, or no API key at all
│   ├── BadRequestError        400/422
│   │   └── PreviousResponseNotFoundError   a chained request whose parent the server no longer has
│   ├── NotFoundError          404
│   ├── RateLimitError         429
│   ├── ServerError            5xx and Anthropic's 529
│   ├── ProviderConnectionError  the connection failed or timed out
│   └── StreamError            a stream that broke, carried a malformed event or ended without its terminal event
├── InferenceCancelled         control flow: a running inference was cancelled
└── Retry                      control flow: a tool or output validator asks the model to try again
```
"""

from __future__ import annotations

from typing import Any

from ._redact import redact_secrets, redact_value

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ChainingWarning",
    "ConfigurationError",
    "GeppettoError",
    "InferenceCancelled",
    "KeyFormatError",
    "MaxIterationsError",
    "MetadataTypeError",
    "NotFoundError",
    "PrefixChangedError",
    "PreviousResponseNotFoundError",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimitError",
    "Retry",
    "ServerError",
    "SessionBusyError",
    "StoreError",
    "StreamError",
    "ToolDefinitionError",
    "TurnFormatError",
    "UsageError",
    "UsageLimitExceeded",
]


class GeppettoError(Exception):
    """Root of every error geppetto raises."""


class ChainingWarning(UserWarning):
    """Server-side state stopped saving bytes for a reason the caller can fix (Python shows it once): a
    middleware that changes the system prompt on every request makes every request send the whole Turn."""


class UsageError(GeppettoError, ValueError):
    """The caller asked for something that cannot work. The message names the fix."""


class ConfigurationError(UsageError):
    """Settings that contradict each other or are missing (a key, a model, a mode)."""


class KeyFormatError(UsageError):
    """A typed-key string that is not of the form ``namespace.name@vN``."""


class PrefixChangedError(UsageError):
    """A request would replay reasoning produced after a prefix that has changed since (``prefix_policy="error"``).

    The message names the middleware that changed the prefix and the block it changed."""


class SessionBusyError(UsageError):
    """A session already has a running inference."""


class TurnFormatError(GeppettoError):
    """A turn file or mapping that cannot be read.

    ``source`` names the file (or ``<mapping>``), ``field`` the path inside it, e.g. ``blocks[3].kind``.
    """

    def __init__(self, message: str, *, source: str = "<mapping>", field: str = "") -> None:
        self.source = source
        self.field = field
        where = f"{source}: {field}: " if field else f"{source}: "
        super().__init__(where + message)


class MetadataTypeError(GeppettoError, TypeError):
    """A typed key met a value of the wrong type, or was given a value that is not plain JSON."""


class ToolDefinitionError(GeppettoError, TypeError):
    """A Python function that cannot be turned into a tool."""


class MaxIterationsError(GeppettoError):
    """The tool loop reached ``max_iterations`` while tool calls were still pending.

    ``turn`` holds the conversation as it stood, so nothing is lost.
    """

    def __init__(self, message: str, *, turn: Any = None) -> None:
        self.turn = turn
        super().__init__(message)


class UsageLimitExceeded(GeppettoError):
    """A :class:`~geppetto.UsageLimits` limit would be passed: raised before the request that would pass it.

    ``limit`` names it (``"max_requests"``), ``value`` is the figure that passed it, ``maximum`` the limit,
    ``usage`` the totals so far (:class:`~geppetto.session.SessionUsage`) and ``turn`` the Turn with the work
    done so far (every completed step kept); the session stays usable.
    """

    def __init__(
        self, message: str, *, limit: str, value: float, maximum: float, usage: Any = None, turn: Any = None
    ) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        self.usage = usage
        self.turn = turn
        super().__init__(message)


class StoreError(GeppettoError):
    """A persistent store cannot be used as asked."""


class ProviderError(GeppettoError):
    """A provider answered with an error.

    Its message and body never hold an API key: the keys this process sent and anything shaped like one
    (``sk-...``, ``AIza...``, a long bearer token) read ``***``.

    Attributes: ``status`` (HTTP status or None), ``provider``, ``code`` and ``error_type`` (from the
    provider's error body), ``param``, ``request_id``, ``body`` (the parsed or raw error body), and
    ``turn``: set by the tool loop when a step after tool calls failed, the conversation with the tool
    results it had added (None otherwise).
    """

    status_in_label = True
    """Whether ``str()`` starts with the status (``[openai 429] ...``): false where the status is not the error."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider: str = "",
        code: str | None = None,
        error_type: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        # A provider or a proxy may quote the key it refused: hidden before the text goes anywhere.
        message = redact_secrets(message)
        self.message = message
        self.status = status
        self.provider = provider
        self.code = code
        self.error_type = error_type
        self.param = param
        self.request_id = request_id
        self.body = redact_value(body) if body is not None else None
        self.turn: Any = None
        shown = status if self.status_in_label else None
        parts = [p for p in (provider, str(shown) if shown is not None else "") if p]
        prefix = f"[{' '.join(parts)}] " if parts else ""
        suffix = f" (request id {request_id})" if request_id else ""
        super().__init__(f"{prefix}{message}{suffix}")


class AuthenticationError(ProviderError):
    """The provider refused the credentials, or none were given."""


class BadRequestError(ProviderError):
    """The provider rejected the request (400 or 422)."""


class PreviousResponseNotFoundError(BadRequestError):
    """A chained request named a ``previous_response_id`` the server no longer has."""


class NotFoundError(ProviderError):
    """The provider does not know the model, response or conversation asked for."""


class RateLimitError(ProviderError):
    """The provider asked the client to slow down (429)."""


class ServerError(ProviderError):
    """The provider failed (5xx) or is overloaded (Anthropic 529)."""


class ProviderConnectionError(ProviderError):
    """The connection to the provider failed or timed out."""


class StreamError(ProviderError):
    """A streamed answer that broke off, carried a malformed event, or ended without its terminal event.

    ``received`` says what had arrived, so the error can tell the user what was lost. ``status`` is the
    answer's status (a 200 whose stream then failed), so it is left out of the message's label.
    """

    status_in_label = False

    def __init__(self, message: str, *, received: str = "", **kwargs: Any) -> None:
        self.received = received
        full = f"{message}; received: {received}" if received else message
        super().__init__(full, **kwargs)


class InferenceCancelled(GeppettoError):
    """A running inference was cancelled; the session keeps the turn it started from."""


class Retry(GeppettoError):
    """Raised by a tool or an output validator: the model is told ``message`` and asked to try again.

    From a tool, the message is that call's error (the tool loop runs the model again); a tool that asks
    more than its ``max_retries`` times (default 2) in one inference ends it with
    :class:`~geppetto.tools.ToolCallError`. From a validator of ``Session.run(..., output=Model,
    validators=[fn])``, the message goes back as a user block and the model answers again, up to the
    output's ``max_retries`` (default 2), then :class:`~geppetto.OutputValidationError`."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)
