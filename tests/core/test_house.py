"""The house's arrows and shapes: nothing under ``session/`` imports the web dashboard (the request totals a
store keeps are computed in ``session/`` and the dashboard reads them there), and the SQL store is one class
given a dialect, not a chain of base classes (at most two levels of the project's own under
``session/stores/``)."""

from __future__ import annotations

import ast
from pathlib import Path

import geppetto

ROOT = Path(geppetto.__file__).parent


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rsplit(".", 1)[0]


def _absolute(package: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``import from`` names (relative ones resolved against ``package``)."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _sources(folder: Path) -> dict[str, tuple[str, bool]]:
    """Module name -> (its text, whether it is a package's ``__init__``) for every module under ``folder``."""
    return {_module_of(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py") for p in folder.rglob("*.py")}


def _web_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """``module: imported`` for each import of ``geppetto.web`` (or below it) in ``sources``, wherever in the
    module it is (function-level and TYPE_CHECKING ones too), absolute or relative."""
    found = []
    for module, (text, is_package) in sorted(sources.items()):
        package = _package_of(module, is_package)
        for node in ast.walk(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                target = _absolute(package, node)
                names = [target, *(f"{target}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            hits = sorted({n for n in names if n == "geppetto.web" or n.startswith("geppetto.web.")})
            if hits:
                found.append(f"{module}: {hits[0]}")
    return found


def _class_depths(sources: dict[str, tuple[str, bool]]) -> dict[str, int]:
    """``module.Class`` -> the longest chain of the project's own classes (those in ``sources``) above it,
    following each base class through the names the module imports."""
    bases: dict[str, list[str]] = {}
    for module, (text, is_package) in sources.items():
        package = _package_of(module, is_package)
        tree = ast.parse(text)
        local: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _absolute(package, node)
                local.update({a.asname or a.name: f"{target}.{a.name}" for a in node.names})
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                local.setdefault(node.name, f"{module}.{node.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                named = [b.id for b in node.bases if isinstance(b, ast.Name)]
                bases[f"{module}.{node.name}"] = [local.get(n, n) for n in named]

    def _resolve(name: str) -> str | None:
        # a class re-exported by a package's __init__ is looked up where it is defined
        if name in bases:
            return name
        short = name.rsplit(".", 1)[-1]
        defined = [c for c in bases if c.rsplit(".", 1)[-1] == short and c.startswith(name.rsplit(".", 1)[0])]
        return defined[0] if len(defined) == 1 else None

    depths: dict[str, int] = {}

    def depth(cls: str, seen: frozenset[str] = frozenset()) -> int:
        if cls not in depths:
            above = [c for c in (_resolve(b) for b in bases[cls]) if c is not None and c not in seen]
            depths[cls] = max((1 + depth(c, seen | {cls}) for c in above), default=0)
        return depths[cls]

    for cls in bases:
        depth(cls)
    return depths


def test_nothing_under_session_imports_the_web_dashboard() -> None:
    found = _web_imports(_sources(ROOT / "session"))
    assert found == [], f"session/ must not import geppetto.web (compute it in session/, web reads it): {found}"


def test_the_web_import_scan_sees_absolute_relative_and_function_level_imports() -> None:
    sources = {
        "geppetto.session.a": ("from ..web import session_report\n", False),
        "geppetto.session.stores.b": ("def f():\n    from ...web._report import plural\n", False),
        "geppetto.session.c": ("import geppetto.web\n", False),
        "geppetto.session.d": ("from .. import web\n", False),
        "geppetto.session.e": ("from .._totals import add_totals\nfrom ..turns import Turn\n", False),
    }
    assert [f.split(":")[0] for f in _web_imports(sources)] == [
        "geppetto.session.a",
        "geppetto.session.c",
        "geppetto.session.d",
        "geppetto.session.stores.b",
    ]


def test_no_sql_store_class_sits_below_more_than_two_levels_of_project_classes() -> None:
    depths = _class_depths(_sources(ROOT / "session" / "stores"))
    stores = "geppetto.session.stores"
    assert depths[f"{stores}._sqlite.SQLiteTurnStore"] == 1  # the scan follows the import of SQLTurnStore
    assert depths[f"{stores}._postgres.PostgresTurnStore"] == 1
    deep = {cls: n for cls, n in depths.items() if n > 2}
    assert deep == {}, f"classes under session/stores/ deeper than two levels of project base classes: {deep}"


def test_the_class_depth_scan_follows_imports_across_modules() -> None:
    sources = {
        "geppetto.s.a": ("class A:\n    pass\nclass B(A):\n    pass\n", False),
        "geppetto.s.b": ("from .a import B\nclass C(B):\n    pass\nclass D(C, dict):\n    pass\n", False),
    }
    depths = _class_depths(sources)
    assert [depths[f"geppetto.s.{c}"] for c in ("a.A", "a.B", "b.C", "b.D")] == [0, 1, 2, 3]
