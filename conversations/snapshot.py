"""One snapshot for a read that takes many queries (an export streamed a batch of turns at a
time), so that a conversation changed or deleted meanwhile is read whole as it was, never
half.

PostgreSQL: a REPEATABLE READ transaction (every query sees the database as of the first).
SQLite: a DEFERRED transaction in WAL mode (the first read fixes the snapshot; writers go on,
into the WAL). Not the IMMEDIATE mode our SQLite transactions use for writes: that would take
the write lock and hold every writer (a live turn's too) for the whole export.

A read transaction must write nothing: on SQLite, upgrading it to a write fails once anyone
else wrote, and on PostgreSQL its writes would hold locks until it ends. What a reader caches
on the way (an export's rendered turns) goes through ``side``, a second connection of its own,
committed as it goes.

Inside a caller's transaction (a test's, a caller that reads with others) that transaction is
the snapshot, and caches are written in it, as they always were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction


class Side:
    """A second connection to the same database, opened when first asked for."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._connection: Any = None

    @property
    def connection(self) -> Any:
        if self._connection is None:
            self._connection = connections.create_connection(self.alias)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@contextmanager
def read(using: str = "default") -> Iterator[Side | None]:
    """Everything read on ``using`` inside is of one snapshot; yields the connection to write
    caches through (None: the caller's own transaction, write in it)."""
    connection = connections[using]
    if connection.in_atomic_block:
        yield None
        return
    connection.ensure_connection()
    mode = getattr(connection, "transaction_mode", None)
    if connection.vendor == "sqlite":
        connection.transaction_mode = "DEFERRED"  # read by atomic()'s BEGIN, just below
    side = Side(using)
    try:
        with transaction.atomic(using=using):
            if connection.vendor == "sqlite":
                connection.transaction_mode = mode
            elif connection.vendor == "postgresql":
                with connection.cursor() as cursor:  # the transaction's first statement
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield side
    finally:
        if connection.vendor == "sqlite":
            connection.transaction_mode = mode
        side.close()
