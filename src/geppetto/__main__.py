"""``python -m geppetto``: the same as the ``geppetto`` command."""

from .cli import main

main()
