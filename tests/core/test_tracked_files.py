"""The repository tracks no merge leftovers or editor files: a stray ``*.orig`` next to a module ships in the
package (``package-data`` takes ``**/*``-style globs) and shows up in every search of the source."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LEFTOVER = re.compile(r"\.(orig|rej|bak|swp)$|~$")


def test_no_merge_leftovers_or_editor_files_are_tracked() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist or an installed package): nothing tracked to check")
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    leftovers = [name for name in listed.splitlines() if LEFTOVER.search(name)]
    assert leftovers == [], f"tracked merge leftovers or editor files (git rm them): {leftovers}"


def test_the_pattern_catches_each_kind() -> None:
    names = ["a/_plan.py.orig", "b.py.rej", "c.py.bak", ".d.py.swp", "e.py~", "f.py", "orig.py"]
    assert [n for n in names if LEFTOVER.search(n)] == names[:5]
