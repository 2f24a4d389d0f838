"""The one line both the simulator's and the server's command print for a port another program holds."""

from __future__ import annotations

__all__ = ["port_in_use"]


def port_in_use(host: str, port: int) -> str:
    """The one line for a port another program listens on (``simulate`` and ``serve`` say the same)."""
    return f"port {port} on {host} is already in use; pick another with --port (0 picks a free one)"
