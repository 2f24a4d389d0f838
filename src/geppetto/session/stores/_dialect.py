"""What differs between the databases a SQL store keeps its sessions in: the dialect (how a few statements
are spelled) and the database itself (connections, transactions, cross-process locks).

:class:`~geppetto.session.stores.SQLTurnStore` is given one of each; SQLite's are in ``_sqlite``,
PostgreSQL's in ``_postgres``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..._exceptions import StoreError

__all__ = ["HELD_LOCK", "Database", "Dialect"]


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the store's statements leave open (they are written with ``?``)."""

    name: str
    """The key of the dialect's migrations in ``_schema.MIGRATIONS``: ``sqlite`` or ``postgres``."""

    insert_session: str
    """Make a session's row when it has none (its ``created_seq`` the next one)."""

    placeholder: str = "?"

    lock_session: str | None = None
    """A statement that makes the transaction the only writer of one session (None: the dialect's
    transactions already serialize writers)."""

    def sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)


HELD_LOCK = threading.Lock()
"""Guards every database's ``held`` set (the session leases this process holds) and its lock connection."""


class Database(Protocol):
    """Where a store's data lives: the connections its operations run on, and the cross-process locks its
    session leases are."""

    location: str
    """What messages name the database by (a path, a URL without its password)."""

    errors: tuple[type[BaseException], ...]
    """The driver's errors: an operation that raises one fails with a :class:`~geppetto.StoreError`."""

    reconnect_for: float
    """Seconds an operation whose connection was lost is tried again for (0: not at all)."""

    held: set[int]
    """The lock keys this process holds (under :data:`HELD_LOCK`)."""

    def connection(self, prepare: Callable[[Any], None]) -> contextlib.AbstractContextManager[Any]:
        """A connection for one operation; ``prepare`` runs first on a database opened for the first time
        (the migrations)."""
        ...

    def transaction(self, conn: Any) -> contextlib.AbstractContextManager[None]: ...

    def lock_migrations(self, conn: Any) -> None:
        """Called first inside the migration transaction, to keep two processes from migrating at once."""
        ...

    def refuse(self, exc: BaseException) -> StoreError:
        """The error an operation that raised ``exc`` (one of :attr:`errors`) fails with."""
        ...

    def connection_lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection went away (a new one may succeed), not that the statement failed."""
        ...

    def try_lock_key(self, key: int) -> bool:
        """Take the cross-process lock ``key`` without waiting (True when taken; under :data:`HELD_LOCK`)."""
        ...

    def unlock_key(self, key: int) -> None: ...

    def check_leases(self) -> set[int]:
        """The keys of leases this process held and has lost (its lock connection dropped and another
        process took them); each is reported once."""
        ...

    def close(self) -> None:
        """Release the connections and locks; the database reopens on next use."""
        ...
