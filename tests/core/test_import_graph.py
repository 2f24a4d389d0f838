"""The package's modules import each other without cycles (function-level and TYPE_CHECKING imports included),
so any module can be imported first and a refactor never depends on import order; and its layers point one
way (see :data:`LAYERS`)."""

from __future__ import annotations

import ast
from pathlib import Path

import geppetto

ROOT = Path(geppetto.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(name: str, path: Path, paths: dict[str, Path]) -> set[str]:
    """The modules ``path`` (module ``name``) imports anywhere in its text, as absolute names."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            deps.update(f"{target}.{a.name}" if f"{target}.{a.name}" in paths else target for a in node.names)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names)
    return deps


def _graph() -> dict[str, set[str]]:
    """Module -> the geppetto modules it imports anywhere in its text (package ``__init__`` files left out:
    their re-exports point down, never back up)."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        if path.name != "__init__.py":
            graph[name] = _imports(name, path, paths)
    for name, deps in graph.items():
        graph[name] = {d for d in deps if d in graph} - {name}
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


LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"_exceptions", "_extras", "_json", "_redact", "_terms", "_output_schema", "_asgi"}),
    ("data model", {"turns"}),
    ("contracts", {"engine", "events", "tools", "output", "pricing", "middleware", "testing"}),
    ("engines", {"providers"}),
    ("sessions", {"session"}),
    # web: the turn report and dashboard (from the request totals a session's store keeps) and the page the
    # server serves
    ("reports", {"web"}),
    ("configuration", {"profiles", "simulator", "observability"}),
    ("runtime", {"runtime"}),  # profile -> engine with its tools; the demo tools
    ("durable", {"durable"}),  # sessions on a durable-execution engine (Temporal); `serve --temporal` uses it
    ("server", {"server"}),
    ("command", {"cli", "__main__"}),  # the command may start the server; the server never imports the command
]
"""The layers, bottom first, by the first name below ``geppetto``. A module imports its own layer and those
below it only: turns <- providers <- session <- runtime <- durable <- server <- cli. The package root re-exports and is
not a layer (any module may read ``geppetto.__version__``)."""


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "geppetto" or len(parts) == 1:
        return None
    return next(i for i, (_, names) in enumerate(LAYERS) if parts[1] in names)


def _upward_imports(paths: dict[str, Path]) -> list[str]:
    """Every import in the modules ``paths`` (``__init__`` files included) that points from a layer to one
    above it."""
    found = []
    for name, path in sorted(paths.items()):
        mine = _layer(name)
        for dep in sorted(_imports(name, path, paths)):
            theirs = _layer(dep)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(f"{name} ({LAYERS[mine][0]}) imports {dep} ({LAYERS[theirs][0]})")
    return found


def test_every_package_has_a_layer() -> None:
    packages = {
        p.relative_to(ROOT).parts[0].removesuffix(".py")
        for p in ROOT.glob("*")
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    placed = set().union(*(names for _, names in LAYERS))
    assert packages - {"__init__"} == placed


def test_the_layers_point_one_way() -> None:
    assert _upward_imports({_module_name(p): p for p in ROOT.rglob("*.py")}) == []


def test_no_server_module_imports_the_command() -> None:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    server = {n: p for n, p in paths.items() if n == "geppetto.server" or n.startswith("geppetto.server.")}
    assert "geppetto.server._serve" in server
    offending = {n: sorted(d for d in _imports(n, p, paths) if d.startswith("geppetto.cli")) for n, p in server.items()}
    assert {n: d for n, d in offending.items() if d} == {}


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "_bad.py"
    bad.write_text("def f():\n    from ..cli._app import app\n    from .. import __version__\n", encoding="utf-8")
    assert _upward_imports({"geppetto.server._bad": bad}) == [
        "geppetto.server._bad (server) imports geppetto.cli._app (command)"
    ]
