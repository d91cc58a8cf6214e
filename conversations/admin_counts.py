"""The admin's lists on large tables: a paginator that counts a filtered list only so far and an
unfiltered one not at all (the database's estimate), a search's few matches sorted rather than
found along the order's index, and filter choices read by skip-scan of an index."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import F, QuerySet
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils.functional import cached_property


class EstimatedCountPaginator(Paginator):
    """A changelist paginator that does not count a whole table: unfiltered, the count is the
    database's estimate (PostgreSQL's planner statistics; SQLite's largest rowid, exact until
    rows are deleted). A filtered list (by conversation, kind, search) is counted exactly up
    to ``COUNT_LIMIT`` rows, and past it is "at least" that many (``CountAtLeast``): counting
    every message event of a million to show a number nobody pages through is the cost."""

    @cached_property
    def count(self) -> int:
        if self.known_count is not None:
            return self.known_count
        qs = self.object_list
        if not isinstance(qs, QuerySet):
            return super().count
        if not qs.query.where:
            estimate = _estimated_rows(qs.model, qs.db)
            if estimate is not None and estimate >= ESTIMATE_ABOVE:
                return estimate
        counted = qs.order_by().values(_counted_column(qs))[: COUNT_LIMIT + 1].count()
        return counted if counted <= COUNT_LIMIT else CountAtLeast(COUNT_LIMIT)

    @cached_property
    def rows(self) -> Any:
        """What the pages are read from: ``object_list``, or a search's few matches sorted
        (``matches_sorted``) on PostgreSQL."""
        qs = self.object_list
        if (self.searched and isinstance(qs, QuerySet) and not isinstance(self.count, CountAtLeast)
                and connections[qs.db].vendor == "postgresql"):
            return matches_sorted(qs)
        return qs

    def page(self, number: Any) -> Any:
        self.object_list = self.rows
        return super().page(number)

    searched = False  # a search's list: set by ``KeySearch.get_paginator``
    # The count, when the search has already learnt it from its index (``KNOWN_COUNT``).
    known_count: int | None = None


def matches_sorted(qs: QuerySet) -> QuerySet:
    """``qs`` in the same order, by a sort of its rows rather than by a walk of the order's
    index. For a search with few matches (at most ``COUNT_LIMIT``, counted through the search's
    own index) on PostgreSQL: there the planner walks the order index and tests every row when
    the matches it estimates are few but sit far along that order (a search of sources read
    250k of them to find 100: 310 ms; sorting the 1,562 matches: a few ms). An order expression
    that no index holds (``COALESCE(x, x)``, which is ``x``) makes it find the matches, then
    sort them."""
    ordering = []
    for item in qs.query.order_by:
        if isinstance(item, str):
            name = item.removeprefix("-")
            expression = Coalesce(F(name), F(name))
            ordering.append(expression.desc() if item.startswith("-") else expression.asc())
        elif isinstance(item, OrderBy):
            ordering.append(OrderBy(Coalesce(item.expression, item.expression),
                                    descending=item.descending, nulls_first=item.nulls_first,
                                    nulls_last=item.nulls_last))
        else:
            return qs  # an order this cannot rewrite: left to the planner
    return qs.order_by(*ordering) if ordering else qs


def _counted_column(qs: QuerySet) -> str:
    """What the bounded count selects: the list's first order column, which each filter's index
    holds (they end with the list's order), so SQLite counts from the index alone; the key
    would be a read of each row (these tables' keys are not SQLite's rowid)."""
    for name in qs.query.order_by:
        if isinstance(name, str) and "__" not in name:
            try:
                field = qs.model._meta.get_field(name.lstrip("-"))
            except FieldDoesNotExist:
                break
            if field.concrete:
                return field.attname
        break
    return "pk"


ESTIMATE_ABOVE = 100_000  # below this an exact count is cheap, and what people expect
COUNT_LIMIT = 10_000  # rows: a filtered list is counted this far (100 pages of 100)


class CountAtLeast(int):
    """A count that stopped at its limit: pages as that many rows, and reads "10000+" wherever
    the admin shows it (the templates localize a number through ``__html__``/``__str__``)."""

    def __str__(self) -> str:
        return f"{int(self)}+"

    def __html__(self) -> str:
        return str(self)


def _estimated_rows(model: Any, using: str) -> int | None:
    conn = connections[using]
    table = model._meta.db_table
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                           [conn.ops.quote_name(table)])
        elif conn.vendor == "sqlite":
            cursor.execute(f"SELECT MAX(rowid) FROM {conn.ops.quote_name(table)}")
        else:
            return None
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None and row[0] >= 0 else None


def distinct_values(model: Any, column: str, using: str = "default", limit: int = 200
                    ) -> list[str]:
    """The distinct values of an indexed column by skip-scan — one index probe per value
    (a recursive query: the smallest value, then the smallest above it, ...) instead of a
    DISTINCT over every row, which Django's field filters run on each list view."""
    conn = connections[using]
    q = conn.ops.quote_name
    table, col = q(model._meta.db_table), q(column)
    sql = (f"WITH RECURSIVE d(v, n) AS (SELECT MIN({col}), 1 FROM {table} UNION ALL "
           f"SELECT (SELECT MIN({col}) FROM {table} WHERE {col} > d.v), n + 1 FROM d "
           f"WHERE d.v IS NOT NULL AND n < %s) SELECT v FROM d WHERE v IS NOT NULL")
    with conn.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]


def indexed_choices(field_name: str, title: str | None = None) -> type[admin.SimpleListFilter]:
    """A list filter on an indexed column whose choices come from ``distinct_values``."""

    class IndexedChoices(admin.SimpleListFilter):
        parameter_name = field_name

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            model = model_admin.model
            column = model._meta.get_field(field_name).column
            return [(v, v) for v in distinct_values(model, column) if v]

        def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
            value = self.value()
            return queryset.filter(**{field_name: value}) if value else queryset

    IndexedChoices.title = title or field_name
    IndexedChoices.__name__ = f"{field_name.title()}Choices"
    return IndexedChoices
