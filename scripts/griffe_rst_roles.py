"""A griffe extension for the documentation site: geppetto's docstrings, written with Sphinx roles for
``help()`` readers, read as the Markdown that mkdocstrings renders.

- A role (``:class:`~geppetto.UsageLimits```, ``:meth:`sweep```) that names a public object becomes a
  cross-reference to where the API reference documents it, resolved in the docstring's scope the way
  Python would resolve the name.
- A role that names something the reference does not document (a private module's helper, the standard
  library, a dependency: no inventory is fetched, the build is offline) becomes inline code, and so does a
  private path that names nothing (private modules move; the reference is not about them).
- A public name that names nothing (a typo, a name since removed) stays a cross-reference, so
  ``mkdocs build --strict`` fails on it.
- A docstring's first paragraph is joined into one line (the summary tables show the first line).
- A doctest (lines from ``>>>`` to the next blank line) becomes a ``pycon`` code block, not a quote, and a
  literal block (``Example::`` and the indented lines after it) a fenced code block.

``mkdocs.yml`` loads it (``extensions: [scripts/griffe_rst_roles.py]``); the package never imports it.
"""

from __future__ import annotations

import builtins
import importlib.util
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from griffe import Alias, AliasResolutionError, Extension, GriffeLoader, Module, NameResolutionError, Object

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|type):`([^`]+)`")
LIST_OR_CODE = re.compile(r"^\s*(```|>>>|[-*+|] |\d+[.)] )|^\s{4}")
RENDERED = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)
TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^>]+)>$")


def _target(obj: Object | Alias) -> Object | None:
    if isinstance(obj, Alias):
        try:
            return obj.final_target
        except AliasResolutionError:
            return None
    return obj


def _documented(module: Module, out: set[str], *, recurse: bool) -> None:
    """The paths of every object the reference documents in ``module``: what it exports, with the public
    members of the classes among them (by the object's own path, wherever it is defined); with
    ``recurse``, its public submodules' too."""
    out.add(module.path)
    for name, member in module.members.items():
        if name.startswith("_"):
            continue
        if not member.is_alias and member.is_module:
            if recurse:
                _documented(member, out, recurse=True)  # type: ignore[arg-type]
        elif member.is_public and (target := _target(member)) is not None and not target.is_module:
            _add(target, out)


def _add(obj: Object, out: set[str]) -> None:
    out.add(obj.path)
    if obj.is_class:
        for name, member in obj.members.items():
            if not name.startswith("_") and (target := _target(member)) is not None:
                _add(target, out)


def _objects(obj: Object) -> Iterator[Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)  # type: ignore[arg-type]


def _external(name: str, root: str) -> bool:
    first = name.split(".", 1)[0]
    if first == root:
        return False
    if hasattr(builtins, first):
        return True
    try:
        return importlib.util.find_spec(first) is not None
    except (ImportError, ValueError):
        return False


def _lookup(name: str, scope: Object, loader: GriffeLoader) -> Object | None:
    """The object ``name`` names, seen from ``scope``, or None."""
    first, _, rest = name.partition(".")
    try:
        path = name if first == scope.package.name else scope.resolve(first) + (f".{rest}" if rest else "")
        return _target(loader.modules_collection[path])
    except (NameResolutionError, KeyError, ValueError, AliasResolutionError):
        return None


def _role(scope: Object, loader: GriffeLoader, documented: set[str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        text = match.group(1).strip()
        titled = TITLED.match(text)
        if titled:
            title, name = titled.group("title"), titled.group("target")
        elif text.startswith("~"):
            name = text[1:]
            title = name.rsplit(".", 1)[-1]
        else:
            title = name = text
        name = name.removesuffix("()")
        found = _lookup(name, scope, loader)
        if found is not None and found.path in documented:
            return f"[`{title}`][{found.path}]"
        if (
            found is not None
            or _external(name, scope.package.name)
            or any(part.startswith("_") for part in name.split("."))
        ):
            return f"`{title}`"
        return f"[`{title}`][{name}]"  # names nothing: the strict build reports it

    return replace


def _fence_doctests(text: str) -> str:
    out: list[str] = []
    indent = ""
    in_doctest = False
    for line in text.splitlines():
        if not in_doctest and line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            in_doctest = True
        elif in_doctest and not line.strip():
            out.append(f"{indent}```")
            in_doctest = False
        out.append(line)
    if in_doctest:
        out.append(f"{indent}```")
    return "\n".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _fence_literal_blocks(text: str) -> str:
    """``Example::`` and the indented block after it: ``Example:`` and a fenced block (Markdown would show
    the ``::`` and read a block indented under a list item as part of the item)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.rstrip().endswith("::") or not line.strip(":").strip():
            out.append(line)
            continue
        stem = line.rstrip()[:-2]
        out.append(stem.rstrip() if stem.endswith(" ") else f"{stem}:")
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > _indent(line)):
            block.append(lines[i])
            i += 1
        body = "\n".join(block).strip("\n").splitlines()
        if not body:
            continue
        cut = min(_indent(b) for b in body if b.strip())
        pad = " " * _indent(line)
        out += ["", f"{pad}```", *(f"{pad}{b[cut:]}" if b.strip() else "" for b in body), f"{pad}```", ""]
    return "\n".join(out)


def _one_line_summary(text: str) -> str:
    """The first paragraph on one line: the reference's summary tables show a docstring's first line only,
    and a summary wrapped at 120 columns would be cut mid-sentence. Markdown renders both the same."""
    first, sep, rest = text.partition("\n\n")
    lines = first.splitlines()
    if any(LIST_OR_CODE.match(line) for line in lines):
        return text
    return " ".join(line.strip() for line in lines) + sep + rest


def _rendered_modules(reference: Path) -> list[str]:
    """The modules the reference's pages render (their ``::: module`` lines)."""
    pages = sorted(reference.glob("**/*.md"))
    return [m.group(1) for page in pages for m in RENDERED.finditer(page.read_text(encoding="utf-8"))]


class RstRoles(Extension):
    """Rewrites every docstring of the package once it is loaded.

    ``reference``: the folder of the API reference's pages; a name links only if one of their ``::: module``
    lines renders it (a public module without a page is then code, not a broken link). Without it, every
    public module of the package counts as documented.
    """

    def __init__(self, reference: str | None = None) -> None:
        super().__init__()
        self.reference = Path(reference) if reference else None

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        documented: set[str] = set()
        if self.reference is None:
            _documented(pkg, documented, recurse=True)
        for path in _rendered_modules(self.reference) if self.reference else []:
            if path.split(".", 1)[0] == pkg.name:
                _documented(loader.modules_collection[path], documented, recurse=False)
        for obj in _objects(pkg):
            if obj.docstring is not None:
                text = ROLE.sub(_role(obj, loader, documented), obj.docstring.value)
                obj.docstring.value = _one_line_summary(_fence_literal_blocks(_fence_doctests(text)))
