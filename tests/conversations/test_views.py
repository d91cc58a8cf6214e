"""The browser pages: access, search and filters, what a conversation page shows, caching."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from conversations.ingest import ingest
from conversations.models import RenderedHTML
from tests.conversations.test_ingest import files_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob():
    return User.objects.create_user("bob", password="pw-bob-123")


def ingested(owner, provider, name, index=0, prompt=""):
    return ingest(provider, [files_for(provider, [name])[index]], owner=owner, prompt=prompt)


ANTHROPIC = "vercel-ai__anthropic-web-search-tool.1.chunks.txt"
AZURE = "vercel-ai__azure-web-search-preview-tool.1.chunks.txt"
REDACTED = "pydantic-ai__test_anthropic_model_thinking_part_redacted_stream.yaml"


def test_pages_require_login(client, alice):
    s = ingested(alice, "anthropic", ANTHROPIC)
    for url in (reverse("conversation-list"),
                reverse("conversation-detail", args=[s.conversation.pk]),
                reverse("turn-fragment", args=[s.conversation.pk, 0])):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_owners_see_theirs_staff_see_all(client, alice, bob):
    s = ingested(alice, "anthropic", ANTHROPIC)
    url = reverse("conversation-detail", args=[s.conversation.pk])
    client.force_login(bob)
    assert client.get(url).status_code == 404
    assert s.conversation.title not in client.get(reverse("conversation-list")).content.decode()
    bob.is_staff = True
    bob.save()
    assert client.get(url).status_code == 200
    client.force_login(alice)
    assert client.get(url).status_code == 200


def test_every_html_response_has_a_strict_csp(client, alice):
    s = ingested(alice, "anthropic", ANTHROPIC)
    client.force_login(alice)
    for url in (reverse("conversation-list"), reverse("conversation-detail",
                                                      args=[s.conversation.pk]),
                reverse("login")):
        csp = client.get(url)["Content-Security-Policy"]
        script = re.search(r"script-src ([^;]*)", csp).group(1)
        assert script.strip() == "'self'" and "unsafe-inline" not in csp
        assert "default-src 'self'" in csp and "object-src 'none'" in csp


def test_conversation_page_shows_provenance_timeline_and_sources(client, alice):
    s = ingested(alice, "anthropic", ANTHROPIC, prompt="What's new in tech today?")
    client.force_login(alice)
    html = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    assert "anthropic · claude-sonnet-4-20250514" in html
    assert "Web search" in html and "10 results" in html
    # One marker per (cited block, source): several citations of one page in a block share it.
    pairs = {(e.pk, a.url) for e in s.turn.events.all() for a in e.attributions.all()}
    assert html.count('class="cite-marker') == len(pairs)
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "#:~:text=" in html  # source links scroll to the quoted passage
    assert "Also consulted" in html
    assert "What&#x27;s new in tech today?" in html or "What's new in tech today?" in html


def test_search_that_never_finished_says_so(client, alice):
    s = ingested(alice, "openai", AZURE)
    client.force_login(alice)
    html = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    assert "never finished" in html


def test_redacted_reasoning_is_shown_as_redacted(client, alice):
    s = ingested(alice, "anthropic", REDACTED)
    client.force_login(alice)
    html = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    # two redacted blocks with no message between them: one row that counts them
    assert html.count("redacted by the provider") == 1
    assert "redacted by the provider (2 steps)" in html


def test_failed_turn_says_so(client, alice):
    s = ingested(alice, "openai", "vercel-ai__openai-error.1.chunks.txt")
    client.force_login(alice)
    html = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    assert "This turn failed" in html and 'data-status="failed"' in html
    # the provider's code and message are on the page
    assert "insufficient_quota" in html and "You exceeded your current quota" in html


def test_gemini_search_chip_is_sandboxed_in_a_document_of_its_own(client, alice):
    s = ingested(alice, "google", "pydantic-ai__test_google_model_web_search_tool_stream.yaml")
    client.force_login(alice)
    response = client.get(reverse("conversation-detail", args=[s.conversation.pk]))
    html = response.content.decode()
    iframe = re.search(r"<iframe[^>]*>", html).group(0)
    assert 'sandbox="' in iframe and "allow-scripts" not in iframe
    assert "allow-same-origin" not in iframe and "srcdoc=" not in iframe
    src = re.search(r'src="([^"]+)"', iframe).group(1)
    policy = {d.strip() for d in client.get(src)["Content-Security-Policy"].split(";")}
    assert {"default-src 'none'", "style-src 'unsafe-inline'"} <= policy  # (in any order)
    # The page's own policy allows no inline style at all any more.
    assert "style-src 'self';" in response["Content-Security-Policy"]


def test_rendered_html_is_cached_so_a_reload_does_no_markdown_work(client, alice):
    s = ingested(alice, "anthropic", ANTHROPIC)
    client.force_login(alice)
    url = reverse("conversation-detail", args=[s.conversation.pk])
    first = client.get(url).content
    runs = first.count(b'<div class="message"')
    assert runs >= 1 and RenderedHTML.objects.count() == runs
    with mock.patch("conversations.rendering.turn.render_markdown",
                    side_effect=AssertionError("rendered again")):
        second = client.get(url).content
    assert re.sub(rb"csrfmiddlewaretoken\" value=\"[^\"]+", b"", first) == re.sub(
        rb"csrfmiddlewaretoken\" value=\"[^\"]+", b"", second)


def test_turn_fragment(client, alice):
    s = ingested(alice, "anthropic", ANTHROPIC)
    client.force_login(alice)
    response = client.get(reverse("turn-fragment", args=[s.conversation.pk, 0]))
    html = response.content.decode()
    assert html.lstrip().startswith("<section") and f'id="turn-{s.turn.pk}"' in html
    assert client.get(reverse("turn-fragment", args=[s.conversation.pk, 7])).status_code == 404


class TestList:
    @pytest.fixture
    def data(self, alice):
        a = ingested(alice, "anthropic", ANTHROPIC, prompt="tech news please")
        o = ingested(alice, "openai", "vercel-ai__openai-web-search-tool.1.json")
        return a, o

    def titles(self, client, **params):
        html = client.get(reverse("conversation-list"), params).content.decode()
        return html

    @pytest.mark.usefixtures("data")
    def test_counts_and_chips(self, client, alice):
        client.force_login(alice)
        html = self.titles(client)
        assert "anthropic · claude-sonnet-4-20250514" in html
        assert "14 citations" in html and "1 search" in html and "2 turns" in html
        assert "tech news please" in html

    def test_each_row_links_to_its_conversation(self, client, alice, data):
        client.force_login(alice)
        html = self.titles(client)
        links = re.findall(r'<a class="row-link" href="([^"]+)">', html)
        assert sorted(links) == sorted(reverse("conversation-detail", args=[s.conversation.pk])
                                       for s in data)

    def test_search_text_source_title_and_url(self, client, alice, data):
        a, _ = data
        client.force_login(alice)
        message = a.turn.events.filter(kind="message").last().text.split()[2]
        assert a.conversation.title in self.titles(client, q=message)
        attribution = a.turn.events.filter(attributions__isnull=False).first().attributions.first()
        assert a.conversation.title in self.titles(client, q=attribution.title[:20])
        html = self.titles(client, q="nothing-matches-this-xyzzy")
        assert "No conversation matches" in html

    def test_filters(self, client, alice, data):
        a, o = data
        client.force_login(alice)
        only_openai = self.titles(client, provider="openai")
        assert o.conversation.title in only_openai and a.conversation.title not in only_openai
        assert a.conversation.title in self.titles(client, model="claude-sonnet-4-20250514")
        domain = a.turn.events.filter(attributions__isnull=False).first() \
            .attributions.first().domain
        assert a.conversation.title in self.titles(client, domain=domain)
        assert a.conversation.title not in self.titles(client, domain="nowhere.invalid")

    def test_pagination(self, client, alice):
        """Keyset pages: next / previous / last links by cursor walk every row once, in order,
        and a link stays right after newer conversations arrive."""
        import html as html_lib
        import re

        from conversations import store

        for i in range(60):
            store.create_conversation(title=f"conversation {i:02d}", owner=alice)
        client.force_login(alice)

        def page(href=""):
            body = client.get(reverse("conversation-list") + html_lib.unescape(href)) \
                .content.decode()
            titles = re.findall(r'<span class="row-title">conversation (\d\d)</span>', body)
            links = dict(re.findall(r'rel="(first|prev|next|last)" href="([^"]*)"', body))
            return [int(t) for t in titles], links

        seen, links = page()
        assert seen == list(range(59, 34, -1)) and "prev" not in links
        second, links2 = page(links["next"])
        assert second == list(range(34, 9, -1))
        store.create_conversation(title="conversation 99", owner=alice)  # newer: no shift
        third, links3 = page(links2["next"])
        assert third == list(range(9, -1, -1)) and "next" not in links3
        back, _ = page(links3["prev"])
        assert back == second
        last, links_last = page(links["last"])
        assert last == list(range(24, -1, -1))[:25] and "next" not in links_last
        newest, _ = page(links_last["first"])
        assert newest[0] == 99

    def test_search_result_shows_a_marked_escaped_snippet(self, client, alice):
        from conversations import store
        from conversations.store import NewConversation, NewTurn
        from streams.builder import EventRecord

        text = "Before the match <b>bold</b> a Quokka-like marsupial & friends, then more."
        store.record_turns([NewTurn("user", [EventRecord("message", text=text)])],
                           NewConversation(title="animals", owner=alice))
        later = "An answer " + "that goes on " * 20 + "to the Quokka-like <i>end</i>."
        store.record_turns([NewTurn("user", [EventRecord("message", text="Hello there")]),
                            NewTurn("agent", [EventRecord("message", text=later)])],
                           NewConversation(title="greeting", owner=alice))
        client.force_login(alice)
        html = self.titles(client, q="quokka-LIKE")
        # The match in the first user line is marked where the row shows that line: once.
        assert ('<p class="row-first">Before the match &lt;b&gt;bold&lt;/b&gt; a '
                "<mark>Quokka-like</mark> marsupial &amp; friends, then more.</p>") in html
        assert html.count("<mark>") == 2 and html.count('<p class="row-snippet">') == 1
        # Elsewhere, a snippet of the passage, after the row's (unmarked) first line.
        assert '<p class="row-first">Hello there</p>' in html
        assert ("goes on to the <mark>Quokka-like</mark> &lt;i&gt;end&lt;/i&gt;.</p>"
                in html)
        assert "<b>bold</b>" not in html and "<i>end</i>" not in html


def test_finished_turns_are_served_from_their_cached_fragment(client, alice):
    from conversations.models import TurnFragment

    s = ingested(alice, "anthropic", ANTHROPIC)
    client.force_login(alice)
    url = reverse("conversation-detail", args=[s.conversation.pk])
    first = client.get(url).content.decode()
    assert TurnFragment.objects.filter(turn=s.turn).exists()
    with mock.patch("conversations.reading.render_turn",
                    side_effect=AssertionError("rendered again")):
        second = client.get(url).content.decode()
    strip = re.compile(r'csrfmiddlewaretoken" value="[^"]+')
    assert strip.sub("", first) == strip.sub("", second)
    # A changed turn (here: its status) is rendered afresh, never served stale.
    s.turn.status = "interrupted"
    s.turn.save(update_fields=["status"])
    assert "This turn was interrupted" in client.get(url).content.decode()
