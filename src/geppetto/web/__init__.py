"""The web chat, Turn inspector and dashboard, and the API document's reader (``/docs``): static files inside the package (no build step, no CDN),
served by ``geppetto serve`` at ``/``, and the same inspector as one self-contained page
(``geppetto inspect FILE --html out.html``).

The page's script is a few ES modules (:data:`MODULES`) the browser loads as they are; the one-file
inspector page carries them joined into one script (:func:`page_script`).

The pages never put text from a model, a tool or a turn file into the DOM as HTML: everything is built
with ``textContent`` and ``createElement`` (Markdown too), and the served pages carry a Content Security
Policy that allows no inline script.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the report
the command's ``inspect`` and chat commands print from. Not part of the public API; they may change in any
release.
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from importlib import resources
from typing import Any

from ..session import dashboard, session_totals
from ._report import ChainedPlan as ChainedPlan
from ._report import chained_plan as chained_plan
from ._report import describe as describe
from ._report import plural as plural
from ._report import request_marks as request_marks
from ._report import session_report, turn_report

__all__ = [
    "ASSETS",
    "CONTENT_SECURITY_POLICY",
    "MODULES",
    "asset",
    "dashboard",
    "page_script",
    "session_report",
    "session_totals",
    "standalone_html",
    "turn_report",
]

MODULES = (
    "dom.js",
    "format.js",
    "sources.js",
    "api.js",
    "chatview.js",
    "chat.js",
    "inspector.js",
    "dashboard.js",
    "docs.js",
    "app.js",
)
"""The pages' script as ES modules, each after those it imports (``app.js``, the entry the page loads, last;
``docs.js``, the entry of ``/docs``, the API document to read, before it)."""

_OWN_PAGE = frozenset({"docs.js"})
"""Modules of a page of their own, left out of :func:`page_script`."""

ASSETS = {
    "index.html": "text/html",
    "docs.html": "text/html",
    **dict.fromkeys(MODULES, "text/javascript"),
    "app.css": "text/css",
}
"""The files of the web front-end and their media types."""

_IMPORT = re.compile(r'^import \{[^}]*\} from "\./[\w-]+\.js";\n', re.M)
_EXPORT = re.compile(r"^export (?=(?:async )?function|const|let|class)", re.M)

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""What the served pages may load: their own files only (no inline script, no other origin)."""


@cache
def asset(name: str) -> bytes:
    """One of :data:`ASSETS`, read from the package once."""
    if name not in ASSETS:
        raise KeyError(name)
    return resources.files(__package__).joinpath("static", name).read_bytes()


@cache
def page_script() -> str:
    """:data:`MODULES` as one classic script, for a page that is one file (an inline module cannot import
    another): in their order, without their ``import`` lines and ``export`` keywords, in one function scope
    (their top-level names are distinct, a test checks it)."""
    bodies = [_EXPORT.sub("", _IMPORT.sub("", asset(name).decode())) for name in MODULES if name not in _OWN_PAGE]
    return '"use strict";\n(function () {\n' + "\n".join(bodies) + "})();\n"


def _json_for_script(data: Any) -> str:
    # "<" never appears raw, so no "</script>" or "<!--" in the data can end the element early
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def standalone_html(report: dict[str, Any], *, title: str) -> str:
    """The Turn inspector for ``report`` (:func:`session_report`) as one page: its style, script and data
    inline, nothing loaded from anywhere."""
    css = asset("app.css").decode()
    js = page_script()
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n"
        '<header class="top"><span class="brand">geppetto</span><span class="muted">Turn inspector</span></header>\n'
        '<main id="main" tabindex="-1"></main>\n'
        f'<script type="application/json" id="geppetto-report">{_json_for_script(report)}</script>\n'
        f"<script>\n{js}</script>\n</body>\n</html>\n"
    )
