"""docs/engines.md lists every engine option of every family, with its default, exactly as the settings
dataclasses declare them: an option added to a family (and so to profiles and ``-o``) shows up in the docs."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from geppetto.providers.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Engine options: profiles, `-o` and `engine.settings`"


def _yaml(value: Any) -> str:
    """A default as the docs (and a profile) write it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[]" if not value else repr(list(value))
    return str(value)


def _documented() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    text = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for block in section.split("\n### ")[1:]:
        heading, _, body = block.partition("\n")
        family, cls = re.fullmatch(r"(\S+) \(`(\w+)`\)", heading.strip()).groups()  # type: ignore[union-attr]
        rows = re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", body, flags=re.MULTILINE)
        found[family] = (cls, rows)
    return found


def test_every_family_and_every_option_is_listed_with_its_default() -> None:
    documented = _documented()
    assert list(documented) == list(SETTINGS)
    for family, cls in SETTINGS.items():
        name, rows = documented[family]
        assert name == cls.__name__
        assert rows == [(f.name, _yaml(f.default)) for f in fields(cls)], family


def test_the_profile_example_in_the_section_loads_and_builds(tmp_path: Path) -> None:
    from geppetto.profiles import build_engine, load_profiles

    text = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8").split(SECTION, 1)[1]
    (example,) = re.findall(r"```yaml\n(.*?)```", text.split("\n### ", 1)[0], flags=re.DOTALL)
    (tmp_path / "profiles.yaml").write_text(example)
    profiles, _ = load_profiles(tmp_path / "profiles.yaml")
    engine = build_engine(profiles["work"], api_key="k", base_url="http://127.0.0.1:9")
    assert engine.settings.options() == {  # type: ignore[attr-defined]
        "mode": "conversation",
        "compact_threshold": 200000,
        "prefix_policy": "error",
        "prompt_cache_key": "team-cache",
        "delete_replaced_conversations": True,
        "background": True,
    }
