"""Ingest: a key split across stream chunks at any offset is never stored (issue 11, item 1)."""

from __future__ import annotations

import pytest

from conversations.ingest import ResponseFile, ingest
from guards import redaction
from guards.redaction import wire
from tests.split_secrets import as_sse, assert_nothing_kept, split_cases, split_stream

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("wire", ["jsonl", "sse"])
def test_ingest_stores_no_piece_of_a_key_split_at_any_offset(django_user_model, wire):
    owner = django_user_model.objects.create_user("split-owner")
    cases = split_cases()
    raw = split_stream(cases)
    summary = ingest("anthropic", [ResponseFile("split", as_sse(raw) if wire == "sse" else raw)],
                     owner=owner)
    assert summary.status == "complete"
    assert_nothing_kept(summary.conversation, cases)


def test_a_redaction_swallows_the_rest_of_a_key():
    assert redaction.redact_text("a [REDACTED]zsfBWly6-x_y b") == "a [REDACTED] b"
    assert redaction.redact_text("a [REDACTED]. Next") == "a [REDACTED]. Next"
    assert redaction.redact_text("Authorization: [REDACTED]rer Q7x0123") == (
        "Authorization: [REDACTED]")


def test_recorded_wire_loses_every_piece_of_a_split_key_and_stays_valid():
    from providers.wire import read

    cases = split_cases()
    for raw in (split_stream(cases), as_sse(split_stream(cases))):
        clean = redaction.redact_wire(raw)
        frames = read(clean).frames  # still valid wire of the same kind and length
        assert len(frames) == len(read(raw).frames)
        from tests.split_secrets import leaks

        assert not leaks(clean.decode(), "wire")
        joined: dict[int, str] = {}
        for frame in frames:
            delta = frame.data.get("delta", {})
            if frame.data["type"] == "content_block_delta" and "text" in delta:
                joined[frame.data["index"]] = joined.get(frame.data["index"], "") + delta["text"]
        assert list(joined.values()) == [
            redaction.redact_text(f"my key {s} end." if "Authorization" not in s
                                  else f"{s}\nend.") for s, _i in cases]
    clean_bytes = split_stream([])
    assert redaction.redact_wire(clean_bytes) == clean_bytes


def test_wire_bytes_found_clean_are_not_scanned_again_and_secrets_always_are(monkeypatch):
    scans = []
    scan = wire._redact_wire
    monkeypatch.setattr(wire, "_redact_wire", lambda raw: scans.append(raw) or scan(raw))
    monkeypatch.setattr(wire, "_CLEAN_WIRE", {})
    clean, secret = split_stream([]), split_stream(split_cases()[:3])
    for _ in range(3):
        assert redaction.redact_wire(clean) == clean
        assert redaction.redact_wire(clean.decode()) == clean.decode()
        assert redaction.redact_wire(secret) != secret
    assert scans.count(clean) == 1
    assert scans.count(secret) == 3
