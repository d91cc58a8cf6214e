"""The research ledger (``conversations.rendering.ledger``): built from a portable turn only, the
same for every provider. Recorded fixtures of each provider, and hand-made turns for the
cross-links the recordings do not show."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.ingest import ingest
from conversations.projections import conversation_dict
from conversations.rendering.ledger import build_ledger
from tests.conversations.test_ingest import files_for


def _agent_turn(provider: str, name: str, index: int = 0, *more: str) -> dict[str, Any]:
    files = [files_for(provider, [name])[index], *files_for(provider, list(more))]
    summary = ingest(provider, files)
    turns = conversation_dict(summary.conversation)["turns"]
    return next(t for t in turns if t["role"] == "agent")


@pytest.mark.django_db
def test_openai_searches_pages_opened_and_what_each_search_surfaced() -> None:
    turn = _agent_turn("openai", "vercel-ai__openai-web-search-tool.1.chunks.txt")
    ledger = build_ledger(turn)
    # open_page / find_in_page are pages opened, not searches.
    assert [s.queries for s in ledger.searches] == [
        ("tech news today December 5 2025",),
        ('site:theverge.com "December 5, 2025" "technology"',),
    ]
    assert [(s.state, s.results) for s in ledger.searches] == [("completed", 10),
                                                               ("completed", 11)]
    assert [o.action for o in ledger.opened] == ["open_page", "find_in_page", "find_in_page",
                                                 "find_in_page"]
    assert ledger.opened[1].pattern == "vercel"
    # Cited URLs carry ?utm_source=openai; the pages opened and the search results do not.
    by_number = {c.number: c for c in ledger.cited}
    assert {o.cited for o in ledger.opened} == {1, 5}
    assert by_number[1].opened and by_number[5].opened
    assert not by_number[2].opened
    assert ledger.searches[0].cited == (5, 6, 7)
    assert ledger.searches[1].cited == (1, 2, 3, 4)
    for search in ledger.searches:
        for number in search.cited:
            assert search.position in by_number[number].surfaced_by
    assert ledger.integrity.exact == 12 and not ledger.integrity.problems


@pytest.mark.django_db
def test_anthropic_pause_turn_searches_in_order_and_unranged_citations() -> None:
    name = "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction{}.sse.txt"
    turn = _agent_turn("anthropic", name.format("0.pause_turn"), 0,
                       name.format("1.continuation"))
    ledger = build_ledger(turn)
    started = [e["activity"]["id"] for e in turn["events"] if e["kind"] == "hosted_activity"
               and e["activity"]["state"] == "started"]
    assert [s.activity_id for s in ledger.searches] == started  # in the order they ran
    assert all(s.state == "completed" for s in ledger.searches)
    assert all(s.queries for s in ledger.searches)
    assert ledger.opened == ()  # web_search results are not pages opened
    assert all(not c.opened for c in ledger.cited)
    # Anthropic cites each passage as its own block: no range, nothing to check.
    assert ledger.integrity.unchecked == 19 and ledger.integrity.exact == 0
    # Every cited source that a search returned names that search.
    assert ledger.cited[0].surfaced_by == (1, 9)
    cited_urls = {a["source"]["url"] for e in turn["events"] if e["kind"] == "message"
                  for a in e["attributions"]}
    returned = {e["activity"]["id"]: {src["url"] for src in e["activity"]["sources"]}
                for e in turn["events"] if e["kind"] == "hosted_activity"
                and e["activity"]["state"] == "completed"}
    uncited = [aid for aid, urls in returned.items() if urls and not urls & cited_urls]
    assert uncited and [s.activity_id for s in ledger.searches
                        if s.results and not s.cited] == uncited


@pytest.mark.django_db
def test_gemini_grounding_repaired_ranges_are_counted() -> None:
    turn = _agent_turn(
        "google",
        "pydantic-ai__test_google_vertex_tool_combination_omits_include_server_side_tool"
        "_invocations.yaml", 1,
    )
    ledger = build_ledger(turn)
    assert ledger.integrity.exact == 7 and ledger.integrity.repaired == 9
    assert ledger.integrity.dropped == 0
    assert sum(c.repaired for c in ledger.cited) == 9
    assert ledger.searches[0].results == 4 and ledger.searches[0].cited == (1, 2, 3, 4)


@pytest.mark.django_db
def test_gemini_interactions_search_with_no_grounding_data_is_flagged() -> None:
    turn = _agent_turn("google", "vercel-ai__interactions-google-search.chunks.txt")
    ledger = build_ledger(turn)
    assert ledger.searches[0].no_results
    assert ledger.integrity.searches_without_results == (1,)
    assert ledger.integrity.problems
    assert all(c.surfaced_by == () for c in ledger.cited)


def _search(aid: str, query: str, urls: list[str], seq: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{aid}-s", "seq": seq, "kind": "hosted_activity",
         "activity": {"id": aid, "name": "web_search", "state": "started",
                      "input": {"query": query}, "summary": "", "sources": []}},
        {"id": f"{aid}-c", "seq": seq + 1, "kind": "hosted_activity",
         "activity": {"id": aid, "name": "web_search", "state": "completed",
                      "input": {"query": query}, "summary": "",
                      "sources": [{"url": u, "title": ""} for u in urls]}},
    ]


def _cite(url: str, start: int, end: int, integrity: str | None) -> dict[str, Any]:
    a: dict[str, Any] = {"source": {"url": url, "title": ""}, "excerpt": "",
                         "range": {"start": start, "end": end}, "incomplete": False}
    if integrity:
        a["integrity"] = integrity
    return a


def test_cross_links_and_integrity_on_a_hand_made_turn() -> None:
    text = "Alpha is first. Beta is second. Gamma is third."
    turn = {
        "id": "t", "role": "agent", "status": "complete", "events": [
            *_search("s1", "alpha", ["https://a.example/", "https://b.example/"], 1),
            *_search("s2", "nothing useful", ["https://z.example/"], 3),
            *_search("s3", "empty", [], 5),
            {"id": "f", "seq": 7, "kind": "hosted_activity",
             "activity": {"id": "f1", "name": "web_fetch", "state": "completed",
                          "input": {"url": "https://y.example/"}, "summary": "", "sources": []}},
            {"id": "m", "seq": 8, "kind": "message", "text": text, "incomplete": False,
             "attributions": [
                 _cite("https://a.example/", 0, 15, "exact"),
                 _cite("https://b.example/", 16, 31, "repaired"),
                 {"source": {"url": "https://c.example/", "title": "C"}, "excerpt": "",
                  "incomplete": False, "integrity": "dropped"},
                 {"source": {"url": "", "title": ""}, "excerpt": "", "incomplete": False,
                  "range": {"start": 32, "end": 47}, "integrity": "no_source"},
             ]},
        ]}
    ledger = build_ledger(turn)
    assert [s.position for s in ledger.searches] == [1, 2, 3]
    assert ledger.searches[0].cited == (1, 2)
    assert ledger.searches[1].results and not ledger.searches[1].cited  # nothing cited
    assert ledger.searches[2].no_results
    # The source naming nothing gets no number.
    assert [c.number for c in ledger.cited] == [1, 2, 3]
    assert [c.surfaced_by for c in ledger.cited] == [(1,), (1,), ()]
    assert [c.opened for c in ledger.cited] == [False, False, False]
    assert [(o.url, o.cited) for o in ledger.opened] == [("https://y.example/", None)]
    assert (ledger.cited[1].repaired, ledger.cited[2].dropped) == (1, 1)
    i = ledger.integrity
    assert (i.exact, i.repaired, i.dropped, i.no_source, i.unchecked) == (1, 1, 1, 1, 0)
    assert i.searches_without_results == (3,)
    doc = ledger.as_dict()
    assert doc["searches"][1] == {"activity_id": "s2", "name": "web_search",
                                  "queries": ["nothing useful"], "state": "completed",
                                  "results": 1, "cited": []}
    assert doc["opened"][0]["cited"] is None


def test_a_turn_with_nothing_researched_has_an_empty_ledger() -> None:
    turn = {"id": "t", "role": "agent", "events": [
        {"id": "m", "seq": 1, "kind": "message", "text": "Hi.", "attributions": []}]}
    assert build_ledger(turn).empty
    assert build_ledger({}).empty
    assert build_ledger("not a turn").empty  # type: ignore[arg-type]


def test_a_search_that_never_finished() -> None:
    turn = {"id": "t", "events": _search("s", "q", [], 1)[:1]}
    search = build_ledger(turn).searches[0]
    assert search.never_finished and search.results is None and not search.no_results
