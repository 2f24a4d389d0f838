"""Turn files: :func:`load_turn` (bounded in size, YAML or JSON by content) and :func:`save_turn` (a temporary
file flushed to disk, then renamed over the target)."""

from __future__ import annotations

import contextlib
import os
import stat
from typing import TYPE_CHECKING

from .._exceptions import TurnFormatError
from ._model import Turn
from ._serde import dumps_json, dumps_yaml, loads_json, loads_yaml
from ._serde_doc import _SHAPE

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_TURN_FILE_BYTES", "load_turn", "save_turn"]

MAX_TURN_FILE_BYTES = 256 << 20
"""The largest turn file :func:`load_turn` reads unless told otherwise (256 MiB: about 6 million blocks of
chat). Reading takes memory several times a file's size, so a larger one is refused before it is read."""


def load_turn(
    path: str | os.PathLike[str], *, strict: bool = True, max_bytes: int | None = MAX_TURN_FILE_BYTES
) -> Turn:
    """Read a turn file (``.json`` as JSON, anything else as YAML). The file is only read.

    A file over ``max_bytes`` (default :data:`MAX_TURN_FILE_BYTES`, 256 MiB; ``None`` for no limit) is a
    :class:`TurnFormatError` naming its size and the limit, before anything is read.
    """
    from pathlib import Path  # not loaded by `import geppetto`

    p = Path(path)
    try:
        with p.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if max_bytes is not None and size > max_bytes:
                raise TurnFormatError(
                    f"the file is {size:,} bytes, over the {max_bytes:,}-byte limit for turn files; "
                    "load it with load_turn(path, max_bytes=...) to allow more",
                    source=str(p),
                )
            raw = fh.read()
    except FileNotFoundError:
        raise TurnFormatError("no such file; check the path", source=str(p)) from None
    except OSError as exc:
        raise TurnFormatError(f"cannot be read: {exc.strerror}", source=str(p)) from None
    if not raw.strip():
        raise TurnFormatError(f"the file is empty; {_SHAPE}", source=str(p))
    if p.suffix.lower() == ".json":
        return loads_json(raw, source=str(p), strict=strict)
    return loads_yaml(raw, source=str(p), strict=strict)


def save_turn(path: str | os.PathLike[str], turn: Turn) -> Path:
    """Write ``turn`` to ``path`` (JSON for ``.json``, else YAML) atomically. Returns ``path``.

    The text goes to a temporary file in the target's folder, is flushed to disk (``fsync``) and then
    renamed over the target, so a crash or a failed write leaves the old file whole and a reader never
    sees half a turn. An existing file keeps its permission bits; a new one gets the usual ones (0666
    less the umask). When ``path`` is a symbolic link, the file it points to is replaced and the link
    stays a link. A turn that cannot be serialized raises :class:`TurnFormatError` before anything is
    written.
    """
    from pathlib import Path

    p = Path(path)
    text = dumps_json(turn, indent=2) if p.suffix.lower() == ".json" else dumps_yaml(turn)
    p.parent.mkdir(parents=True, exist_ok=True)
    target = Path(os.path.realpath(p))  # through symbolic links, so a link is written through, not replaced
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{os.urandom(6).hex()}.tmp")
    # a new file: 0o666 and the kernel applies the umask; an existing one: private until its mode is copied
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666 if mode is None else 0o600
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(target.parent)
    return p


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a file system that cannot sync a folder is left as it is."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
