"""Docstrings and comments cite only what ships: the documentation site's pages (``docs/NAME.md``) or nothing.
A reader of an installed package has no design notes, no API write-ups kept beside the repository and no
seed documents, so ``provider-apis §2.3``, ``seed 000`` or ``DESIGN §5`` sends them nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import geppetto

ROOT = Path(geppetto.__file__).parent

UNSHIPPED = re.compile(
    r"provider-apis|upstream lessons|\bseeds? \d{3}\b|\bthe seeds'|\bDESIGN\b|\bSTYLE\.md\b|shared/reference|§\s*\d"
)
"""A citation of a document that does not ship with the package."""

NOT_YET_REWORDED: tuple[str, ...] = ()
"""Files whose citations are still to be reworded (none left)."""


def _citations(root: Path, allowed: tuple[str, ...]) -> list[str]:
    """``path:line: text`` for each line under ``root`` citing an unshipped document, outside ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name.startswith(allowed):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if UNSHIPPED.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_the_source_cites_only_documents_that_ship() -> None:
    found = _citations(ROOT, NOT_YET_REWORDED)
    assert found == [], f"cite a docs site page (docs/NAME.md) or nothing: {found}"


def test_the_scan_finds_each_kind_of_citation(tmp_path: Path) -> None:
    lines = [
        "(provider-apis §2.3 leaves it open)",
        "Pairing rules (upstream lessons 4.2)",
        "(the seeds' BuildConversationFromTurn)",
        "with thought signatures (§6)",
        "Logs follow seed 000's levels",
        "(DESIGN §5, one proof)",
        "see DESIGN.md § 3",
        "as STYLE.md says",
        "in shared/reference/recorded",
        "see docs/persistence.md",  # ships: a docs site page
        "a seed value of 000",
        "the seed's blocks",
        "the design of the chain",
    ]
    (tmp_path / "a.py").write_text("\n".join(lines), encoding="utf-8")
    (tmp_path / "skip").mkdir()
    (tmp_path / "skip" / "b.py").write_text("# seed 003\n", encoding="utf-8")
    assert [f.split(":")[1] for f in _citations(tmp_path, ("skip/",))] == ["1", "2", "3", "4", "5", "6", "7", "8", "9"]
