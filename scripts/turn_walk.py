"""Follow one request through ``providers/openai_responses/`` as a reader would: from
``ResponsesEngine.run_inference``, every call that passes the ``turn`` on, and so on through the callee's
parameter that received it. Prints how many times the walk enters each module (a call from a function in
one module into a function of another), and the calls themselves with ``--calls``.

    python scripts/turn_walk.py            # the package under src/
    python scripts/turn_walk.py --calls    # and each cross-module call, caller -> callee
    python scripts/turn_walk.py --check    # exit 1 when a module is entered more than --most times (3)
    python scripts/turn_walk.py --src OTHER/src   # another checkout, to compare layouts

The walk is static (the AST only, nothing is imported). A call is followed when the turn is one of its
arguments (positional or keyword) and the callee can be named: a function of the same module, a name
imported from a sibling module (or from ``providers/`` beside it), ``self.method``, or ``obj.method`` when
exactly one class of the package (Protocols left out) defines ``method``: the engine hands itself to the
sending code as ``engine`` and is called back. The walk reads depth first, each call in the order of the
text, each function once (a second call to a function already read costs the reader nothing); a module is
entered each time a call from another module reaches one of its functions not read yet.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "geppetto.providers.openai_responses"
START = ("_engine", "ResponsesEngine.run_inference", "turn")

Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Module:
    name: str  # short: "_engine", or "..providers._stateful" style for modules beside the package
    functions: dict[str, Func] = field(default_factory=dict)  # "f" or "Class.m"
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # local name -> (module, name)
    protocols: set[str] = field(default_factory=set)


def _load(path: Path, name: str, package: str) -> Module:
    module = Module(name)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            module.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            if any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases):
                module.protocols.add(node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    module.functions[f"{node.name}.{item.name}"] = item
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                module.imported[alias.asname or alias.name] = (base, alias.name)
    return module


def load(src: Path) -> dict[str, Module]:
    """The package's modules and those beside it in ``providers/``, by absolute name."""
    folder = src / Path(*PACKAGE.split("."))
    modules: dict[str, Module] = {}
    for path in sorted(folder.glob("*.py")):
        if path.name != "__init__.py":
            name = f"{PACKAGE}.{path.stem}"
            modules[name] = _load(path, name, PACKAGE)
    parent = PACKAGE.rsplit(".", 1)[0]
    for path in sorted(folder.parent.glob("_*.py")):
        name = f"{parent}.{path.stem}"
        modules[name] = _load(path, name, parent)
    return modules


def _params(func: Func, method: bool) -> list[str]:
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    return names[1:] if method and names and names[0] in ("self", "cls") else names


def _receiving(call: ast.Call, tracked: str, params: list[str], kwonly: list[str]) -> str | None:
    """The callee's parameter that receives the tracked name in ``call``, or None."""
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Name) and arg.id == tracked and i < len(params):
            return params[i]
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name) and kw.value.id == tracked and kw.arg in (*params, *kwonly):
            return kw.arg
    return None


def walk(modules: dict[str, Module]) -> list[tuple[str, str, str]]:
    """The functions the turn passes through, (module, function, the caller's module), in the order a reader
    following it meets them: depth first, each call in the order of the text, each function read once."""
    methods: dict[str, list[tuple[str, str]]] = {}
    for name, module in modules.items():
        for key in module.functions:
            if "." in key and key.split(".")[0] not in module.protocols:
                methods.setdefault(key.split(".")[1], []).append((name, key))

    def resolve(module: Module, cls: str | None, call: ast.Call) -> tuple[str, str] | None:
        fn = call.func
        if isinstance(fn, ast.Name):
            if fn.id in module.functions:
                return module.name, fn.id
            target = module.imported.get(fn.id)
            if target and target[0] in modules and target[1] in modules[target[0]].functions:
                return target
            return None
        if isinstance(fn, ast.Attribute):
            if isinstance(fn.value, ast.Name) and fn.value.id == "self" and cls:
                key = f"{cls}.{fn.attr}"
                if key in module.functions:
                    return module.name, key
            found = methods.get(fn.attr, [])
            if len(found) == 1:
                return found[0]
        return None

    order: list[tuple[str, str, str]] = []  # the functions in the order a reader meets them
    read: set[tuple[str, str]] = set()

    def visit(callee: tuple[str, str], tracked: str, caller: str) -> None:
        # each function is read once: a second call to it costs the reader nothing
        if callee in read:
            return
        read.add(callee)
        order.append((*callee, caller))
        module = modules[callee[0]]
        cls = callee[1].split(".")[0] if "." in callee[1] else None
        calls = [n for n in ast.walk(module.functions[callee[1]]) if isinstance(n, ast.Call)]
        for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):  # in the order the text reads
            target = resolve(module, cls, node)
            if target is None:
                continue
            func = modules[target[0]].functions[target[1]]
            param = _receiving(node, tracked, _params(func, "." in target[1]), [a.arg for a in func.args.kwonlyargs])
            if param is not None:
                visit(target, param, callee[0])

    start = f"{PACKAGE}.{START[0]}"
    visit((start, START[1]), START[2], "")
    return order


def entries_of(order: list[tuple[str, str, str]]) -> Counter[str]:
    """How many times the reading enters each module: once for each function of it first reached by a call
    from another module (the start counts as entering its module)."""
    return Counter(module for module, _, caller in order if caller != module)


def _short(name: str) -> str:
    return name.removeprefix(PACKAGE + ".").removeprefix("geppetto.providers.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    parser.add_argument("--calls", action="store_true", help="print each cross-module call")
    parser.add_argument("--check", action="store_true", help="exit 1 when a module is entered too often")
    parser.add_argument("--most", type=int, default=3, help="the most entries --check allows (3)")
    args = parser.parse_args(argv)
    order = walk(load(args.src))
    entries = entries_of(order)
    if args.calls:
        for module, function, caller in order:
            mark = "->" if caller != module else "  "
            print(f"  {mark} {_short(module)}.{function}")
    width = max((len(_short(m)) for m in entries), default=0)
    for module, n in sorted(entries.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{_short(module):<{width}}  {n}")
    over = {m: n for m, n in entries.items() if n > args.most}
    if args.check and over:
        print(f"entered more than {args.most} times: {', '.join(sorted(map(_short, over)))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
