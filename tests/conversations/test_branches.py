"""Branches at each fork point, seen from the original and from each fork (issue 36 item 7)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from conversations import branches, store
from conversations.forking import fork
from conversations.models import Turn
from streams.builder import EventRecord

pytestmark = pytest.mark.django_db


def answer(text: str) -> store.NewTurn:
    return store.NewTurn(Turn.Role.AGENT, [EventRecord("message", text=text)],
                         provider="openai", model="gpt-5", finished=True)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def tree(alice):
    turns = []
    for n in range(3):
        turns += [store.user_turn(f"Question {n}"), answer(f"Answer {n}")]
    main, _ = store.record_turns(turns, store.NewConversation(title="Main", owner=alice))
    forked = fork(main, 2, owner=alice, title="Forked")
    store.record_turns([store.user_turn("Another question"), answer("Its answer"),
                        store.user_turn("More"), answer("More answer")], forked)
    rerun = fork(main, 2, owner=alice, title="Re-run")
    store.record_turns([answer("A re-run answer")], rerun)
    deeper = fork(forked, 4, owner=alice, title="Deeper")
    store.record_turns([answer("A deeper answer")], deeper)
    fork(main, 2, owner=alice, title="Empty fork")  # no turn of its own yet: not a branch
    return {"main": main, "forked": forked, "rerun": rerun, "deeper": deeper}


def shown(conversation, user, indexes=range(0, 10)):
    return {i: ([b.title for b in p.branches], p.position)
            for i, p in branches.branch_points(conversation, user, indexes).items()}


def test_the_original_shows_its_forks_and_reruns(tree, alice):
    assert shown(tree["main"], alice) == {3: (["Main", "Forked", "Re-run"], 1)}


def test_a_fork_shows_its_source_and_siblings_and_its_own_forks(tree, alice):
    assert shown(tree["forked"], alice) == {3: (["Main", "Forked", "Re-run"], 2),
                                           5: (["Forked", "Deeper"], 1)}
    assert shown(tree["rerun"], alice) == {3: (["Main", "Forked", "Re-run"], 3)}
    # A fork of a fork: at 3 its turn is the fork's (where this one stands), at 5 its own.
    assert shown(tree["deeper"], alice) == {3: (["Main", "Deeper", "Re-run"], 2),
                                           5: (["Forked", "Deeper"], 2)}


def test_only_branches_the_reader_may_open(tree, alice, django_user_model):
    bob = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    theirs = fork(tree["main"], 2, owner=bob, title="Bob's")
    store.record_turns([answer("Bob's answer")], theirs)
    assert shown(tree["main"], alice) == {3: (["Main", "Forked", "Re-run"], 1)}
    assert shown(theirs, bob) == {}  # none of the others is his


def test_a_conversation_without_forks_has_no_branch_points(alice):
    alone, _ = store.record_turns([store.user_turn("Hi"), answer("Hello")],
                                  store.NewConversation(owner=alice))
    assert branches.branch_points(alone, alice, range(0, 2)) == {}


def test_the_page_links_each_branch_both_ways(tree, alice):
    client = Client()
    client.force_login(alice)
    html = client.get(f"/c/{tree['main'].pk}/").content.decode()
    nav = re.search(r'<nav class="branches".*?</nav>', html, re.S).group(0)
    assert "Branch 1 / 3" in nav and 'rel="next"' in nav and 'rel="prev"' not in nav
    forked_turn = tree["forked"].turns.get(index=3)
    assert f'/c/{tree["forked"].pk}/?turn={forked_turn.pk}#turn-{forked_turn.pk}' in nav
    html = client.get(f"/c/{tree['rerun'].pk}/").content.decode()
    nav = re.search(r'<nav class="branches".*?</nav>', html, re.S).group(0)
    main_turn = tree["main"].turns.get(index=3)
    assert "Branch 3 / 3" in nav and f'?turn={main_turn.pk}#turn-{main_turn.pk}' in nav
