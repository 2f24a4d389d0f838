"""A local, stateful simulator of the OpenAI, Anthropic and Gemini HTTP APIs with a scripted model.

`with serve() as sim:` runs it on a free loopback port; point any client at `sim.openai_url` (OpenAI)
or `sim.url` (Anthropic, Gemini). See docs/simulator.md.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API (``geppetto
simulate`` reads ``--quirk`` with it); not part of the public API.
"""

from .._extras import install_hint

try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as _missing:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"geppetto.simulator needs the 'sim' extra ({_missing.name} is not installed): {install_hint('sim')}",
        name=_missing.name,
    ) from None

from ._faults import Fault
from ._model import BuiltinCall, Reply, ToolCall
from ._quirks import QUIRKS, QuirkError
from ._quirks import parse_quirks as parse_quirks
from ._server import Simulator, run, serve
from ._state import RecordedRequest

__all__ = [
    "QUIRKS",
    "BuiltinCall",
    "Fault",
    "QuirkError",
    "RecordedRequest",
    "Reply",
    "Simulator",
    "ToolCall",
    "run",
    "serve",
]
