"""``geppetto models``: the models each profile's provider offers, read from its list endpoint
(OpenAI and Anthropic ``GET /v1/models``, Gemini ``GET /v1beta/models``; the simulator has all three)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from .._exceptions import ConfigurationError, ProviderError
from ..profiles import Profile, load_profiles
from ..runtime import EngineSettings, choose_profile, open_engine

__all__ = ["ModelList", "list_models", "profile_models"]

PAGES = 20
"""At most this many pages of a paginated list are read (thousands of models)."""


@dataclass
class ModelList:
    """One profile's models, or why they could not be listed."""

    profile: str
    provider: str
    model: str
    models: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "provider": self.provider,
            "model": self.model,
            "models": self.models,
            "error": self.error,
        }


def _get(client: httpx.Client, url: str, provider: str, **params: Any) -> Any:
    try:
        response = client.get(url, params=params or None)
    except httpx.HTTPError as exc:
        raise ProviderError(
            f"could not reach {url} ({exc}); check the base URL and the network", provider=provider
        ) from None
    if response.status_code in (401, 403):
        raise ProviderError(
            f"{url} refused the key ({response.status_code}); check the profile's key variable",
            status=response.status_code,
            provider=provider,
        )
    if response.status_code != 200:
        raise ProviderError(
            f"{url} answered {response.status_code}: {response.text[:200]}",
            status=response.status_code,
            provider=provider,
        )
    try:
        return response.json()
    except ValueError:
        raise ProviderError(f"{url} did not answer JSON", provider=provider) from None


def list_models(provider: str, base_url: str | None, api_key: str, *, timeout: float = 30) -> list[str]:
    """The model names ``provider``'s list endpoint at ``base_url`` (None: the official one) gives, in its
    order; a :class:`~geppetto.ProviderError` naming the endpoint when it fails."""
    if provider.startswith("openai"):
        from ..providers.openai_responses import DEFAULT_BASE_URL as OPENAI

        root = (base_url or OPENAI).rstrip("/")
        with httpx.Client(headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout) as client:
            body = _get(client, f"{root}/models", "openai")
        return [str(m["id"]) for m in body.get("data") or [] if isinstance(m, dict) and "id" in m]
    if provider == "anthropic":
        from ..providers.anthropic import ANTHROPIC_VERSION
        from ..providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC

        root = (base_url or ANTHROPIC).rstrip("/")
        names: list[str] = []
        headers = {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}
        with httpx.Client(headers=headers, timeout=timeout) as client:
            after: dict[str, Any] = {}
            for _ in range(PAGES):
                body = _get(client, f"{root}/v1/models", "anthropic", limit=1000, **after)
                names += [str(m["id"]) for m in body.get("data") or [] if isinstance(m, dict) and "id" in m]
                if not body.get("has_more") or not body.get("last_id"):
                    break
                after = {"after_id": body["last_id"]}
        return names
    from ..providers.gemini import DEFAULT_BASE_URL as GEMINI

    root = (base_url or GEMINI).rstrip("/")
    names = []
    with httpx.Client(headers={"x-goog-api-key": api_key}, timeout=timeout) as client:
        token: dict[str, Any] = {}
        for _ in range(PAGES):
            body = _get(client, f"{root}/v1beta/models", "gemini", pageSize=1000, **token)
            for m in body.get("models") or []:
                # only the models that answer generateContent, which is what the engine calls
                if isinstance(m, dict) and "generateContent" in (m.get("supportedGenerationMethods") or []):
                    names.append(str(m.get("name", "")).removeprefix("models/"))
            if not body.get("nextPageToken"):
                break
            token = {"pageToken": body["nextPageToken"]}
    return names


def _one(profile: Profile) -> ModelList:
    with open_engine(profile) as opened:
        models = list_models(profile.provider, opened.base_url, opened.api_key)
    return ModelList(profile.name, profile.provider, profile.model, models)


def profile_models(settings: EngineSettings, *, every: bool) -> list[ModelList]:
    """The models of the profile the flags choose; with ``every``, of every profile in the file (sim
    included), a profile that cannot be listed (no key, unreachable) carrying its error instead."""
    if not every:
        return [_one(choose_profile(settings))]
    profiles, _ = load_profiles()
    out = []
    for profile in profiles.values():
        try:
            if profile.problem is not None:
                raise ConfigurationError(profile.problem)
            out.append(_one(profile))
        except (ConfigurationError, ProviderError) as exc:
            out.append(ModelList(profile.name, profile.provider, profile.model, error=str(exc)))
    return out


def render_models(rows: list[ModelList], *, json_out: bool) -> None:
    """A table (the profile's own model marked ``*``), or JSON; errors of single profiles on stderr."""
    import json
    import sys

    from rich.table import Table

    from ._console import stdout_console

    if json_out:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    table = Table(title="models (* the profile's model)")
    for column in ("profile", "provider", "models"):
        table.add_column(column, overflow="fold")
    for r in rows:
        shown = ", ".join(f"{m}*" if m == r.model else m for m in r.models) if r.error is None else "(see below)"
        table.add_row(r.profile, r.provider, shown or "(none listed)")
    stdout_console().print(table)
    for r in rows:
        if r.error is not None:
            print(f"warning: profile {r.profile!r}: {r.error}", file=sys.stderr)
