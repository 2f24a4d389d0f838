"""The library's log lines stay out of an application's output unless it configures logging."""

import subprocess
import sys

_PROGRAM = """
import logging
import geppetto
logging.getLogger("geppetto.providers").warning("a library warning")
print("answer")
"""


def test_library_warnings_print_nothing_without_logging_configured() -> None:
    # Without a handler on the geppetto logger, Python's last-resort handler writes warnings to stderr.
    res = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "answer\n"
    assert "a library warning" not in res.stderr


def test_an_application_that_configures_logging_still_sees_them() -> None:
    program = "import logging\nlogging.basicConfig()\n" + _PROGRAM
    res = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert "a library warning" in res.stderr
