"""Recordings of one provider dropped together are grouped by their wire (issue 36, item 4): a
file continues the one before it only when its content says so (a pause_turn continuation
answering the hosted call left open, a client tool round); otherwise it is a conversation of
its own. The uploader may choose the command line's groupings instead."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from importers import detect, recording
from importers.base import ImportedConversation

SAMPLES = Path(__file__).resolve().parents[2] / "live" / "samples"
TIDES = (SAMPLES / "anthropic-tides.sse").read_bytes()
FAILED = (SAMPLES / "anthropic-failed-search.sse").read_bytes()
PAUSED = (SAMPLES / "anthropic-pause-turn.1.sse").read_bytes()
CONTINUED = (SAMPLES / "anthropic-pause-turn.2.sse").read_bytes()


def read(files: dict[str, bytes], grouping: str = "auto") -> list[list[str]]:
    uploads = [detect.Upload(name, lambda raw=raw: io.BytesIO(raw)) for name, raw in
               files.items()]
    items = list(detect.read(uploads, "auto", grouping))
    assert all(isinstance(i, ImportedConversation) for i in items), items
    return [[r.name for r in i.turns[0].responses] for i in items]


def test_unrelated_recordings_of_one_provider_are_conversations_of_their_own():
    assert read({"tides.sse": TIDES, "search.sse": FAILED}) == [["tides.sse"], ["search.sse"]]


def test_a_continuation_joins_the_paused_response_it_answers():
    assert read({"a.sse": PAUSED, "b.sse": CONTINUED, "c.sse": TIDES}) == [
        ["a.sse", "b.sse"], ["c.sse"]]
    # a paused response followed by one that answers nothing it left open: apart
    assert read({"a.sse": PAUSED, "c.sse": TIDES}) == [["a.sse"], ["c.sse"]]


def test_the_command_lines_choices_are_offered_too():
    files = {"tides.sse": TIDES, "search.sse": FAILED}
    assert read(files, "continuations") == [["tides.sse", "search.sse"]]
    assert read({"a.sse": PAUSED, "b.sse": CONTINUED}, "each") == [["a.sse"], ["b.sse"]]
    assert set(recording.GROUPINGS) == {"auto", "continuations", "each"}
    with pytest.raises(ValueError, match="grouping"):
        read(files, "sideways")


def test_a_client_tool_round_continues_the_response_that_asked_for_it():
    assert recording.continues("anthropic", PAUSED, CONTINUED)
    assert not recording.continues("anthropic", TIDES, FAILED)
    assert not recording.continues("anthropic", b"event: nonsense\ndata: {\n\n", TIDES)
    asked = TIDES.replace(b'"stop_reason":"end_turn"', b'"stop_reason":"tool_use"')
    assert asked != TIDES and recording.continues("anthropic", asked, FAILED)
