"""Checks of the settings a ``ResponsesEngine`` is made with that no other part owns; each error names the fix."""

from __future__ import annotations

from geppetto._exceptions import ConfigurationError

from ._state import MODES

__all__ = ["check_counts", "check_mode"]


def check_counts(*, compact_threshold: int | None, validate_every: int | None) -> None:
    """Raise ConfigurationError for a compaction threshold or a validation period the engine cannot use."""
    if compact_threshold is not None and (
        not isinstance(compact_threshold, int) or isinstance(compact_threshold, bool) or compact_threshold < 1000
    ):
        raise ConfigurationError(
            f"compact_threshold={compact_threshold!r}: pass a number of tokens of at least 1000 (the API's "
            "minimum), or None for no in-request compaction"
        )
    if validate_every is not None and validate_every < 1:
        raise ConfigurationError("validate_every must be a positive number of requests (or None for never)")


def check_mode(mode: str | None, *, store: bool, on_previous_not_found: str) -> None:
    """Raise ConfigurationError for an unknown mode, a stateful mode without ``store`` or an unknown
    ``on_previous_not_found``."""
    if mode is not None and mode not in MODES:
        raise ConfigurationError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if not store and mode in ("chained", "conversation"):
        raise ConfigurationError(
            f"mode={mode!r} needs the server to store responses; pass store=True or use mode='stateless'"
        )
    if on_previous_not_found not in ("resend", "raise"):
        raise ConfigurationError("on_previous_not_found must be 'resend' or 'raise'")
