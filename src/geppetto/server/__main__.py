"""``python -m geppetto.server``: serve without the ``cli`` extra (see :mod:`geppetto.server._main`)."""

from ._main import main

main()
