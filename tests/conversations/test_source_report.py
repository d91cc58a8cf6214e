"""The Sources figures agree with the conversations: a store built from the shared recordings,
every count checked against one made from the conversations' portable exports."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User

from conversations import forking, source_index, source_report, store
from conversations.ingest import ingest_each
from conversations.models import Attribution, Conversation, SearchUse, SourceUse
from conversations.projections import export_json
from conversations.source_report import Filters
from streams.bodies import ActivityBody
from streams.builder import EventRecord
from tests.support import FIXTURE_SETS, shared_path

pytestmark = pytest.mark.django_db


def _store(owner: Any) -> None:
    from bench.ingest import load_responses

    responses = load_responses(sets=FIXTURE_SETS)
    if not responses:
        pytest.skip(f"no provider recordings under {shared_path('fixtures')}")
    by_provider: dict[str, list[Any]] = defaultdict(list)
    for provider, response, _ in responses:
        by_provider[provider].append(response)
    for provider, files in by_provider.items():
        list(ingest_each(provider, files, owner=owner))


def _from_exports(conversations: list[Conversation],
                  keep: Any = lambda pair, when: True) -> dict[str, Any]:
    """Every figure, counted from the portable exports alone (of the turns ``keep`` takes:
    given the turn's (provider, model) and its time)."""
    urls: dict[str, dict[str, Any]] = {}
    domains: dict[str, dict[str, Any]] = {}
    models: dict[tuple[str, str], dict[str, Any]] = {}
    for conversation in conversations:
        doc = orjson.loads(export_json(conversation))
        for turn in doc["turns"]:
            if turn["role"] != "agent":
                continue
            served = turn["agent"].get("model") or {}
            pair = (served.get("provider", ""), served.get("model", ""))
            when = dt.datetime.fromisoformat(turn["created_at"])
            if not keep(pair, when):
                continue
            cited: Counter[str] = Counter()
            integrity: Counter[str] = Counter()
            consulted: set[str] = set()
            titles: dict[str, tuple[str, str]] = {}
            searches: set[str] = set()
            for event in turn["events"]:
                for a in event.get("attributions", ()):
                    url, title = a["source"]["url"], a["source"]["title"]
                    if url or title:
                        cited[url or title] += 1
                        titles.setdefault(url or title, (url, title))
                        integrity[a.get("integrity", "")] += 1
                activity = event.get("activity")
                if activity:
                    if activity["name"] == "web_search" and activity["id"]:
                        searches.add(activity["id"])
                    for s in activity.get("sources") or ():
                        url, title = s.get("url") or "", s.get("title") or ""
                        if url or title:
                            consulted.add(url or title)
                            titles.setdefault(url or title, (url, title))
            p = models.setdefault(pair, Counter())
            p["answers"] += 1
            p["searches"] += len(searches)
            p["searched_answers"] += bool(searches)
            p["consulted"] += len(consulted)
            p["cited_sources"] += len(cited)
            p["citations"] += sum(cited.values())
            p["consulted_not_cited"] += len(consulted - set(cited))
            p["cited_not_consulted"] += len(set(cited) - consulted)
            for name in source_index.INTEGRITIES:
                p[name] += integrity[name]
            for key in set(cited) | consulted:
                site = source_index.host_and_site(*titles[key])[1]
                for table, name in ((urls, key), (domains, site)):
                    row = table.setdefault(name, {
                        "cited": 0, "consulted": 0, "consulted_not_cited": 0,
                        "conversations": set(), "turns": set(), "models": Counter(),
                        "first_seen": when, "last_seen": when})
                    row["cited"] += cited[key]
                    row["consulted"] += key in consulted
                    row["consulted_not_cited"] += key in consulted and key not in cited
                    row["conversations"].add(doc["conversation"]["id"])
                    row["turns"].add(turn["id"])
                    if cited[key]:
                        row["models"][pair] += cited[key]
                    row["first_seen"] = min(row["first_seen"], when)
                    row["last_seen"] = max(row["last_seen"], when)
    for table in (urls, domains):
        for row in table.values():
            row["conversations"], row["turns"] = len(row["conversations"]), len(row["turns"])
            row["models"] = sorted(
                ({"provider": p, "model": m, "cited": n} for (p, m), n in row["models"].items()),
                key=lambda x: (-x["cited"], x["provider"], x["model"]))
    return {"url": urls, "domain": domains, "models": models}


def _reported(user: Any, group: str, f: Filters | None = None) -> dict[str, dict[str, Any]]:
    page = source_report.sources(user, f or Filters(), group=group, size=100_000)
    return {row["name"]: {k: row[k] for k in (*source_report.COLUMNS, "models")}
            for row in page.rows}


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


def test_every_count_agrees_with_the_portable_exports(alice):
    _store(alice)
    # a fork (copied rows) and someone else's conversation, which alice never sees
    bob = User.objects.create_user("bob")
    first = Conversation.objects.filter(owner=alice, citation_count__gt=0).first()
    forking.fork(first, 0, owner=alice)
    other = Conversation.objects.filter(owner=alice, citation_count__gt=0).last()
    store.set_owner(other, bob)
    mine = list(Conversation.objects.filter(owner=alice))
    assert SourceUse.objects.exists() and SearchUse.objects.exists()
    expected = _from_exports(mine)
    urls = expected["url"].values()
    assert all(any(r[k] for r in urls) for k in ("cited", "consulted", "consulted_not_cited"))
    assert _reported(alice, "url") == expected["url"]
    assert _reported(alice, "domain") == expected["domain"]
    profiles = {(p["provider"], p["model"]): p for p in source_report.models(alice, Filters())}
    assert set(profiles) == set(expected["models"])
    for pair, counted in expected["models"].items():
        p = profiles[pair]
        for name in ("answers", "searches", "searched_answers", "consulted", "cited_sources",
                     "citations", "consulted_not_cited", "cited_not_consulted"):
            assert p[name] == counted[name], (pair, name)
        assert p["integrity"] == {n: counted[n] for n in source_index.INTEGRITIES}
    # staff see everyone's, and an owner filter narrows to one
    staff = User.objects.create_user("staff", is_staff=True)
    everyone = _from_exports(list(Conversation.objects.all()))
    assert _reported(staff, "url") == everyone["url"]
    assert _reported(staff, "url", Filters(owner="alice")) == expected["url"]
    # the rows rebuilt from the store are the rows it kept
    kept = sorted(SourceUse.objects.values_list("turn_id", "key", "cited", "consulted", "site"))
    source_index.rebuild()
    assert sorted(SourceUse.objects.values_list("turn_id", "key", "cited", "consulted",
                                                "site")) == kept


def test_citations_per_day_agree_with_the_attributions(alice):
    _store(alice)
    expected: Counter[tuple[dt.date, str]] = Counter()
    for a in Attribution.objects.select_related("event__turn"):
        if a.url or a.title:
            turn = a.event.turn
            day = turn.created_at.astimezone(dt.UTC).date()
            expected[(day, source_report.model_label(turn.provider, turn.model))] += 1
    timeline = source_report.citations_over_time(alice, Filters(), models=100)
    found = Counter({(day, label): n for label, counts in timeline["series"].items()
                     for day, n in zip(timeline["days"], counts, strict=True) if n})
    assert expected and found == expected
    assert all(isinstance(day, dt.date) for day in timeline["days"])


def test_filters_narrow_by_model_date_and_search(alice):
    _store(alice)
    profiles = source_report.models(alice, Filters())
    cited = [p for p in profiles if p["citations"]]
    assert cited
    p = cited[0]
    only = Filters(provider=p["provider"], model=p["model"])
    rows = _reported(alice, "domain", only)
    assert sum(r["cited"] for r in rows.values()) == p["citations"]
    assert all(m["model"] == p["model"] for r in rows.values() for m in r["models"])
    tomorrow = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
    assert _reported(alice, "domain", Filters(since=tomorrow)) == {}
    assert _reported(alice, "domain", Filters(until=tomorrow)) == _reported(alice, "domain")
    assert _reported(alice, "url", Filters(q="no such words anywhere")) == {}
    with pytest.raises(source_report.InvalidFilter):
        Filters.read({"since": "yesterday"})


def test_a_gemini_redirect_counts_under_the_site_it_names_and_hosts_roll_up():
    redirect = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC"
    assert source_index.host_and_site(redirect, "news.bbc.co.uk") == ("news.bbc.co.uk",
                                                                      "bbc.co.uk")
    assert source_index.host_and_site(redirect, "not a domain") == (
        "vertexaisearch.cloud.google.com", "google.com")
    assert source_index.host_and_site("https://www.a.example.com/x", "") == ("a.example.com",
                                                                             "example.com")
    assert source_index.host_and_site("http://127.0.0.1:8000/", "") == ("127.0.0.1",
                                                                        "127.0.0.1")
    assert source_index.host_and_site("", "Report.pdf") == ("", "")


def test_a_live_turn_counts_its_searches_and_citations_once_provenance_comes_later(alice):
    conversation = store.create_conversation(owner=alice)
    ((turn, _),) = store.open_turns(conversation,
                                    [store.NewTurn("agent", [], status="streaming")])
    activity = ActivityBody("ws_1", "web_search", "completed", {"query": "q"}, "2 results",
                            ({"url": "https://a.example.org/1", "title": "One"},
                             {"url": "https://b.example.net/2", "title": "Two"}))
    store.append_events(turn, [EventRecord("hosted_activity", body=activity)])
    store.append_events(turn, [EventRecord("hosted_activity", body=activity)])
    store.set_provenance(turn, "openai", "gpt-x")
    rows = {u.key: u for u in SourceUse.objects.filter(turn=turn)}
    assert set(rows) == {"https://a.example.org/1", "https://b.example.net/2"}
    assert {(u.provider, u.model, u.site) for u in rows.values()} == {
        ("openai", "gpt-x", "example.org"), ("openai", "gpt-x", "example.net")}
    assert SearchUse.objects.filter(turn=turn).count() == 1
    (p,) = source_report.models(alice, Filters())
    assert (p["answers"], p["searches"], p["consulted"], p["consulted_not_cited"]) == (1, 1, 2, 2)
