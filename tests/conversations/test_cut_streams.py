"""Streams cut at arbitrary points: ingest never crashes, never stores a stale range, keeps
the citations received so far (marked incomplete), and the turn is complete exactly when the
stream got as far as its terminal event (else interrupted)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.ingest import ResponseFile, assemble
from tests.support import PROVIDER_FIXTURES, recorded

STREAMS = [
    ("anthropic", "vercel-ai__anthropic-web-search-tool.1.chunks.txt", 0),
    ("anthropic", "pydantic-ai__test_anthropic_model_thinking_part_redacted_stream.yaml", 0),
    ("anthropic", "vercel-ai__anthropic-issue-10819-web-fetch-error.1.chunks.txt", 0),
    ("openai", "vercel-ai__openai-web-search-tool.1.chunks.txt", 0),
    ("openai", "pydantic-ai__test_openai_include_raw_annotations_streaming.yaml", 0),
    ("openai", "pydantic-ai__test_openrouter_web_search_annotations_stream.yaml", 0),
    ("google", "pydantic-ai__test_google_model_web_search_tool_stream.yaml", 0),
    ("google", "vercel-ai__interactions-google-search.chunks.txt", 0),
]


@functools.cache
def stream_text(provider: str, name: str, index: int) -> str:
    return recorded(provider, name)[index].raw.decode()


DONE = "[DONE]"


def wire_events(text: str) -> Iterator[Any]:
    """The whole events in (a prefix of) a recorded stream, read here without the adapters: one
    JSON object per line, bare or as SSE ``data:``; ``[DONE]`` as itself. A line cut mid-way is
    not valid JSON (every event is an object, so no proper prefix of one parses) and is no
    event."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if line == DONE:
            yield DONE
            continue
        if not line.startswith("{"):
            continue  # blank lines, SSE event names and comments
        try:
            yield json.loads(line)
        except ValueError:
            continue


def is_terminal(provider: str, event: Any) -> bool:
    """The event each wire format ends a finished response with (the providers' docs).

    Anthropic Messages: ``message_stop``. OpenAI Responses: ``response.completed``; Chat
    Completions: the chunk whose choice carries ``finish_reason`` (then optional usage and
    ``[DONE]``). Gemini generateContent: the chunk whose candidate carries ``finishReason``;
    Interactions: ``interaction.completed``."""
    if event == DONE:
        return provider == "openai"
    if provider == "anthropic":
        return event.get("type") == "message_stop"
    if provider == "openai":
        return event.get("type") == "response.completed" or any(
            choice.get("finish_reason") for choice in event.get("choices") or [])
    return event.get("event_type") == "interaction.completed" or any(
        candidate.get("finishReason") for candidate in event.get("candidates") or [])


def expected_status(provider: str, text: str) -> str:
    ended = any(is_terminal(provider, event) for event in wire_events(text))
    return "complete" if ended else "interrupted"


@pytest.mark.skipif(not PROVIDER_FIXTURES.exists(), reason=f"{PROVIDER_FIXTURES} is absent")
@pytest.mark.parametrize(("provider", "name", "index"), STREAMS)
def test_every_whole_stream_ends_with_its_terminal_event(provider, name, index):
    """So a cut can lose it: the expectation below is not "interrupted" by default."""
    text = stream_text(provider, name, index)
    assert expected_status(provider, text) == "complete"
    builder, _ = assemble(provider, [ResponseFile("whole", text.encode())])
    assert builder.outcome.status == "complete"


@pytest.mark.skipif(not PROVIDER_FIXTURES.exists(), reason=f"{PROVIDER_FIXTURES} is absent")
@pytest.mark.parametrize(("provider", "name", "index"), STREAMS)
def test_cut_on_either_side_of_the_terminal_event(provider, name, index):
    text = stream_text(provider, name, index)
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines)
              if any(is_terminal(provider, event) for event in wire_events(line)))
    before, through = "".join(lines[:at]), "".join(lines[: at + 1])
    assert assemble(provider, [ResponseFile("cut", before.encode())])[0].outcome.status == (
        "interrupted")
    assert assemble(provider, [ResponseFile("cut", through.encode())])[0].outcome.status == (
        "complete")


@pytest.mark.skipif(not PROVIDER_FIXTURES.exists(), reason=f"{PROVIDER_FIXTURES} is absent")
@pytest.mark.parametrize(("provider", "name", "index"), STREAMS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fraction=st.floats(min_value=0.0, max_value=1.0))
def test_cut_anywhere(provider, name, index, fraction):
    text = stream_text(provider, name, index)
    cut = text[: max(1, int(len(text) * fraction))]
    if not cut.strip():
        return
    builder, records = assemble(provider, [ResponseFile("cut", cut.encode())])
    assert builder.outcome.status == expected_status(provider, cut)
    for record in records:
        for a in record.attributions:
            if a.start is not None:
                assert 0 <= a.start < a.end <= len(record.text)
        if record.incomplete:
            assert all(a.incomplete for a in record.attributions)
    if builder.outcome.status == "interrupted":
        partial = [r for r in records if r.incomplete]
        assert all(r.payload is None for r in partial)  # partial metadata is dropped


def test_citations_received_before_the_cut_are_kept():
    """Anthropic sends a cited block's citations before its text: cut inside that text."""
    if not PROVIDER_FIXTURES.exists():
        pytest.skip(f"{PROVIDER_FIXTURES} is absent")
    text = stream_text("anthropic", "vercel-ai__anthropic-web-search-tool.1.chunks.txt", 0)
    lines = text.splitlines(keepends=True)
    first_citation = next(i for i, line in enumerate(lines) if "citations_delta" in line)
    after = next(i for i in range(first_citation, len(lines)) if "text_delta" in lines[i])
    builder, records = assemble("anthropic", [ResponseFile("cut", "".join(
        lines[: after + 1]).encode())])
    assert builder.outcome.status == "interrupted"
    last = records[-1]
    assert last.kind == "message" and last.incomplete
    assert last.attributions and all(a.incomplete for a in last.attributions)


@pytest.mark.parametrize(("provider", "name", "index"), STREAMS)
def test_cut_after_the_first_line(provider, name, index):
    """One whole JSON line is also a valid JSON body: a one-event stream must still read."""
    if not PROVIDER_FIXTURES.exists():
        pytest.skip(f"{PROVIDER_FIXTURES} is absent")
    text = stream_text(provider, name, index)
    first = next(line for line in text.splitlines(keepends=True) if line.strip())
    builder, _ = assemble(provider, [ResponseFile("cut", first.encode())])
    assert builder.outcome.status == expected_status(provider, first) == "interrupted"
