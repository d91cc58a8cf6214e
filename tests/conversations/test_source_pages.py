"""The Sources pages: domains, hosts, URLs, the turns citing one, the models' profiles side by
side, their charts (static SVG: no script, no inline style) and exports."""

from __future__ import annotations

import csv
import io
import re

import orjson
import pytest
from django.contrib.auth.models import User

from tests.api.conftest import build_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(client) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def test_the_domains_page_its_sorting_and_its_exports(client, alice):
    build_conversation(owner=alice)
    page = client.get("/sources/")
    html = page.content.decode()
    assert page.status_code == 200
    assert '<a href="/sources/">Sources</a>' in html  # the header's section link
    assert html.index("example.fr") < html.index("example.com") or "example.com" in html
    assert 'aria-sort="descending"' in html
    ascending = client.get("/sources/", {"sort": "name", "order": "asc"}).content.decode()
    assert ascending.index(">example.com<") < ascending.index(">example.fr<")
    rows = list(csv.DictReader(io.StringIO(
        client.get("/sources/", {"format": "csv"}).content.decode())))
    assert {r["domain"]: (r["cited"], r["consulted"]) for r in rows} == {
        "example.fr": ("1", "1"), "example.com": ("1", "0")}
    assert "anthropic · claude-sonnet-4-20250514: 1" in rows[0]["models"]
    exported = orjson.loads(client.get("/sources/urls/", {"format": "json"}).content)
    assert {e["url"] for e in exported} == {"https://meteo.example.fr/paris",
                                           "https://news.example.com/today"}
    assert client.get("/sources/", {"since": "soon"}).status_code == 400


def test_a_domain_shows_its_hosts_and_the_turns_citing_it_with_the_span(client, alice):
    conversation = build_conversation(owner=alice)
    html = client.get("/sources/hosts/", {"domain": "example.fr"}).content.decode()
    assert "meteo.example.fr" in html
    assert '<blockquote class="cited-span">sunny</blockquote>' in html
    turn = conversation.turns.get(index=1)
    assert f"?turn={turn.pk}#turn-{turn.pk}" in html
    by_url = client.get("/sources/turns/", {"url": "https://news.example.com/today"})
    # no range: the whole event is the cited span
    assert "It is sunny in Paris today." in by_url.content.decode()


def test_others_conversations_are_not_counted_and_only_staff_filter_by_owner(client, alice):
    bob = User.objects.create_user("bob")
    build_conversation(owner=bob)
    html = client.get("/sources/", {"owner": "bob"}).content.decode()
    assert "example.fr" not in html and 'name="owner"' not in html
    staff = User.objects.create_user("staff", is_staff=True)
    client.force_login(staff)
    html = client.get("/sources/").content.decode()
    assert "example.fr" in html and 'name="owner"' in html
    assert "example.fr" not in client.get("/sources/", {"owner": "alice"}).content.decode()


def test_the_models_page_sets_two_side_by_side_with_static_charts(client, alice):
    build_conversation(owner=alice)
    page = client.get("/sources/models/", {"a": "anthropic/claude-sonnet-4-20250514",
                                           "b": "/"})
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('<article class="profile"') == 2
    assert "Top cited domains of anthropic · claude-sonnet-4-20250514" in html
    charts = re.findall(r"<svg\b.*?</svg>", html, re.S)
    assert len(charts) == 2  # consulted vs cited; the chosen model's top domains
    for svg in charts:
        assert 'role="img"' in svg and "aria-label=" in svg
        assert not re.search(r"<script|<style| style=| id=|<!--", svg)
    rows = list(csv.DictReader(io.StringIO(
        client.get("/sources/models/", {"format": "csv"}).content.decode())))
    assert {(r["provider"], r["answers"]) for r in rows} == {
        ("anthropic", "1"), ("", "1")}


def test_the_timeline_chart_and_its_table(client, alice):
    build_conversation(owner=alice)
    html = client.get("/sources/").content.decode()
    assert "Citations over time" in html and "<svg" in html
    assert "<caption id=\"timeline-caption\">" in html


def test_anonymous_users_are_sent_to_log_in(client):
    for url in ("/sources/", "/sources/urls/", "/sources/models/", "/sources/turns/?url=x"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_chart_of_counts_has_whole_ticks_and_room_for_its_legend():
    from conversations import source_charts

    counts = source_charts.bars(["a.example", "b.example"], {"Cited": [7, 1]}, "c", width=420)
    ticks = re.findall(r'<g class="axis x[^"]*">(.*?)</g></g>', counts)[0]
    assert re.findall(r">([^<]+)</text>", ticks) == ["0", "2", "4", "6", "8"]
    assert 'class="legends"' not in counts  # one series: the heading names it
    import datetime

    day = datetime.date(2026, 12, 6)
    series = {f"provider · model-{n}": [n + 1] for n in range(5)}  # three legend rows
    timeline = source_charts.over_time([day], series, "t")
    height = float(re.search(r'viewBox="0 0 \S+ (\S+)"', timeline).group(1))
    legend_y = float(re.search(r'transform="translate\([^,]+, ([^)]+)\)" class="legends"',
                               timeline).group(1))
    rows = [float(y) for y in re.findall(r'<rect x="[^"]+" y="([^"]+)" width="12"', timeline)]
    assert legend_y + max(rows) + 12 <= height  # the last row inside the drawing

    # one model over time (a search's): no legend, which pygal drew half under the edge
    alone = source_charts.over_time([day], {"anthropic · claude-x": [4]}, "t")
    assert 'class="legends"' not in alone
