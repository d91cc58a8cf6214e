"""Reading the list's indexes (``conversations.search``): which conversations a search or a
filter finds, the filter choices and a list row's provenance chips."""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, BooleanField, F, Func, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.lookups import In

from conversations.models import Attribution, Conversation, ConversationFacet, FacetCount, SearchDoc
from conversations.search.common import (
    _PAIR,
    DOMAIN,
    FTS_TABLE,
    KEY_SHIFT,
    MIN_QUERY,
    MODEL,
    PROVIDER,
    SERVED,
    SITE,
    SOURCE_FTS_TABLE,
    _contains,
    _like,
    _phrase,
)


def provenance_chips(conversation_ids: list[Any], using: str = "default"
                     ) -> dict[Any, list[tuple[str, str]]]:
    """Each conversation's (provider, model) pairs, in the order its agent turns first used
    them (the served facets)."""
    chips: dict[Any, list[tuple[str, str]]] = {}
    rows = (ConversationFacet.objects.using(using)
            .filter(conversation_id__in=conversation_ids, kind=SERVED)
            .order_by("conversation_id", "id").values_list("conversation_id", "value"))
    for conversation_id, value in rows:
        provider, _, model = value.partition(_PAIR)
        chips.setdefault(conversation_id, []).append((provider, model))
    return chips


def source_folded_matches(word: str, using: str = "default") -> Q | None:
    """PostgreSQL: the sources (``Attribution``) with ``word`` in their URL or title,
    case-insensitively, through the folded copies' trigram indexes (None elsewhere)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    table = connection.ops.quote_name(Attribution._meta.db_table)
    pattern = _like(word)
    return Q(RawSQL(f"({_contains(connection, 'url', table)} OR "
                    f"{_contains(connection, 'title', table)})", [pattern, pattern],
                    output_field=BooleanField()))


def source_matches(query: str, limit: int, using: str = "default"
                   ) -> tuple[int, RawSQL] | None:
    """How many sources (``Attribution``) have ``query`` in their URL or title
    (case-insensitive), counted through SQLite's FTS index of them (migration 0012) up to
    ``limit + 1``, and SQL for their ids, for ``pk__in`` (all of them when the count is at most
    ``limit``). None where there is no such index to ask (PostgreSQL's trigram indexes serve
    ``icontains`` as it is) or the query is shorter than a trigram.

    The ids are read with the count, in one pass of the index, as a JSON array the list's
    query takes back (a second phrase match for the page was a third of a rare word's list:
    9.8 -> 6.9 ms for a word in 3,125 of 384k sources). They are worth it for a rare word only:
    a common one's first page is found sooner by reading the list in order and testing each
    source (most pass) than through a list of every match (all 384k for "https": 430 ms
    against 40)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or len(query) < MIN_QUERY:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), json_group_array(rowid) FROM ({_SOURCE_MATCH} "
                       "LIMIT %s)", [_phrase(query), limit + 1])
        count, ids = cursor.fetchone()
    return count, RawSQL("SELECT value FROM json_each(%s)", [ids])


_SOURCE_MATCH = f"SELECT rowid FROM {SOURCE_FTS_TABLE} WHERE {SOURCE_FTS_TABLE} MATCH %s"


def matching(query: str, using: str = "default") -> Q:
    """The conversations with a doc containing ``query`` (case-insensitive), as a filter."""
    connection = connections[using]
    if connection.vendor == "sqlite" and len(query) >= MIN_QUERY:
        # The match set as search keys, read from the FTS rowids alone.
        return _keyed(RawSQL(f"SELECT rowid >> {KEY_SHIFT} FROM {FTS_TABLE} WHERE "
                             f"{FTS_TABLE} MATCH %s", [_phrase(query)]))
    q = connection.ops.quote_name
    docs = q(SearchDoc._meta.db_table)
    return Q(pk__in=RawSQL(f"SELECT d.{q('conversation_id')} FROM {docs} d WHERE "
                           f"{_contains(connection, 'body', 'd')}{_apart(connection)}",
                           [_like(query)]))


def _keyed(keys: RawSQL) -> Q:
    """SQLite: the conversations whose search key is one of ``keys``. The unary + keeps
    SQLite from looking each key up in its unique index and sorting the matches (what it
    picks for staff's list, with no owner to narrow by: 13 ms for a word in 3,125
    conversations, unbounded for a common one); the list's order index is walked instead,
    testing each key there, as for an owner's list: at most the whole index (about 14 ms at
    100k), and a common word's page is found at once."""
    unindexed = Func(F("search_key"), template="+%(expressions)s",
                     output_field=BigIntegerField())
    return Q(In(unindexed, keys))


def counted_matches(query: str, limit: int, using: str = "default") -> tuple[int, Q] | None:
    """How many conversations have a doc containing ``query``, counted through SQLite's FTS
    index up to ``limit + 1``, and the filter for them (their keys, read in the same pass, when
    there are at most ``limit``; else ``matching``). None off SQLite or under a trigram.

    For the admin's list of every conversation, counted as well as paged: one pass of the
    index, where the count and the page each walked the list testing every row against a
    phrase match of their own (the page 42 -> 23 ms for "disclosure", in 3,125 of 100k
    conversations)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or len(query) < MIN_QUERY:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), json_group_array(k) FROM (SELECT DISTINCT rowid >> "
                       f"{KEY_SHIFT} AS k FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT %s)",
                       [_phrase(query), limit + 1])
        count, keys = cursor.fetchone()
    if count > limit:
        return count, matching(query, using)
    return count, _keyed(RawSQL("SELECT value FROM json_each(%s)", [keys]))


def any_match(query: str, using: str = "default") -> bool:
    """Does any doc contain ``query``? On SQLite, one probe of the FTS index (the first
    match, well under a millisecond either way); elsewhere True (PostgreSQL computes the
    match set once, from its own index, and finds it empty as fast)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or len(query) < MIN_QUERY:
        return True
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT 1",
                       [_phrase(query)])
        return cursor.fetchone() is not None


def with_facet(kind: str, value: str, using: str = "default") -> RawSQL:
    """SQL for the ids of the conversations having the facet, for ``pk__in``."""
    connection = connections[using]
    q = connection.ops.quote_name
    return RawSQL(f"SELECT {q('conversation_id')} FROM {q(ConversationFacet._meta.db_table)} "
                  f"WHERE {q('kind')} = %s AND {q('value')} = %s{_apart(connection)}",
                  [kind, value])


def _apart(connection: Any) -> str:
    """Keep PostgreSQL from folding the match set into a semi-join that probes it once per
    conversation of the list's order (what it picks when the matches look common but sit
    far down the order: seconds at 10k). ``OFFSET 0`` makes it a hashed subplan, computed once
    from its own index. SQLite computes an IN list once already."""
    return " OFFSET 0" if connection.vendor == "postgresql" else ""


def text_matches(query: str, using: str = "default") -> Q:
    """The conversations a search for ``query`` finds, as a filter (the list's search box, each
    word of the admin's): those with a doc containing it (``matching``)."""
    if len(query) < MIN_QUERY:
        # Shorter than a trigram: no index can answer it, and it matches nearly every text;
        # it looks at titles only (one row per conversation), not at every message.
        return Q(title__icontains=query)
    if not any_match(query, using):
        # Nothing matches: no list query at all (an empty ``pk__in`` is never sent). SQLite
        # would otherwise walk the whole order index testing each conversation against the
        # empty match set.
        return Q(pk__in=[])
    return matching(query, using)


def filtered(qs: QuerySet[Conversation], *, query: str = "", provider: str = "",
             model: str = "", domain: str = "") -> QuerySet[Conversation]:
    """``qs`` narrowed by the list's filters, each through its index. ``domain`` is a host name,
    lower-cased, without "www." (it matches that host and its subdomains)."""
    if query:
        qs = qs.filter(text_matches(query, qs.db))
    if provider:
        qs = qs.filter(pk__in=with_facet(PROVIDER, provider, qs.db))
    if model:
        qs = qs.filter(pk__in=with_facet(MODEL, model, qs.db))
    if domain:
        qs = qs.filter(pk__in=with_facet(SITE, domain, qs.db))
    return qs


def choices(user: Any, domains: int = 50) -> dict[str, list[str]]:
    """The filter choices for what ``user`` sees: providers, models, and the most cited-in
    domains (by how many conversations cite them), read from the maintained counts."""
    counts = FacetCount.objects.filter(conversations__gt=0)
    if not getattr(user, "is_authenticated", False):
        return {"providers": [], "models": [], "domains": []}
    if not user.is_staff:
        counts = counts.filter(owner_key=user.pk)
    out: dict[str, list[str]] = {}
    for kind, name in ((PROVIDER, "providers"), (MODEL, "models")):
        out[name] = sorted(set(counts.filter(kind=kind).values_list("value", flat=True)))
    if user.is_staff:
        from django.db.models import Sum

        top = (counts.filter(kind=DOMAIN).values("value").annotate(n=Sum("conversations"))
               .order_by("-n", "value").values_list("value", flat=True))
    else:
        top = (counts.filter(kind=DOMAIN).order_by("-conversations", "value")
               .values_list("value", flat=True))
    out["domains"] = list(top[:domains])
    return out
