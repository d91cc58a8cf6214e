"""The admin's search: by key (a term equal to a key field, through its index) as well as by
the words of ``search_fields``, and the count a search learnt from its own index handed to the
paginator."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.admin.views.main import SEARCH_VAR
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.text import smart_split, unescape_string_literal

from conversations.admin_counts import EstimatedCountPaginator


class KeySearch(admin.ModelAdmin):
    """Search by key as well as by text: a term equal to one of ``key_search_fields`` finds
    its rows through that field's index. Django's "=field" search is a case-insensitive match
    (on SQLite a LIKE, and a UUID cast to text on PostgreSQL) that no index serves: a full
    scan of a million events per search. A key field is asked only for a term it can hold
    (a UUID for a UUID field). ``search_fields`` are searched as Django searches them: each
    word in one of them (icontains)."""

    key_search_fields: tuple[str, ...] = ()

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        return (*self.search_fields, *self.key_search_fields)  # the search box shows for both

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        found = key_matches(queryset.model, self.key_search_fields, term)
        if self.search_fields:
            text = Q.create([self.word_matches(word, queryset.db)
                             for word in search_words(term)])
            found = text if found is None else found | text
        if found is None:
            return queryset.none(), False
        return queryset.filter(found), False

    def word_matches(self, word: str, using: str) -> Q:
        """The rows with ``word`` in one of ``search_fields``, as Django's admin finds them."""
        return Q.create([(f"{name}__icontains", word) for name in self.search_fields],
                        connector=Q.OR)

    def get_paginator(self, request: HttpRequest, queryset: QuerySet, per_page: int,
                      orphans: int = 0, allow_empty_first_page: bool = True) -> Paginator:
        paginator = super().get_paginator(request, queryset, per_page, orphans,
                                          allow_empty_first_page)
        if isinstance(paginator, EstimatedCountPaginator):
            paginator.searched = bool(request.GET.get(SEARCH_VAR, "").strip())
            paginator.known_count = getattr(request, KNOWN_COUNT, None)
        return paginator


# A request attribute: the list's count, set by a search that learnt it from its index (the
# paginator is made from the request, after the search, and sees nothing else of it).
KNOWN_COUNT = "turnscope_known_count"


def search_words(term: str) -> list[str]:
    """The words of a search, as Django's admin splits them (a quoted phrase is one word)."""
    return [unescape_string_literal(bit) if bit[:1] in "\"'" and bit[0] == bit[-1] else bit
            for bit in smart_split(term)]


def key_matches(model: Any, fields: tuple[str, ...], term: str) -> Q | None:
    """The rows whose ``fields`` (paths such as "conversation__id") equal ``term``, typed as
    each field takes it; None when no field can hold it."""
    found: Q | None = None
    for name in fields:
        field = get_fields_from_path(model, name)[-1]
        try:
            value = field.to_python(term)
        except ValidationError:
            continue
        if value is None or value == "":
            continue
        found = Q(**{name: value}) if found is None else found | Q(**{name: value})
    return found
