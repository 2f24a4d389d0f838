"""The server's routes, one module per resource: ``sessions`` (REST), ``events`` (Server-Sent Events),
``protocols`` (AG-UI and the Vercel AI SDK stream) and ``web`` (the page, what it reads, the server's own
routes). Each module's ``router`` is included by :func:`~geppetto.server._app.build_app`."""
