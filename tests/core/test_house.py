"""The house's arrows and shapes: nothing under ``session/`` imports the web dashboard (the request totals a
store keeps are computed in ``session/`` and the dashboard reads them there), and the SQL store is one class
given a dialect, not a chain of base classes (at most two levels of the project's own under
``session/stores/``); a subpackage's private modules are its own: the rest of the package imports what it
needs from the subpackage itself (its ``__init__`` names its internal API, apart from ``__all__``), so a
subpackage can be reorganized without touching its neighbours; the Responses engine is a handful of modules
a reader can name, one request's way through them does not keep coming back (``scripts/turn_walk.py``), and
the Gemini Interactions engine shares what it shares with it through ``providers/_stateful``, not through its
private modules."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

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


MAX_PRIVATE_REACHES = 1
"""Imports of another subpackage's private module, at most. The one left: the server's ``/metrics`` builds
its Prometheus instruments with the exporter ``providers/_stateful`` keeps for the engines' metrics."""


def _private_reaches(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """``importer -> module`` for each import (anywhere in a module) of a private module ``geppetto.X._m``
    from a module outside ``geppetto.X``, the package that holds it: ``from ..turns._cow import Frozen`` in
    ``geppetto.session._store`` is one, ``from ._cow import Frozen`` in ``geppetto.turns`` is not, and so is
    ``from ..turns import _cow``."""
    found = []
    for module, (text, is_package) in sorted(sources.items()):
        package = _package_of(module, is_package)
        for node in ast.walk(ast.parse(text)):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                target = _absolute(package, node)
                modules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in sources]
                targets = modules + ([target] if len(modules) < len(node.names) else [])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                parts = target.split(".")
                private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
                if parts[0] != "geppetto" or not private:
                    continue
                owner = ".".join(parts[: private[0]])
                if module != owner and not module.startswith(owner + "."):
                    found.append(f"{module} -> {'.'.join(parts[: private[0] + 1])}")
    return found


def test_few_imports_reach_into_another_subpackages_private_modules() -> None:
    found = _private_reaches(_sources(ROOT))
    assert "geppetto.session._store -> geppetto.turns._cow" not in found  # the session reads turns' face
    assert len(found) <= MAX_PRIVATE_REACHES, (
        f"{len(found)} imports reach into another subpackage's private module (at most {MAX_PRIVATE_REACHES}): "
        "import the name from the subpackage itself, adding it to the internal API its __init__ declares. "
        + "\n".join(found)
    )


def test_the_private_reach_scan_sees_each_form_and_spares_a_package_its_own() -> None:
    sources = {
        "geppetto.turns": ("from ._cow import Frozen as Frozen\n", True),
        "geppetto.turns._cow": ("from ._model import Block\n", False),
        "geppetto.turns._model": ("", False),
        "geppetto.session._a": ("from ..turns._cow import Frozen\nfrom ..turns import Frozen\n", False),
        "geppetto.session._b": ("def f():\n    import geppetto.turns._model\n", False),
        "geppetto.session._c": ("from ..turns import _cow\nfrom . import _a\n", False),
        "geppetto.session.stores._d": ("from .._a import x\nfrom ...providers.p._q import y\n", False),
    }
    assert _private_reaches(sources) == [
        "geppetto.session._a -> geppetto.turns._cow",
        "geppetto.session._b -> geppetto.turns._model",
        "geppetto.session._c -> geppetto.turns._cow",
        "geppetto.session.stores._d -> geppetto.providers.p._q",
    ]


def _internal_names(text: str) -> list[str]:
    """The names a package ``__init__`` imports as ``name as name`` and leaves out of its ``__all__``."""
    tree = ast.parse(text)
    exported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = set(ast.literal_eval(node.value))
    return [
        a.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for a in node.names
        if a.asname == a.name and a.name not in exported
    ]


def test_a_package_that_hands_out_internal_names_says_so() -> None:
    sources = _sources(ROOT)
    quiet = []
    for module, (text, is_package) in sorted(sources.items()):
        names = _internal_names(text) if is_package else []
        if names and "internal API" not in (ast.get_docstring(ast.parse(text)) or ""):
            quiet.append(f"{module}: {names}")
    assert "Frozen" in _internal_names(sources["geppetto.turns"][0])
    assert quiet == [], f"say in the package's docstring which names are its internal API: {quiet}"


RESPONSES = ROOT / "providers" / "openai_responses"


def _private_imports_of(sources: dict[str, tuple[str, bool]], package: str) -> list[str]:
    """``module: imported`` for each import in ``sources`` of a private module under ``package`` (a module whose
    own name starts with ``_``), wherever it is (function-level and TYPE_CHECKING ones too)."""
    found = []
    for module, (text, is_package) in sorted(sources.items()):
        here = _package_of(module, is_package)
        for node in ast.walk(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                target = _absolute(here, node)
                names = [target, *(f"{target}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            hits = sorted(
                n for n in names if n.startswith(f"{package}.") and n[len(package) + 1 :].split(".")[0].startswith("_")
            )
            if hits:
                found.append(f"{module}: {hits[0]}")
    return found


def test_the_responses_engine_has_at_most_ten_modules() -> None:
    modules = sorted(p.name for p in RESPONSES.glob("*.py"))
    assert "_engine.py" in modules  # the glob sees the package
    assert len(modules) <= 10, f"providers/openai_responses/ has {len(modules)} modules (at most 10): {modules}"


def test_the_interactions_engine_imports_nothing_private_from_the_responses_engine() -> None:
    found = _private_imports_of(_sources(ROOT / "providers" / "gemini"), "geppetto.providers.openai_responses")
    assert found == [], f"gemini/ reaches into openai_responses' private modules (use providers/_stateful): {found}"


def test_the_private_import_scan_sees_relative_absolute_and_function_level_imports() -> None:
    sources = {
        "geppetto.providers.gemini.a": ("from ..openai_responses._state import get_state\n", False),
        "geppetto.providers.gemini.b": ("def f():\n    from ..openai_responses import _send\n", False),
        "geppetto.providers.gemini.c": ("import geppetto.providers.openai_responses._items\n", False),
        "geppetto.providers.gemini.d": ("from ..openai_responses import ResponsesEngine\n", False),
        "geppetto.providers.gemini.e": ("from .._stateful import metrics\n", False),
    }
    found = _private_imports_of(sources, "geppetto.providers.openai_responses")
    assert [f.split(":")[0] for f in found] == [
        "geppetto.providers.gemini.a",
        "geppetto.providers.gemini.b",
        "geppetto.providers.gemini.c",
    ]


def test_one_request_enters_each_responses_module_at_most_three_times() -> None:
    walk = _turn_walk()
    order = walk.walk(walk.load(ROOT.parent))
    entries = walk.entries_of(order)
    start = "geppetto.providers.openai_responses._engine"
    assert order[0][:2] == (start, "ResponsesEngine.run_inference")
    assert {"_request", "_send", "_answer"} <= {m.rsplit(".", 1)[-1] for m in entries}  # the walk reaches them
    over = {m: n for m, n in entries.items() if n > 3}
    assert over == {}, f"modules one request enters more than three times (python scripts/turn_walk.py --calls): {over}"


def _turn_walk() -> Any:
    """``scripts/turn_walk.py``, loaded from the checkout (it is a script, not part of the package)."""
    path = ROOT.parents[1] / "scripts" / "turn_walk.py"
    if not path.exists():
        pytest.skip("not a checkout: scripts/ does not ship with the package")
    spec = importlib.util.spec_from_file_location("turn_walk", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["turn_walk"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_the_turn_walk_counts_an_entry_for_each_function_first_reached_from_another_module() -> None:
    walk = _turn_walk()
    order = [("m.a", "f", ""), ("m.b", "g", "m.a"), ("m.b", "h", "m.b"), ("m.a", "k", "m.b"), ("m.b", "j", "m.a")]
    assert walk.entries_of(order) == {"m.a": 2, "m.b": 2}
