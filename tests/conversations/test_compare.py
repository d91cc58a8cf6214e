"""Compare: an agent turn and its re-runs, with the sources cited by both, by one only, and
consulted but never cited."""

from __future__ import annotations

import pytest

from conversations import compare, forking, store
from streams.bodies import ActivityBody
from streams.builder import AttributionRecord, EventRecord
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db


def answer(conversation, provider, model, cited, consulted):
    sources = tuple({"url": u, "title": u.upper()} for u in consulted)
    return add_turn(conversation, "agent",
                    EventRecord("hosted_activity", body=ActivityBody(
                        f"search-{provider}", "web_search", "completed", {"query": "q"}, "",
                        sources, None)),
                    EventRecord("message", text="An answer.", attributions=[
                        AttributionRecord(u, f"T {u}") for u in cited]),
                    provider=provider, model=model, end_reason="end_turn")


@pytest.fixture
def family(django_user_model):
    owner = django_user_model.objects.create_user("owner")
    original = store.create_conversation(owner=owner, title="Q")
    add_user_turn(original, "Q?")
    answer(original, "anthropic", "claude", ["https://a", "https://both"],
           ["https://a", "https://both", "https://unused"])
    rerun = forking.fork(original, 0, owner=owner)
    answer(rerun, "openai", "gpt", ["https://both", "https://b"], ["https://b", "https://both"])
    fork_elsewhere = forking.fork(original, 1, owner=owner)  # a fork, not a re-run
    return owner, original, rerun, fork_elsewhere


def test_sources_are_sorted_by_who_cited_them(family):
    owner, original, _rerun, _ = family
    result = compare.compare(original, 1, owner)
    assert [a.label for a in result.answers] == ["anthropic · claude", "openai · gpt"]
    assert [s.url for s in result.cited_by_all] == ["https://both"]
    assert {s.url: s.cited_by for s in result.cited_by_some} == {"https://a": [0],
                                                                 "https://b": [1]}
    assert [(s.url, s.consulted_by) for s in result.consulted_only] == [("https://unused", [0])]
    assert result.consulted_only[0].title == "HTTPS://UNUSED"


def test_the_family_is_the_same_seen_from_a_rerun_and_forks_are_not_reruns(family):
    owner, original, rerun, fork_elsewhere = family
    seen = compare.family(rerun, 1, owner)
    assert [a.conversation.pk for a in seen] == [original.pk, rerun.pk]
    assert compare.reruns(original, 1) == [rerun]
    assert [a.conversation.pk for a in compare.family(fork_elsewhere, 1, owner)] == [
        fork_elsewhere.pk]


def test_only_what_the_user_may_see(family, django_user_model):
    _, original, _rerun, _ = family
    stranger = django_user_model.objects.create_user("stranger")
    assert compare.reruns(original, 1, stranger) == []
