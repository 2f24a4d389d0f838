"""The page "How the code is organized" (docs/organization.md) names real modules and functions: every path,
``module.function`` and ``Class.member`` it quotes exists in the source, so a module moved or a function
renamed without the page following fails here."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "geppetto"
PAGE = REPO / "docs" / "organization.md"


@functools.cache
def _definitions() -> tuple[dict[str, set[str]], dict[str, set[str]], set[str]]:
    """Module stem -> the names defined anywhere in it; class name -> its members; every string constant."""
    modules: dict[str, set[str]] = {}
    classes: dict[str, set[str]] = {}
    strings: set[str] = set()
    for path in SRC.rglob("*.py"):
        names = modules.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
            if isinstance(node, ast.ClassDef):
                members = classes.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        members.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        members.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        members.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return modules, classes, strings


def _missing(text: str) -> list[str]:
    """The quoted paths and names of ``text`` (a page) that the source does not have."""
    modules, classes, strings = _definitions()
    defined = set().union(*modules.values()) | {p.name for p in SRC.rglob("*") if p.is_dir()}
    files = [p.relative_to(SRC).as_posix() for p in SRC.rglob("*")] + [
        p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("*.py")
    ]
    missing = []
    for span in sorted(set(re.findall(r"`([^`\n]+)`", text))):
        name = re.sub(r"\(.*\)$", "", span)
        if re.fullmatch(r"[\w/]+(\.py|/)", name):
            found = any(f == name.rstrip("/") or f.endswith("/" + name.rstrip("/")) for f in files)
        elif re.fullmatch(r"[A-Z]\w*\.\w+", name):
            owner, member = name.split(".")
            found = member in classes.get(owner, set())
        elif re.fullmatch(r"_?[a-z]\w*\.\w+", name):
            module, member = name.split(".")
            found = member in modules.get(module, set())
        elif re.fullmatch(r"_[a-z]\w*|[a-z]+(_[a-z0-9]+)+", name):
            found = name in defined or name in modules or name in strings
        else:
            continue  # prose in code type (a route, an arrow, a keyword): nothing to look up
        if not found:
            missing.append(span)
    return missing


def test_the_organization_page_names_what_the_source_has() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "`_request.plan_request`" in text and "`SQLTurnStore.save_snapshot`" in text  # the walks are quoted
    assert _missing(text) == [], "the page names what the source no longer has: update docs/organization.md"


def test_the_check_finds_a_renamed_function_module_member_and_path() -> None:
    page = (
        "`_request.plan_request` `_request.plan_gone` `Session.prompt` `Session.vanished` `session/_session.py` "
        "`session/_nowhere.py` `plan_chained` `plan_never_written` `run_started` `POST /api/x` `Turn -> Turn`"
    )
    assert _missing(page) == ["Session.vanished", "_request.plan_gone", "plan_never_written", "session/_nowhere.py"]
