"""The Sources tables, profiles and timeline read from the roll-up (``SourceTally`` cells and
``SourceSpread`` rows, kept by ``conversations.source_tally``): a few cells per domain, day and
model instead of every row a user sees. ``conversations.source_report`` reads here for every
filter the cells carry (owner, provider, model, dates); the list's search narrows to
conversations, which cells do not keep apart, and is read from the rows there."""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

from django.contrib.auth import get_user_model
from django.db.models import Count, F, IntegerField, Max, Min, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from conversations import source_tally
from conversations.source_models import GROUPS, INTEGRITIES, SourceSpread, SourceTally


class Narrowing(Protocol):
    provider: str
    model: str
    since: dt.date | None
    until: dt.date | None
    owner: str


def _narrowed(qs: QuerySet[Any], user: Any, f: Narrowing) -> QuerySet[Any]:
    """Cells (or spread rows) of what ``user`` sees, narrowed by ``f`` (but its search)."""
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if not user.is_staff:
        qs = qs.filter(owner=user.pk)
    elif f.owner:
        qs = qs.filter(owner__in=get_user_model().objects.filter(username=f.owner)
                       .values("pk"))
    if f.provider:
        qs = qs.filter(provider=f.provider)
    if f.model:
        qs = qs.filter(model=f.model)
    if f.since:
        qs = qs.filter(day__gte=f.since)
    if f.until:
        qs = qs.filter(day__lte=f.until)
    return qs


def cells(user: Any, f: Narrowing, group: str) -> QuerySet[SourceTally]:
    source_tally.fold()  # what recordings left to add first
    return _narrowed(SourceTally.objects.filter(group=GROUPS[group]), user, f)


def table(user: Any, f: Narrowing, group: str, *, sort: str, descending: bool, page: int,
          size: int, within: str) -> tuple[list[dict[str, Any]], int, int]:
    """One page of a Sources table: (rows named ``name`` with the columns, total, page)."""
    qs = cells(user, f, group)
    if within:
        qs = qs.filter(site=within)
    # A conversation whose uses of a name spread over several cells counts once, from the
    # spread rows; the others are summed with their one cell.
    spread = (_narrowed(SourceSpread.objects.filter(group=GROUPS[group], name=OuterRef("name")),
                        user, f)
              .values("name").annotate(n=Count("conversation_id", distinct=True)).values("n"))
    grouped = qs.values("name").annotate(
        n_cited=Sum("cited"), n_consulted=Sum("consulted"),
        n_consulted_not_cited=Sum("consulted_not_cited"), n_turns=Sum("turns"),
        n_first_seen=Min("first_seen"), n_last_seen=Max("last_seen"),
        n_conversations=Sum("conversations") + Coalesce(
            Subquery(spread, output_field=IntegerField()), 0),
        **({"n_key": Max("label"), "n_title": Max("title"), "n_host": Max("host"),
            "n_site": Max("site")} if group == "url" else {}))
    total = qs.values("name").distinct().count()
    pages = max(1, -(-total // size))
    page = min(max(1, page), pages)
    order = ("n_key" if group == "url" else "name") if sort == "name" else f"n_{sort}"
    found = grouped.order_by(F(order).desc() if descending else F(order).asc(), "name")
    rows = []
    for row in found[(page - 1) * size:page * size]:
        out = {"name": row["name"], **{c: row[f"n_{c}"] for c in (
            "cited", "consulted", "consulted_not_cited", "conversations", "turns",
            "first_seen", "last_seen")}}
        if group == "url":
            out.update(hash=row["name"], name=row["n_key"], title=row["n_title"],
                       host=row["n_host"], site=row["n_site"])
        rows.append(out)
    _with_models(qs, rows)
    return rows, total, page


def _with_models(qs: QuerySet[SourceTally], rows: list[dict[str, Any]]) -> None:
    """Each row's attributions per provider · model."""
    names = {row.get("hash", row["name"]): row for row in rows}
    per: dict[str, list[dict[str, Any]]] = {}
    for v in (qs.filter(name__in=list(names), cited__gt=0)
              .values("name", "provider", "model").annotate(n=Sum("cited"))):
        per.setdefault(v["name"], []).append(
            {"provider": v["provider"], "model": v["model"], "cited": v["n"]})
    for name, row in names.items():
        row["models"] = sorted(per.get(name, []),
                               key=lambda m: (-m["cited"], m["provider"], m["model"]))
        row["cited"] = row["cited"] or 0
        row.pop("hash", None)


def profiles(user: Any, f: Narrowing) -> list[list[tuple[Any, ...]]]:
    """Per provider · model: its answers (provider, model, answers); its web searches
    (provider, model, searches, answers that searched); (provider, model, consulted, cited
    sources, consulted not cited, cited not consulted, citations, *INTEGRITIES); and its top
    domains (provider, model, domain, citations), most cited first."""
    answered = cells(user, f, "answers").values_list("provider", "model")
    answers = answered.annotate(Sum("turns"))
    searched = answered.filter(searches__gt=0).annotate(Sum("searches"), Sum("searched"))
    sums = (cells(user, f, "url").values_list("provider", "model").annotate(
        Sum("consulted"), Sum("cited_sources"), Sum("consulted_not_cited"),
        Sum("cited_not_consulted"), Sum("cited"), *(Sum(name) for name in INTEGRITIES)))
    top = (cells(user, f, "domain").filter(cited__gt=0).values_list("provider", "model", "name")
           .annotate(n=Sum("cited")).order_by("provider", "model", "-n", "name"))
    return [list(answers), list(searched), list(sums), list(top)]


def citations_per_day(user: Any, f: Narrowing) -> list[tuple[dt.date, str, str, int]]:
    return list(cells(user, f, "domain").filter(cited__gt=0)
                .values_list("day", "provider", "model").annotate(n=Sum("cited"))
                .order_by("day"))
