"""Ingest of every recorded provider response, through adapters, the builder and the store."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations.ingest import ResponseFile, ingest
from conversations.models import Attribution, Conversation, Event, Turn
from tests.support import PROVIDER_FIXTURES, recorded

pytestmark = pytest.mark.django_db

GROUPS = {
    # Files that are one turn: a response and its continuation.
    "pause_turn": ("anthropic", [
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt",
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt",
    ]),
    "web_fetch_error": ("anthropic", [
        "vercel-ai__anthropic-issue-10819-web-fetch-error.1.chunks.txt",
        "vercel-ai__anthropic-issue-10819-web-fetch-error.2.chunks.txt",
    ]),
}


def files_for(provider: str, names: list[str]) -> list[ResponseFile]:
    out = []
    for name in names:
        for i, rec in enumerate(recorded(provider, name)):
            out.append(ResponseFile(f"{name}#{i}", rec.raw, rec.context))
    return out


def ingest_one(provider: str, name: str, index: int = 0):
    return ingest(provider, [files_for(provider, [name])[index]])


def activity_states(turn: Turn) -> dict[str, str]:
    states = {}
    for event in turn.events.filter(kind="hosted_activity").order_by("seq"):
        states[event.activity_id] = event.typed_body.state
    return states


def all_fixture_files() -> list[tuple[str, str, int]]:
    if not PROVIDER_FIXTURES.exists():
        return []
    out = []
    for provider in ("anthropic", "openai", "google"):
        for path in sorted((PROVIDER_FIXTURES / provider).glob("*")):
            count = len(recorded(provider, path.name))
            out.extend((provider, path.name, i) for i in range(count))
    return out


@pytest.mark.parametrize(("provider", "name", "index"), all_fixture_files()
                         or [pytest.param("", "", 0, marks=pytest.mark.skip(
                             reason=f"{PROVIDER_FIXTURES} is absent"))])
def test_every_recorded_response_ingests(provider, name, index):
    summary = ingest_one(provider, name, index)
    turn = summary.turn
    assert turn.role == "agent"
    assert turn.provider and turn.model, "every agent turn records the served model"
    assert turn.status in {"complete", "failed", "interrupted"}
    assert summary.events == turn.events.count() > 0
    for attribution in Attribution.objects.filter(event__turn=turn, range_start__isnull=False):
        text = attribution.event.text
        assert 0 <= attribution.range_start < attribution.range_end <= len(text)


def test_anthropic_web_search_stream():
    s = ingest_one("anthropic", "vercel-ai__anthropic-web-search-tool.1.chunks.txt")
    assert (s.provider, s.model) == ("anthropic", "claude-sonnet-4-20250514")
    assert s.citations == 14 and s.end_reason == "end_turn" and s.status == "complete"
    assert list(s.activities.values()) == ["completed"]
    search = s.turn.events.filter(kind="hosted_activity").last().typed_body
    assert search.name == "web_search" and search.input["query"]
    assert search.summary == "10 results" and len(search.sources) == 10
    assert s.usage["web_search_requests"] == 1
    # Each cited passage is its own text block: whole-event attributions carrying replay values.
    cited = Attribution.objects.filter(event__turn=s.turn)
    assert all(a.range_start is None and a.replay_id for a in cited)
    assert all(a.excerpt for a in cited)


def test_anthropic_body_with_empty_search_result():
    s = ingest_one("anthropic", "vercel-ai__anthropic-web-search-tool.1.json")
    assert list(s.activities.values()) == ["completed", "completed"]
    summaries = [e.typed_body.summary for e in
                 s.turn.events.filter(kind="hosted_activity").order_by("seq")]
    assert "no results" in summaries  # an empty list is a search that found nothing, not a failure
    assert s.citations == sum(1 for _ in Attribution.objects.filter(event__turn=s.turn))
    assert s.usage["web_search_requests"] == 2


def test_pause_turn_leaves_a_search_open_and_the_continuation_closes_it():
    provider, names = GROUPS["pause_turn"]
    paused = ingest(provider, files_for(provider, names[:1]))
    open_ids = [k for k, v in activity_states(paused.turn).items() if v == "started"]
    assert paused.end_reason == "pause_turn" and len(open_ids) == 1
    assert len(paused.activities) == 11

    whole = ingest(provider, files_for(provider, names))
    states = activity_states(whole.turn)
    assert states[open_ids[0]] == "completed"
    assert set(states.values()) == {"completed"} and len(states) == 15
    assert whole.end_reason == "end_turn" and whole.status == "complete"
    assert [r["trigger"] for r in whole.turn.responses_list] == ["initial", "pause_turn"]
    assert whole.citations == 19


def test_web_fetch_error_across_a_client_tool_round():
    provider, names = GROUPS["web_fetch_error"]
    s = ingest(provider, files_for(provider, names))
    assert set(s.activities.values()) == {"failed"} and len(s.activities) == 1
    failed = s.turn.events.filter(kind="hosted_activity").last()
    assert (failed.activity_name, failed.typed_body.error_code) == (
        "web_fetch", "url_not_accessible")
    [call] = s.turn.events.filter(kind="tool_call_request")
    assert call.typed_body.name != "web_fetch"  # the client tool, not the hosted fetch
    assert [r["trigger"] for r in s.turn.responses_list] == ["initial", "tool_result"]


def test_redacted_thinking_is_kept_as_redacted():
    s = ingest_one("anthropic",
                   "pydantic-ai__test_anthropic_model_thinking_part_redacted_stream.yaml")
    reasoning = list(s.turn.events.filter(kind="reasoning"))
    assert len(reasoning) == 2
    for event in reasoning:
        assert event.typed_body.redacted is True and event.text == ""
        assert event.payload.format and "redacted_thinking" in event.payload.value


def test_openai_web_search_stream():
    s = ingest_one("openai", "vercel-ai__openai-web-search-tool.1.chunks.txt")
    assert s.model.startswith("gpt-5-mini") and s.end_reason == "end_turn"
    assert len(s.activities) == 6 and set(s.activities.values()) == {"completed"}
    message = s.turn.events.get(kind="message")
    ranged = list(message.attributions.all())
    assert len(ranged) == 12 and all(a.range_start is not None for a in ranged)


def test_openai_azure_search_never_completes():
    s = ingest_one("openai", "vercel-ai__azure-web-search-preview-tool.1.chunks.txt")
    assert list(s.activities.values()) == ["started"]  # shown as never finished
    assert s.citations == 1 and s.status == "complete"


def test_openai_error_stream_gives_a_failed_turn():
    s = ingest_one("openai", "vercel-ai__openai-error.1.chunks.txt")
    assert s.status == "failed" and s.end_reason == "error"
    assert s.turn.events.get(kind="error").typed_body.code == "insufficient_quota"


def test_openai_file_search_citations():
    s = ingest_one("openai", "vercel-ai__openai-file-search-tool.1.chunks.txt")
    assert s.citations == 2
    assert list(s.turn.events.filter(kind="hosted_activity").values_list("activity_id", flat=True))


def test_openai_annotation_spans_the_link_the_model_wrote():
    s = ingest_one("openai", "pydantic-ai__test_openai_include_raw_annotations_streaming.yaml")
    [a] = Attribution.objects.filter(event__turn=s.turn)
    cited = a.event.text[a.range_start:a.range_end]
    assert cited.startswith("(") and "](" in cited and a.url.split("?")[0] in cited


def test_gemini_ranges_match_segment_text_despite_drift():
    name = ("pydantic-ai__test_google_vertex_tool_combination_omits_include_server_side_tool_"
            "invocations.yaml")
    s = ingest_one("google", name, index=1)
    message = s.turn.events.filter(kind="message").last()
    ranged = [a for a in message.attributions.all() if a.range_start is not None]
    assert ranged, "the drifted supports are repaired, not dropped"
    raw_supports = _gemini_supports(name, 1)
    quotes = {support["segment"]["text"] for support in raw_supports}
    for a in ranged:
        assert message.text[a.range_start:a.range_end] in quotes


def _gemini_supports(name: str, index: int) -> list[dict]:
    import orjson

    body = orjson.loads(recorded("google", name)[index].raw)
    return body["candidates"][0]["groundingMetadata"]["groundingSupports"]


def test_gemini_stream_utf8_offsets():
    s = ingest_one("google", "pydantic-ai__test_google_model_web_search_tool_stream.yaml")
    message = s.turn.events.filter(kind="message").last()
    ranged = [a for a in message.attributions.all() if a.range_start is not None]
    assert ranged and s.model.startswith("gemini-2.5-pro")
    assert "°" in message.text


@pytest.fixture
def only_superuser(django_user_model):
    """The one superuser: what ``ingest`` without ``--owner`` gives the conversation to."""
    return django_user_model.objects.create_superuser("root", password="pw-root-123")


def test_usage_counters_are_reported_not_stored(capsys, only_superuser):
    path = Path(PROVIDER_FIXTURES / "anthropic" / "vercel-ai__anthropic-web-search-tool.1.json")
    if not path.exists():
        pytest.skip(f"{path} is absent")
    call_command("ingest", "--provider", "anthropic", str(path))
    out = capsys.readouterr().out.strip().splitlines()
    assert any("web_search_requests=2" in line for line in out)
    conversation_id = out[-1]
    assert Event.objects.filter(conversation_id=conversation_id).exists()
    assert Conversation.objects.get(pk=conversation_id).owner == only_superuser
    assert not Event.objects.filter(body__contains="web_search_requests").exists()


def test_malformed_file_names_file_and_line_and_writes_nothing(tmp_path, only_superuser):
    good = tmp_path / "good.jsonl"
    good.write_text('{"type":"message_start","message":{"id":"m","type":"message",'
                    '"role":"assistant","model":"claude-x","content":[]}}\n{"type":"ping"}\n'
                    '{"type":"message_delta","delta":{"stop_reason":"pause_turn"}}\n'
                    '{"type":"message_stop"}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"message_start","message":{"id":"m","type":"message",'
                   '"role":"assistant","model":"claude-x","content":[]}}\n'
                   '{not json\n{"type":"ping"}\n')
    before = Event.objects.count(), Turn.objects.count()
    with pytest.raises(CommandError, match=r"bad\.jsonl, line 2"):
        call_command("ingest", "--provider", "anthropic", str(good), str(bad))
    assert (Event.objects.count(), Turn.objects.count()) == before


def test_a_continuation_of_a_cut_response_is_refused_by_name(tmp_path, only_superuser):
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"type":"message_start","message":{"id":"m","type":"message",'
                   '"role":"assistant","model":"claude-x","content":[]}}\n{"type":"ping"}\n')
    more = tmp_path / "more.jsonl"
    more.write_text(cut.read_text())
    before = Event.objects.count(), Turn.objects.count()
    with pytest.raises(CommandError, match=r"more\.jsonl: cannot continue a turn that ended "
                                           r"interrupted"):
        call_command("ingest", "--provider", "anthropic", str(cut), str(more))
    assert (Event.objects.count(), Turn.objects.count()) == before


def test_stream_that_ends_early_is_an_interrupted_turn(tmp_path):
    src = PROVIDER_FIXTURES / "anthropic" / "vercel-ai__anthropic-web-search-tool.1.chunks.txt"
    if not src.exists():
        pytest.skip(f"{src} is absent")
    lines = src.read_text().splitlines(keepends=True)
    # Cut inside a text block: right after one of its deltas, mid-way through the next line.
    at = [i for i, line in enumerate(lines) if "text_delta" in line][-3] + 1
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:at]) + lines[at][:17])
    s = ingest("anthropic", [ResponseFile("cut.jsonl", cut.read_bytes())])
    assert s.status == "interrupted" and s.end_reason == "interrupted"
    last = s.turn.events.filter(kind="message").last()
    assert last.incomplete


def test_kinds_summary_counts(capsys):
    s = ingest_one("anthropic", "vercel-ai__anthropic-clear-thinking.1.chunks.txt")
    assert Counter(s.kinds) == Counter({"reasoning": 1, "message": 1})
