"""The cited-domain filter finds a source by the domain the reader sees (Gemini's sources show
their site's domain as the title, their URL is a Google redirect) and by its URL's host; a URL
pasted in the filter finds its host (issue 36, item 5)."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import User
from django.db import connection

from conversations import domains, search
from conversations.ingest import ResponseFile, ingest
from conversations.models import ConversationFacet, FacetCount
from conversations.reading import conversation_rows, filter_choices
from live import bundled
from providers import WireContext
from tests.conversations.test_search import assert_matches_rebuild

pytestmark = pytest.mark.django_db

GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password="pw-alice-123")


def lighthouses(owner):
    raw = bundled.sample("gemini-lighthouses").responses[0].raw.encode()
    return ingest("google", [ResponseFile("l.sse", raw, WireContext(endpoint=GEMINI))],
                  owner=owner, prompt="Lighthouses?").conversation


def found(user, domain):
    return set(conversation_rows(user, domain=domain).values_list("pk", flat=True))


@pytest.mark.parametrize("typed", [
    "maritime-history.example",          # what the page shows (web.title)
    "MARITIME-history.example.",
    "https://www.maritime-history.example/pharos?x=1",  # a URL pasted whole
    "maritime-history.example/pharos",
    "vertexaisearch.cloud.google.com",   # the redirect's host
    "google.com",
])
def test_a_gemini_source_is_found_by_the_domain_the_reader_sees_and_its_redirect(alice, typed):
    conversation = lighthouses(alice)
    assert found(alice, typed) == {conversation.pk}
    assert found(alice, "elsewhere.example") == set()


def test_the_domain_choices_name_what_the_reader_sees_and_a_rebuild_agrees(alice):
    lighthouses(alice)
    assert "maritime-history.example" in filter_choices(alice)["domains"]
    assert_matches_rebuild([alice])


def test_a_title_that_is_no_host_name_adds_nothing():
    assert domains.reader_domain("Tide tables — FAQ") == ""
    assert domains.reader_domain("192.168.0.1") == ""
    assert domains.reader_domain("www.Example.org") == "example.org"
    assert domains.source_domains("https://a.example/x", "b.example") == ["a.example",
                                                                          "b.example"]
    assert domains.query_domain(" https://www.news.example:8443/a ") == "news.example"


def test_the_migration_backfills_the_facets_of_what_was_stored_before(alice):
    conversation = lighthouses(alice)
    # as stored before: the sources' hosts only
    ConversationFacet.objects.filter(value__endswith="example").delete()
    FacetCount.objects.filter(value__endswith="example").delete()
    assert found(alice, "maritime-history.example") == set()
    migration = importlib.import_module("conversations.migrations.0020_reader_domains")

    class Editor:
        pass

    editor = Editor()
    editor.connection = connection
    migration.add_reader_domains(None, editor)
    assert found(alice, "maritime-history.example") == {conversation.pk}
    assert "maritime-history.example" in filter_choices(alice)["domains"]
    assert search  # the backfill is search.domain_facet_rows
