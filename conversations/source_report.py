"""Across everything a user recorded, what the models consulted and cited: the Sources pages,
their exports and ``GET /api/v1/sources`` read it here, from the rows the store keeps as it
writes (``SourceUse``: a turn and a source; ``SearchUse``: a turn and a web search; see
``conversations.source_index``), never from the conversations themselves.

The counts, per domain (registrable, a Gemini redirect under the site it names), host or URL:

* ``cited``: attributions naming it (each once);
* ``consulted``: times consulted: the turns whose hosted activities listed it among their
  sources (a domain: its pages' times, summed);
* ``consulted_not_cited``: of those, the times the turn did not cite it (that page);
* ``conversations``, ``turns``: those that consulted or cited it;
* ``models``: per provider · model, its attributions;
* ``first_seen``, ``last_seen``: the first and last such turn's time.

Filters (``Filters``) narrow the turns: by provider, model, the turn's date (``since`` and
``until`` inclusive, UTC days), the conversation list's own search (``q``), and for staff an
owner (by user name). Others see their own conversations only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import connections
from django.db.models import CharField, Count, F, Func, Max, Min, Q, QuerySet, Sum
from django.db.models.lookups import In

from conversations import search, source_rollup
from conversations.models import Attribution, Conversation, SearchUse, SourceUse, Turn
from conversations.source_index import INTEGRITIES, key_hash

PAGE_SIZE = 50
GROUPS = {"domain": "site", "host": "host", "url": "key"}
COLUMNS = ("cited", "consulted", "consulted_not_cited", "conversations", "turns",
           "first_seen", "last_seen")
TOP_DOMAINS = 5


class InvalidFilter(ValueError):
    """A filter that cannot be read (a date that is no date, an unknown group or order)."""


@dataclass(frozen=True)
class Filters:
    provider: str = ""
    model: str = ""
    since: dt.date | None = None
    until: dt.date | None = None
    q: str = ""
    owner: str = ""  # a user name; staff only (ignored for others)

    @classmethod
    def read(cls, params: Any) -> Filters:
        """From request parameters (a QueryDict or a dict of strings)."""
        def text(name: str) -> str:
            return str(params.get(name, "") or "").strip()[:200]

        return cls(provider=text("provider"), model=text("model"), since=_date(text("since")),
                   until=_date(text("until")), q=text("q"), owner=text("owner"))

    def params(self) -> dict[str, str]:
        """The filters as request parameters (the empty ones left out)."""
        out = {"provider": self.provider, "model": self.model, "q": self.q, "owner": self.owner,
               "since": self.since.isoformat() if self.since else "",
               "until": self.until.isoformat() if self.until else ""}
        return {k: v for k, v in out.items() if v}

    @property
    def any(self) -> bool:
        return bool(self.params())


def _date(value: str) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidFilter(f"{value!r} is not a date (YYYY-MM-DD)") from None


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


def _narrowed(qs: QuerySet[Any], user: Any, f: Filters, *, served: bool = True) -> QuerySet[Any]:
    """``qs`` (rows with ``conversation``, ``provider``, ``model``, ``created_at``) narrowed to
    what ``user`` sees and the filters."""
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    seen: QuerySet[Conversation] | None = None
    if not user.is_staff:
        seen = Conversation.objects.filter(owner=user)
    elif f.owner:
        seen = Conversation.objects.filter(owner__username=f.owner)
    if f.q:  # read from the matches: the rows of the conversations the search found
        seen = (Conversation.objects if seen is None else seen).filter(
            search.text_matches(f.q, qs.db))
        qs = qs.filter(conversation_id__in=seen.using(qs.db).values("pk"))
    elif seen is not None:
        qs = _owned(qs, seen)
    if served and f.provider:
        qs = qs.filter(provider=f.provider)
    if served and f.model:
        qs = qs.filter(model=f.model)
    if f.since:
        qs = qs.filter(created_at__gte=_day_start(f.since))
    if f.until:
        qs = qs.filter(created_at__lt=_day_start(f.until + dt.timedelta(days=1)))
    return qs


def _owned(qs: QuerySet[Any], conversations: QuerySet[Conversation]) -> QuerySet[Any]:
    """``qs`` narrowed to the rows of ``conversations``. SQLite (no statistics) otherwise
    walks the owner's conversations and looks each one's rows up, for a domain's or a URL's
    citing turns; the unary + makes it read that name's rows by their index and test each
    row's conversation against the owner's set."""
    ids = conversations.using(qs.db).values("pk")
    if connections[qs.db].vendor != "sqlite":
        return qs.filter(conversation_id__in=ids)
    unindexed = Func(F("conversation_id"), template="+%(expressions)s", output_field=CharField())
    return qs.filter(In(unindexed, ids))


def uses(user: Any, f: Filters) -> QuerySet[SourceUse]:
    return _narrowed(SourceUse.objects.all(), user, f)


# -- domains, hosts and URLs -------------------------------------------------------------------


@dataclass
class SourcePage:
    group: str
    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    sort: str
    descending: bool


def _aggregates() -> dict[str, Any]:
    """The columns, named ``n_<column>`` (an annotation named as a field would hide it from
    the others' filters)."""
    return {
        "n_cited": Sum("cited"),
        "n_consulted": Count("id", filter=Q(consulted__gt=0)),
        "n_consulted_not_cited": Count("id", filter=Q(consulted__gt=0, cited=0)),
        "n_conversations": Count("conversation_id", distinct=True),
        "n_turns": Count("turn_id", distinct=True),
        "n_first_seen": Min("created_at"),
        "n_last_seen": Max("created_at"),
    }


def sources(user: Any, f: Filters, *, group: str = "domain", sort: str = "cited",
            descending: bool = True, page: int = 1, size: int = PAGE_SIZE,
            within: str = "") -> SourcePage:
    """One page of the table of ``group`` ("domain", "host" or "url"), sorted by a column of
    ``COLUMNS`` or the group's own value ("name"); ``within``: only the hosts or URLs of that
    domain (the hosts one click below a domain)."""
    column = GROUPS.get(group)
    if column is None:
        raise InvalidFilter(f"group is one of {', '.join(GROUPS)}")
    if sort not in (*COLUMNS, "name"):
        raise InvalidFilter(f"sort is one of name, {', '.join(COLUMNS)}")
    if not f.q:  # the roll-up holds every other filter
        found, total, page = source_rollup.table(user, f, group, sort=sort,
                                                 descending=descending, page=page, size=size,
                                                 within=within)
        return SourcePage(group, found, total, page, max(1, -(-total // size)), sort,
                          descending)
    qs = uses(user, f)
    if within:
        qs = qs.filter(site=within)
    by = column
    grouped = qs.values(by).annotate(**_aggregates())
    order = by if sort == "name" else f"n_{sort}"
    ordering = [f"-{order}" if descending else order, by]
    # Every group at once: counting them apart aggregated the matched rows a second time.
    every = list(grouped.order_by(*ordering))
    total = len(every)
    pages = max(1, -(-total // size))
    page = min(max(1, page), pages)
    rows = [{"name": row[by], **{c: row[f"n_{c}"] for c in COLUMNS}}
            for row in every[(page - 1) * size:page * size]]
    if column == "key":
        _with_titles(qs, rows)
    _with_models(qs, column, rows)
    return SourcePage(group, rows, total, page, pages, sort, descending)


def _with_models(qs: QuerySet[SourceUse], column: str, rows: list[dict[str, Any]]) -> None:
    names = [row["name"] for row in rows]
    if column == "key":
        lookup, names_of = "key_hash__in", {key_hash(n): n for n in names}
        values = qs.filter(**{lookup: list(names_of)}, cited__gt=0).values(
            "key_hash", "provider", "model").annotate(n=Sum("cited"))
        found = [(names_of[v["key_hash"]], v) for v in values]
    else:
        values = qs.filter(**{f"{column}__in": names}, cited__gt=0).values(
            column, "provider", "model").annotate(n=Sum("cited"))
        found = [(v[column], v) for v in values]
    per: dict[str, list[dict[str, Any]]] = {}
    for name, v in found:
        per.setdefault(name, []).append(
            {"provider": v["provider"], "model": v["model"], "cited": v["n"]})
    for row in rows:
        row["models"] = sorted(per.get(row["name"], []),
                               key=lambda m: (-m["cited"], m["provider"], m["model"]))
        row["cited"] = row["cited"] or 0


def _with_titles(qs: QuerySet[SourceUse], rows: list[dict[str, Any]]) -> None:
    """A URL's title (one its turns gave it), host and domain: one row per URL."""
    hashes = {key_hash(row["name"]): row for row in rows}
    found = (qs.filter(key_hash__in=list(hashes)).values("key_hash")
             .annotate(t=Max("title"), h=Max("host"), s=Max("site")))
    for v in found:
        hashes[v["key_hash"]].update(title=v["t"], host=v["h"], site=v["s"])
    for row in rows:
        row.setdefault("title", "")
        row.setdefault("host", "")
        row.setdefault("site", "")


def item(row: dict[str, Any], group: str) -> dict[str, Any]:
    """One row of a Sources table as the API and the JSON export give it."""
    out: dict[str, Any] = {}
    if group == "url":
        out.update(url=row["name"], title=row["title"], domain=row["site"])
    else:
        out["domain"] = row["name"]
    out.update({c: row[c] for c in COLUMNS if c not in ("first_seen", "last_seen")})
    out["models"] = row["models"]
    out["first_seen"], out["last_seen"] = row["first_seen"], row["last_seen"]
    return out


def choices(user: Any) -> dict[str, list[str]]:
    """The provider and model filter choices (the list's maintained counts)."""
    found = search.choices(user, domains=0)
    return {"providers": found["providers"], "models": found["models"]}


# -- the turns that cite a source --------------------------------------------------------------


@dataclass
class CitingTurn:
    conversation_id: Any
    conversation_title: str
    turn_id: Any
    index: int
    provider: str
    model: str
    created_at: dt.datetime
    spans: list[dict[str, str]] = field(default_factory=list)


def citing_turns(user: Any, f: Filters, group: str, name: str,
                 limit: int = PAGE_SIZE) -> list[CitingTurn]:
    """The newest turns (at most ``limit``) that cite ``name`` (a domain, host or URL), each
    with what it cites there: the span of its text each attribution covers, or the excerpt
    the source gave when it has no range."""
    column = GROUPS.get(group)
    if column is None:
        raise InvalidFilter(f"group is one of {', '.join(GROUPS)}")
    qs = uses(user, f).filter(cited__gt=0)
    qs = qs.filter(key_hash=key_hash(name)) if column == "key" else qs.filter(**{column: name})
    found = list(qs.order_by("-created_at", "-turn_id")
                 .values_list("turn_id", "key", "provider", "model", "created_at")[:limit * 20])
    keys: dict[Any, set[str]] = {}
    order: list[Any] = []
    meta: dict[Any, tuple[str, str, dt.datetime]] = {}
    for turn_id, key, provider, model, created in found:
        if turn_id not in keys:
            if len(order) == limit:
                continue
            order.append(turn_id)
            keys[turn_id] = set()
            meta[turn_id] = (provider, model, created)
        keys[turn_id].add(key)
    turns = {t.pk: t for t in Turn.objects.filter(pk__in=order).select_related("conversation")}
    out = {turn_id: CitingTurn(turns[turn_id].conversation_id,
                               turns[turn_id].conversation.title, turn_id,
                               turns[turn_id].index, *meta[turn_id])
           for turn_id in order if turn_id in turns}
    for a in (Attribution.objects.filter(event__turn_id__in=list(out))
              .select_related("event").order_by("event__seq", "ordinal")):
        turn_id = a.event.turn_id
        if (a.url or a.title) not in keys[turn_id]:
            continue
        text = a.event.text
        span = text[a.range_start:a.range_end] if a.range_start is not None else ""
        out[turn_id].spans.append({
            "url": a.url, "title": a.title, "span": span or a.excerpt or text,
            "excerpt": a.excerpt, "integrity": a.integrity,
        })
    return list(out.values())


# -- models ------------------------------------------------------------------------------------


def models(user: Any, f: Filters) -> list[dict[str, Any]]:
    """A citation profile per provider · model (agent turns), most answers first."""
    if f.q:
        answers, searched, rows, top = _profiles_from_rows(user, f)
    else:  # the roll-up holds every other filter
        answers, searched, rows, top = source_rollup.profiles(user, f)
    profiles: dict[tuple[str, str], dict[str, Any]] = {}
    for provider, model, n in answers:
        profiles[(provider, model)] = _profile(provider, model, n)
    for provider, model, searches, answered in searched:
        p = profiles.setdefault((provider, model), _profile(provider, model, 0))
        p["searches"], p["searched_answers"] = searches, answered
    for provider, model, consulted, cited, not_cited, not_opened, citations, *counts in rows:
        p = profiles.setdefault((provider, model), _profile(provider, model, 0))
        p.update(consulted=consulted, cited_sources=cited, consulted_not_cited=not_cited,
                 cited_not_consulted=not_opened, citations=citations or 0,
                 integrity=dict(zip(INTEGRITIES, (c or 0 for c in counts), strict=True)))
    for provider, model, site, n in top:
        p = profiles[(provider, model)]
        if len(p["top_domains"]) < TOP_DOMAINS:
            p["top_domains"].append({"domain": site, "cited": n})
    for p in profiles.values():
        _ratios(p)
    return sorted(profiles.values(), key=lambda p: (-p["answers"], p["provider"], p["model"]))


def _profiles_from_rows(user: Any, f: Filters) -> list[list[tuple[Any, ...]]]:
    """``source_rollup.profiles`` counted from the rows (a search narrows to conversations)."""
    answers = (_narrowed(Turn.objects.filter(role=Turn.Role.AGENT), user, f)
               .values_list("provider", "model").annotate(n=Count("id")))
    searched = (_narrowed(SearchUse.objects.all(), user, f).values_list("provider", "model")
                .annotate(searches=Count("id"), answers=Count("turn_id", distinct=True)))
    rows = (uses(user, f).values_list("provider", "model").annotate(
        n_consulted=Count("id", filter=Q(consulted__gt=0)),
        n_cited=Count("id", filter=Q(cited__gt=0)),
        n_not_cited=Count("id", filter=Q(consulted__gt=0, cited=0)),
        n_not_opened=Count("id", filter=Q(cited__gt=0, consulted=0)),
        n_citations=Sum("cited"), **{f"n_{name}": Sum(name) for name in INTEGRITIES}))
    top = (uses(user, f).filter(cited__gt=0).values_list("provider", "model", "site")
           .annotate(n=Sum("cited")).order_by("provider", "model", "-n", "site"))
    return [list(answers), list(searched), list(rows), list(top)]


def _profile(provider: str, model: str, answers: int) -> dict[str, Any]:
    return {"provider": provider, "model": model, "answers": answers, "searched_answers": 0,
            "searches": 0, "consulted": 0, "cited_sources": 0, "citations": 0,
            "consulted_not_cited": 0, "cited_not_consulted": 0,
            "integrity": dict.fromkeys(INTEGRITIES, 0), "top_domains": []}


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _ratios(p: dict[str, Any]) -> None:
    p["searches_per_answer"] = _ratio(p["searches"], p["answers"])
    p["consulted_per_answer"] = _ratio(p["consulted"], p["answers"])
    p["cited_per_answer"] = _ratio(p["cited_sources"], p["answers"])
    p["consulted_not_cited_share"] = _ratio(p["consulted_not_cited"], p["consulted"])
    p["cited_not_consulted_share"] = _ratio(p["cited_not_consulted"], p["cited_sources"])


def model_label(provider: str, model: str) -> str:
    return f"{provider or 'unknown'} · {model or 'unknown'}"


# -- charts' data ------------------------------------------------------------------------------


def citations_over_time(user: Any, f: Filters, models: int = 6) -> dict[str, Any]:
    """Attributions per day and provider · model (the ``models`` most cited; the rest as
    "other"): {"days": [...], "series": {label: [count per day]}}."""
    from django.db.models.functions import Substr, TruncDate

    rows: list[tuple[Any, ...]]
    if f.q:
        qs = uses(user, f).filter(cited__gt=0)
        sqlite = connections[qs.db].vendor == "sqlite"
        # SQLite: the UTC day is the stored text's first ten characters; Django's TruncDate
        # there calls back into Python once a row.
        day_of = (Substr("created_at", 1, 10) if sqlite
                  else TruncDate("created_at", tzinfo=dt.UTC))
        rows = [(dt.date.fromisoformat(day) if sqlite else day, *rest) for day, *rest in (
            qs.annotate(day=day_of).values_list("day", "provider", "model")
            .annotate(n=Sum("cited")).order_by("day"))]
    else:  # the roll-up holds every other filter
        rows = source_rollup.citations_per_day(user, f)
    per: dict[str, dict[dt.date, int]] = {}
    totals: dict[str, int] = {}
    for day, provider, model, n in rows:
        label = model_label(provider, model)
        per.setdefault(label, {})[day] = per.get(label, {}).get(day, 0) + n
        totals[label] = totals.get(label, 0) + n
    kept = sorted(totals, key=lambda k: (-totals[k], k))[:models]
    days = sorted({d for series in per.values() for d in series})
    series: dict[str, list[int]] = {label: [per[label].get(d, 0) for d in days]
                                    for label in kept}
    rest = [label for label in per if label not in kept]
    if rest:
        series["other"] = [sum(per[label].get(d, 0) for label in rest) for d in days]
    return {"days": days, "series": series}


def with_model(f: Filters, provider: str, model: str) -> Filters:
    return replace(f, provider=provider, model=model)
