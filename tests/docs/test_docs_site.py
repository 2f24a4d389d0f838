"""The documentation site's docstring reader (scripts/griffe_rst_roles.py): a role naming a documented object
links to it, one naming a private or outside object is code, one naming nothing stays a reference (so the
strict build fails on it), literal blocks and doctests become code blocks, and a summary is one line. `make docs-check` builds
the site itself."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

griffe = pytest.importorskip("griffe", reason="the documentation site needs the docs extra")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "griffe_rst_roles.py"

PACKAGE = '''"""The package. See :class:`~pkg.Thing`, :func:`pkg._impl.helper`, :exc:`KeyError`,
:meth:`Thing.go <pkg.Thing.go>`, :class:`pkg.Missing` and :func:`pkg._gone.old`.

Example::

    x = 1

    y = 2

Then:

>>> 1 + 1
2
"""

from ._impl import Thing, helper

__all__ = ["Thing"]
'''

IMPL = '''class Thing:
    """A thing: :meth:`go` runs it; :class:`Hidden` is internal."""

    def go(self) -> None:
        """Go."""


class Hidden:
    """Two kinds:
    - this one,
    - that one."""


def helper() -> None:
    """Help."""
'''


def _extension() -> ModuleType:
    spec = importlib.util.spec_from_file_location("griffe_rst_roles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_roles_become_links_code_or_broken_references_and_blocks_become_code(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(PACKAGE, encoding="utf-8")
    (tmp_path / "pkg" / "_impl.py").write_text(IMPL, encoding="utf-8")
    extensions = griffe.load_extensions(_extension().RstRoles())
    pkg = griffe.load("pkg", search_paths=[str(tmp_path)], extensions=extensions)

    assert pkg.docstring.value == (
        "The package. See [`Thing`][pkg._impl.Thing], `pkg._impl.helper`, `KeyError`, "  # one line: the summary
        "[`Thing.go`][pkg._impl.Thing.go], [`pkg.Missing`][pkg.Missing] and `pkg._gone.old`.\n"
        "\n"
        "Example:\n"
        "\n"
        "```\n"
        "x = 1\n"
        "\n"
        "y = 2\n"
        "```\n"
        "\n"
        "Then:\n"
        "\n"
        "```pycon\n"
        ">>> 1 + 1\n"
        "2\n"
        "```"
    )
    # Relative names resolve in the docstring's scope, as Python would resolve them.
    assert pkg["Thing"].docstring.value == "A thing: [`go`][pkg._impl.Thing.go] runs it; `Hidden` is internal."
    assert pkg["_impl.Hidden"].docstring.value == "Two kinds:\n- this one,\n- that one."  # a list stays a list


def test_with_the_reference_pages_a_role_links_only_to_what_a_page_renders(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        '"""See :class:`pkg.Thing` and :class:`pkg.extra.Extra`."""\n\nfrom ._impl import Thing\n\n__all__ = ["Thing"]\n',
        encoding="utf-8",
    )
    (tmp_path / "pkg" / "_impl.py").write_text(IMPL, encoding="utf-8")
    (tmp_path / "pkg" / "extra.py").write_text('class Extra:\n    """Public, without a page."""\n', encoding="utf-8")
    pages = tmp_path / "api"
    pages.mkdir()
    (pages / "pkg.md").write_text("# pkg\n\n::: pkg\n", encoding="utf-8")
    roles = _extension().RstRoles

    def docstring(extension: object) -> str:
        loaded = griffe.load("pkg", search_paths=[str(tmp_path)], extensions=griffe.load_extensions(extension))
        return str(loaded.docstring.value)

    assert docstring(roles()) == "See [`pkg.Thing`][pkg._impl.Thing] and [`pkg.extra.Extra`][pkg.extra.Extra]."
    assert docstring(roles(reference=str(pages))) == "See [`pkg.Thing`][pkg._impl.Thing] and `pkg.extra.Extra`."
