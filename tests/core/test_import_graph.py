"""The package's modules import each other without cycles (function-level and TYPE_CHECKING imports included),
so any module can be imported first and a refactor never depends on import order."""

from __future__ import annotations

import ast
from pathlib import Path

import geppetto

ROOT = Path(geppetto.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Module -> the geppetto modules it imports anywhere in its text (package ``__init__`` files left out:
    their re-exports point down, never back up)."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        if path.name == "__init__.py":
            continue
        package = name.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, node.module] if node.module else base)
                deps.update(f"{target}.{a.name}" if f"{target}.{a.name}" in paths else target for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in graph or (d in paths and paths[d].name != "__init__.py")} - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None."""
    done: set[str] = set()
    for start in graph:
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for dep in graph.get(node, ()):
                if dep == start:
                    return [*path, dep]
                if dep not in path and dep not in done:
                    stack.append((dep, [*path, dep]))
        done.add(start)
    return None


def test_the_modules_import_each_other_without_cycles() -> None:
    graph = _graph()
    assert "geppetto.providers.openai_responses._send" in graph  # the walk sees the package
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
