"""What the pages say (issue 36): a styled 404, the fork a conversation came from named,
each turn's landmark named apart, Compare without re-runs, the two JSON downloads named apart,
an activity's disclosure named by what it is, titles and search snippets without markdown."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client

from conversations import store
from conversations.forking import fork
from conversations.models import Turn
from streams.bodies import ActivityBody
from streams.builder import EventRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def client_of(alice):
    client = Client()
    client.force_login(alice)
    return client


def answer(text: str, **kw) -> store.NewTurn:
    return store.NewTurn(Turn.Role.AGENT, [EventRecord("message", text=text)],
                         provider="openai", model="gpt-5", finished=True, **kw)


@pytest.fixture
def talk(alice):
    conversation, _ = store.record_turns([
        store.user_turn("## What about **tides**?"), answer("## Tides\n\nThe **Moon** pulls."),
        store.user_turn("And the Sun?"), answer("It pulls too."),
    ], store.NewConversation(title="## **Tides** explained", owner=alice))
    return conversation


def test_a_missing_page_is_styled(client_of):
    response = client_of.get(f"/c/{uuid.uuid4()}/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Page not found" in html and "app.css" in html
    assert 'href="/"' in html  # a way back


def test_a_forbidden_page_is_styled(client_of, django_user_model, talk):
    other = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    client_of.force_login(other)
    mine = store.create_conversation(title="Bob's", owner=other)
    client_of.force_login(talk.owner)
    response = client_of.post(f"/c/{mine.pk}/rename/", {"title": "x"})
    assert response.status_code == 404  # another's conversation is not found, styled
    assert "Page not found" in response.content.decode()


def test_each_turn_landmark_has_its_own_name(client_of, talk):
    html = client_of.get(f"/c/{talk.pk}/").content.decode()
    heads = re.findall(r'<h2 class="turn-role">(.*?)</h2>', html)
    assert len(heads) == 4 and len(set(heads)) == 4, heads


def test_a_fork_names_the_conversation_it_came_from(client_of, talk, alice, django_user_model):
    child = fork(talk, 1, owner=alice)
    html = client_of.get(f"/c/{child.pk}/").content.decode()
    assert f'forked from <a href="/c/{talk.pk}/">“Tides explained”</a> at turn 1' in html
    # A reader who may not open it is told there is one, not its name.
    bob = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    theirs = fork(talk, 1, owner=bob, title="Bob's copy")
    client_of.force_login(bob)
    html = client_of.get(f"/c/{theirs.pk}/").content.decode()
    assert "forked from a conversation you cannot open" in html and "Tides explained" not in html


def test_compare_without_reruns_says_so(client_of, talk):
    html = client_of.get(f"/c/{talk.pk}/turns/1/compare/").content.decode()
    assert "re-runs" not in html and "it has no re-run yet" in html
    fork(talk, 0, owner=talk.owner)
    rerun = fork(talk, 0, owner=talk.owner)
    store.record_turns([answer("Another answer.")], rerun)
    html = client_of.get(f"/c/{talk.pk}/turns/1/compare/").content.decode()
    assert "the original and its re-run." in html


def test_the_two_json_downloads_have_their_own_names(client_of, talk):
    base = f"/api/v1/conversations/{talk.pk}/export?format=json"
    portable = client_of.get(base)["Content-Disposition"]
    native = client_of.get(base + "&projection=native")["Content-Disposition"]
    assert portable == f'attachment; filename="conversation-{talk.pk}.json"'
    assert native == f'attachment; filename="conversation-{talk.pk}-native.json"'


def test_an_activity_disclosure_says_what_it_is(client_of, alice):
    conversation, _ = store.record_turns([store.NewTurn(Turn.Role.AGENT, [EventRecord(
        "hosted_activity", body=ActivityBody("act_1", "image_generation", "completed",
                                             {"size": "1024x1024", "quality": "high"},
                                             "", (), ""))], finished=True)],
        store.NewConversation(owner=alice))
    html = client_of.get(f"/c/{conversation.pk}/").content.decode()
    assert "<summary>Image generation input</summary>" in html
    assert "<summary>input</summary>" not in html


def test_titles_and_snippets_show_no_markdown(client_of, talk):
    html = client_of.get(f"/c/{talk.pk}/").content.decode()
    assert "<h1>Tides explained</h1>" in html
    listed = client_of.get("/").content.decode()
    assert "Tides explained" in listed and "**" not in listed and "##" not in listed
    found = client_of.get("/?q=Moon").content.decode()
    assert "<mark>Moon</mark> pulls" in found and "**" not in found and "##" not in found


def test_find_reads_every_turn_as_plain_text(client_of, talk):
    response = client_of.get(f"/c/{talk.pk}/find/?q=moon", HTTP_ACCEPT="application/json")
    data = response.json()
    [found] = data["results"]
    assert (found["index"], found["role"], found["match"]) == (1, "agent", "Moon")
    assert found["before"] == "Tides The " and found["after"] == " pulls."
    assert found["url"].endswith(f"?turn={found['turn']}&find=moon#turn-{found['turn']}")
    # Without script: a page of links.
    html = client_of.get(f"/c/{talk.pk}/find/?q=moon").content.decode()
    assert "<mark>Moon</mark> pulls." in html
    assert client_of.get(f"/c/{talk.pk}/find/?q=absent",
                         HTTP_ACCEPT="application/json").json()["results"] == []


def test_an_answer_as_markdown(client_of, talk):
    response = client_of.get(f"/c/{talk.pk}/turns/1/markdown/")
    assert response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert text.startswith("## Tides") and "The **Moon** pulls." in text
    assert "Turn 2" not in text


def test_each_turn_has_a_permalink(client_of, talk):
    html = client_of.get(f"/c/{talk.pk}/").content.decode()
    for turn in talk.turns.all():
        assert (f'<a class="permalink" href="/c/{talk.pk}/?turn={turn.pk}#turn-{turn.pk}">'
                in html)


def test_the_owner_sees_a_turns_native_payloads_escaped_and_size_gated(client_of, alice,
                                                                       django_user_model):
    from streams.parts import Payload

    big = {"text": "<script>alert(1)</script>" + "x" * 70_000}
    conversation, _ = store.record_turns([store.NewTurn(Turn.Role.AGENT, [
        EventRecord("message", text="Hi", payload=Payload("anthropic", "anthropic.content_block",
                                                          "v1", {"type": "text", "text": "Hi"})),
        EventRecord("message", text="Big", payload=Payload("openai", "openai.item", "v1", big)),
    ], finished=True)], store.NewConversation(owner=alice))
    page = client_of.get(f"/c/{conversation.pk}/").content.decode()
    assert f"/c/{conversation.pk}/turns/0/payloads/" in page
    html = client_of.get(f"/c/{conversation.pk}/turns/0/payloads/").content.decode()
    assert html.count("<details>") == 2
    assert "&quot;type&quot;: &quot;text&quot;" in html  # pretty, escaped JSON text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "Larger than 64.0 KB" in html and "x" * 70_000 not in html
    bob = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    client_of.force_login(bob)
    assert client_of.get(f"/c/{conversation.pk}/turns/0/payloads/").status_code == 404


def test_a_document_citation_shows_its_title_quote_and_pages(client_of, alice):
    from streams.builder import AttributionRecord

    cited = EventRecord("message", text="Revenue grew.", attributions=[
        AttributionRecord("", "Annual report.pdf", "Revenue grew 12%", pages=(3, 4)),
        AttributionRecord("", "Notes.txt", "grew by a lot")])  # a char_location: no pages
    conversation, _ = store.record_turns([store.NewTurn(
        Turn.Role.AGENT, [cited], provider="anthropic", model="claude-x", finished=True)],
        store.NewConversation(owner=alice))
    html = client_of.get(f"/c/{conversation.pk}/").content.decode()
    sources = html[html.index('<div class="sources">'):]
    assert "Annual report.pdf" in sources and "“Revenue grew 12%”" in sources
    assert '<span class="domain source-pages">p. 3–4</span>' in sources
    assert "Notes.txt" in sources and "“grew by a lot”" in sources
    assert sources.count("source-pages") == 1
