"""The Sources pages: domains, hosts and URLs, the turns that cite one, and the models'
citation profiles (two side by side), with their charts and CSV / JSON exports. The figures
are ``conversations.source_report``'s; the drawing is ``conversations.source_charts``'."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from conversations import source_charts, source_report
from conversations.source_report import COLUMNS, Filters, InvalidFilter, model_label

EXPORT_ROWS = 10_000  # an export's rows at most (a table's whole, in practice)
HEADINGS = {"cited": "Cited", "consulted": "Consulted", "consulted_not_cited": "Not cited",
            "conversations": "Conversations", "turns": "Turns", "first_seen": "First seen",
            "last_seen": "Last seen"}


def _bad(message: str) -> HttpResponse:
    return HttpResponse(f"Bad filter: {message}.", status=400, content_type="text/plain")


def _filters(request: HttpRequest) -> Filters:
    f = Filters.read(request.GET)
    return f if request.user.is_staff else Filters(**{**f.__dict__, "owner": ""})


def _context(request: HttpRequest, f: Filters, **more: Any) -> dict[str, Any]:
    owners: list[str] = []
    if request.user.is_staff:
        owners = list(get_user_model().objects.filter(conversations__isnull=False).distinct()
                      .order_by("username").values_list("username", flat=True)[:200])
    return {"filters": f, "filter_params": f.params(), "owners": owners,
            "choices": source_report.choices(request.user), **more}


def _export(rows: list[dict[str, Any]], columns: list[str], name: str,
            fmt: str) -> HttpResponse:
    if fmt == "json":
        response = HttpResponse(orjson.dumps(rows, default=str),
                                content_type="application/json")
    else:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


def _cell(value: Any) -> Any:
    if isinstance(value, list):
        return "; ".join(
            f"{model_label(v['provider'], v['model'])}: {v['cited']}" if "provider" in v
            else f"{v['domain']}: {v['cited']}" for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items())
    return "" if value is None else value


def _table_rows(group: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [source_report.item(row, group) for row in rows]


@login_required
@require_GET
def sources(request: HttpRequest, group: str = "domain") -> HttpResponse:
    """``/sources/`` (by domain), ``/sources/urls/``, and a domain's hosts
    (``/sources/hosts/?domain=``)."""
    try:
        f = _filters(request)
        sort = request.GET.get("sort", "cited")
        descending = request.GET.get("order", "desc") != "asc"
        within = request.GET.get("domain", "").strip().lower()[:255]
        fmt = request.GET.get("format", "")
        page_text = request.GET.get("page", "1")
        page = int(page_text) if page_text.isdigit() and len(page_text) < 9 else 1
        size = EXPORT_ROWS if fmt in ("csv", "json") else source_report.PAGE_SIZE
        table = source_report.sources(request.user, f, group=group, sort=sort,
                                      descending=descending, page=1 if fmt else page,
                                      size=size, within=within)
    except InvalidFilter as exc:
        return _bad(str(exc))
    key = "url" if group == "url" else "domain"
    if fmt in ("csv", "json"):
        columns = [key, *(["title"] if group == "url" else []), *COLUMNS, "models"]
        return _export(_table_rows(group, table.rows), columns, f"sources-{group}", fmt)
    context = _context(request, f, table=table, group=group, within=within,
                       columns=[(c, HEADINGS[c]) for c in COLUMNS])
    if group == "domain" and not within:
        timeline = source_report.citations_over_time(request.user, f)
        context["timeline"] = timeline
        context["timeline_rows"] = [
            (day, [timeline["series"][s][i] for s in timeline["series"]])
            for i, day in enumerate(timeline["days"])]
        if timeline["days"]:
            context["timeline_chart"] = source_charts.over_time(
                timeline["days"], timeline["series"], "Citations per day, by model")
    if within:
        context["citing"] = source_report.citing_turns(request.user, f, "domain", within)
    return render(request, "sources/sources.html", context)


@login_required
@require_GET
def source_turns(request: HttpRequest) -> HttpResponse:
    """The turns that cite a URL (``?url=``) or a host (``?host=``), each with what it cites."""
    try:
        f = _filters(request)
        group, name = (("url", request.GET.get("url", "")) if "url" in request.GET
                       else ("host", request.GET.get("host", "")))
        citing = source_report.citing_turns(request.user, f, group, name[:4000])
    except InvalidFilter as exc:
        return _bad(str(exc))
    return render(request, "sources/turns.html",
                  _context(request, f, citing=citing, group=group, name=name))


@login_required
@require_GET
def models(request: HttpRequest) -> HttpResponse:
    """Every provider · model's citation profile; ``?a=`` and ``?b=`` (``provider · model``
    keys) side by side."""
    try:
        f = _filters(request)
        profiles = source_report.models(request.user, f)
    except InvalidFilter as exc:
        return _bad(str(exc))
    for p in profiles:
        p["label"] = model_label(p["provider"], p["model"])
        p["key"] = f"{p['provider']}/{p['model']}"
    fmt = request.GET.get("format", "")
    if fmt in ("csv", "json"):
        columns = ["provider", "model", "answers", "searched_answers", "searches",
                   "searches_per_answer", "consulted", "cited_sources", "citations",
                   "consulted_per_answer", "cited_per_answer", "consulted_not_cited_share",
                   "cited_not_consulted_share", "integrity", "top_domains"]
        rows = [{k: p[k] for k in columns} for p in profiles]
        return _export(rows, columns, "sources-models", fmt)
    by_key = {p["key"]: p for p in profiles}
    chosen = [by_key[k] for k in (request.GET.get("a", ""), request.GET.get("b", ""))
              if k in by_key]
    if not chosen:
        chosen = profiles[:2]
    shown = [p for p in profiles if p["answers"] or p["citations"]][:8]
    context = _context(request, f, profiles=profiles, chosen=chosen, shown=shown)
    if shown:
        context["versus_chart"] = source_charts.bars(
            [p["label"] for p in shown],
            {"Consulted per answer": [p["consulted_per_answer"] or 0 for p in shown],
             "Cited per answer": [p["cited_per_answer"] or 0 for p in shown]},
            "Sources consulted and cited per answer, by model")
    for p in chosen:
        if p["top_domains"]:
            p["domains_chart"] = source_charts.bars(
                [d["domain"] or "(no URL)" for d in p["top_domains"]],
                {"Cited": [d["cited"] for d in p["top_domains"]]},
                f"Top cited domains of {p['label']}", width=420)  # half the page
    return render(request, "sources/models.html", context)
