"""Writing the render caches (``RenderedHTML``, ``TurnFragment``, ``TurnExport``): many rows of
large texts at once, each a row another request may have written first.

One ``executemany`` of ``INSERT ... ON CONFLICT``, not ``bulk_create``: Django's psycopg backend
binds parameters client-side, so one multi-row INSERT is a statement of every text quoted
inline, and PostgreSQL took 45 ms to take 250 export chunks of 2.8 KB that way, against 18 ms
as one executemany (psycopg pipelines it: one round trip). SQLite takes both alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, models, router


def put(model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]], *,
        unique: Sequence[str], replace: Sequence[str] = (), connection: Any = None) -> None:
    """Insert ``rows`` (values of ``fields``, in that order) into ``model``'s table; a row
    whose ``unique`` fields are taken already is skipped, or, with ``replace``, has those
    fields replaced by the new row's. ``connection``: another than the model's (a reader's
    side connection, ``conversations.snapshot``)."""
    meta = model._meta
    # No model instance is made: a default or pre_save of a field left out would be skipped.
    left_out = {f.name for f in meta.concrete_fields if not f.primary_key} - set(fields)
    assert not left_out, f"{meta.label}: give every field a value ({', '.join(left_out)})"
    if connection is None:
        connection = connections[router.db_for_write(model)]
    q = connection.ops.quote_name
    columns = [meta.get_field(name) for name in fields]
    column = {name: q(field.column) for name, field in zip(fields, columns, strict=True)}
    on_conflict = f"ON CONFLICT ({', '.join(q(meta.get_field(n).column) for n in unique)}) "
    on_conflict += ("DO UPDATE SET " + ", ".join(f"{column[n]} = excluded.{column[n]}"
                                                 for n in replace)) if replace else "DO NOTHING"
    sql = (f"INSERT INTO {q(meta.db_table)} ({', '.join(column.values())}) "
           f"VALUES ({', '.join(['%s'] * len(fields))}) {on_conflict}")
    prepared = [[field.get_db_prep_save(value, connection)
                 for field, value in zip(columns, row, strict=True)] for row in rows]
    if prepared:
        with connection.cursor() as cursor:
            cursor.executemany(sql, prepared)
