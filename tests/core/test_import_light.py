"""``import geppetto`` stays light: what a plain Session and engine do not need at import is loaded when first
used (pydantic-core by the first JSON parse, pathlib by the first file, pydantic by the first tool)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")
LAZY = ("pydantic", "pydantic_core", "yaml", "pathlib", "uuid", "secrets", "mimetypes")


def _loaded(code: str) -> dict[str, bool]:
    script = f"import sys\n{code}\nimport json\nprint(json.dumps({{m: m in sys.modules for m in {LAZY!r}}}))"
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_geppetto_loads_none_of_the_lazy_modules() -> None:
    assert _loaded("import geppetto") == dict.fromkeys(LAZY, False)


def test_each_is_loaded_by_its_first_use() -> None:
    loaded = _loaded(
        "import geppetto\n"
        "from geppetto._json import parse_json\n"
        "assert parse_json('{\"a\": [1, 2]}') == {'a': [1, 2]}\n"
    )
    assert loaded["pydantic_core"] and not loaded["pydantic"]
    loaded = _loaded(
        "import geppetto, tempfile, os\n"
        "d = tempfile.mkdtemp()\n"
        "t = geppetto.Turn(); t.append(geppetto.Block.user('hi'))\n"
        "geppetto.save_turn(os.path.join(d, 't.json'), t)\n"
        "assert geppetto.load_turn(os.path.join(d, 't.json')).blocks[0].text == 'hi'\n"
    )
    assert loaded["pathlib"]
