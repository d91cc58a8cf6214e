"""The EventBuilder, fed provider-neutral parts directly (no provider, no database)."""

import pytest

from streams import parts
from streams.bodies import ErrorBody, ReasoningBody
from streams.builder import EventBuilder
from streams.registries import UnregisteredValue


def run(*responses: list[parts.Part], cut_last: bool = False) -> tuple[EventBuilder, list]:
    builder = EventBuilder()
    events = []
    for i, response in enumerate(responses):
        builder.begin_response("initial" if i == 0 else "pause_turn")
        for part in response:
            events.extend(builder.feed(part))
        events.extend(builder.end_response())
    return builder, events


START = parts.ResponseStart("anthropic", "claude-test-1", "msg_1")


def test_text_block_with_citations_before_and_after_text():
    builder, events = run([
        START,
        parts.BlockStart("0", "message"),
        parts.Citation("0", "https://a.example/", "A", "quoted"),
        parts.TextDelta("0", "Hello "),
        parts.TextDelta("0", "world"),
        parts.Citation("0", "https://b.example/", "B", start=6, end=11),
        parts.BlockEnd("0", parts.Payload("anthropic", "f", "v", {"type": "text"})),
        parts.ResponseEnd("end_turn"),
    ])
    [event] = events
    assert event.kind == "message" and event.text == "Hello world" and not event.incomplete
    whole, ranged = event.attributions
    assert (whole.start, whole.end) == (None, None)
    assert event.text[ranged.start:ranged.end] == "world"
    assert builder.outcome.status == "complete" and builder.outcome.end_reason == "end_turn"
    assert (builder.provider, builder.model) == ("anthropic", "claude-test-1")


def test_cut_stream_commits_partial_text_with_incomplete_citations_and_no_payload():
    builder, events = run([
        START,
        parts.BlockStart("0", "reasoning", payload=None),
        parts.TextDelta("0", "thinking…"),
        parts.BlockStart("1", "message"),
        parts.TextDelta("1", "The answer is"),
        parts.Citation("1", "https://a.example/", "A", start=4, end=10),
        parts.Citation("1", "https://a.example/", "A", start=4, end=99),  # beyond the cut
    ])
    reasoning, message = events
    assert reasoning.kind == "reasoning" and reasoning.incomplete and reasoning.payload is None
    assert message.text == "The answer is" and message.incomplete
    kept, dropped = message.attributions
    assert kept.incomplete and message.text[kept.start:kept.end] == "answer"
    assert dropped.incomplete and dropped.start is None  # a stale range is never kept
    assert builder.outcome.status == "interrupted"
    assert builder.outcome.end_reason == "interrupted"


def test_activity_opened_in_one_response_is_closed_by_the_next():
    first = [
        START,
        parts.Activity("srv_1", "web_search", "started", {"query": "q"}),
        parts.ResponseEnd("pause_turn"),
    ]
    second = [
        parts.ResponseStart("anthropic", "claude-test-1", "msg_2"),
        parts.Activity("srv_1", "web_search", "completed", summary="3 results"),
        parts.ResponseEnd("end_turn"),
    ]
    builder, events = run(first, second)
    started, completed = events
    assert started.body.id == completed.body.id == "srv_1"
    assert completed.body.input == {"query": "q"}  # carried from the start
    assert (started.body.state, completed.body.state) == ("started", "completed")
    assert [r["trigger"] for r in builder.responses] == ["initial", "pause_turn"]
    assert [r["end_reason"] for r in builder.responses] == ["pause_turn", "end_turn"]


def test_activity_without_terminal_transition_stays_started():
    # Nothing invents an end the provider did not send (the next response may close it).
    _, events = run([START, parts.Activity("ws_1", "web_search", "started", {"query": "q"})])
    [started] = events
    assert (started.body.id, started.body.name, started.body.state) == (
        "ws_1", "web_search", "started")


def test_stream_error_fails_the_turn_and_keeps_the_error():
    builder, events = run([
        START,
        parts.StreamError("insufficient_quota", "no credit"),
        parts.ResponseEnd("error"),
    ])
    [error] = events
    assert error.kind == "error" and error.body == ErrorBody("insufficient_quota", "no credit")
    assert builder.outcome.status == "failed" and builder.outcome.end_reason == "error"


def test_provenance_is_taken_from_the_first_response_only():
    builder, _ = run(
        [START, parts.ResponseEnd("pause_turn")],
        [parts.ResponseStart("anthropic", "other-model", "msg_2"), parts.ResponseEnd("end_turn")],
    )
    assert builder.model == "claude-test-1"
    assert builder.responses[1]["model"] == "other-model"


def test_unregistered_values_are_refused():
    with pytest.raises(UnregisteredValue):
        run([START, parts.Activity("x", "teleport", "started")])
    with pytest.raises(UnregisteredValue):
        run([START, parts.ResponseEnd("because")])


def test_redacted_reasoning_has_no_text():
    payload = parts.Payload("anthropic", "f", "v", {"type": "redacted_thinking", "data": "xx"})
    _, events = run([
        START,
        parts.BlockStart("0", "reasoning", redacted=True, payload=payload),
        parts.BlockEnd("0"),
        parts.ResponseEnd("end_turn"),
    ])
    [event] = events
    assert event.body == ReasoningBody(redacted=True)
    assert event.text == "" and event.payload == payload


def test_parts_for_an_unknown_block_are_an_error():
    with pytest.raises(ValueError, match="never started"):
        run([START, parts.TextDelta("9", "x")])


def test_each_attribution_records_what_ingest_did_with_its_range():
    text = "Tides rise. Moons pull. Seas swell."
    _, [event] = run([
        START,
        parts.BlockStart("0", "message"),
        parts.TextDelta("0", text),
        parts.Citation("0", "https://w.example/", "W"),  # no range: nothing to check
        parts.Citation("0", "https://e.example/", "E", start=0, end=11, quote="Tides rise."),
        # Offsets off by four; the provider's own segment text finds the span again.
        parts.Citation("0", "https://r.example/", "R", start=16, end=27, quote="Moons pull."),
        # Offsets that match nothing and a quote that is not in the text: not placed.
        parts.Citation("0", "https://d.example/", "D", start=40, end=50, quote="Rivers."),
        parts.Citation("0", "", start=24, end=35),  # names no source
        parts.BlockEnd("0"),
        parts.ResponseEnd("end_turn"),
    ])
    _whole, exact, repaired, dropped, unsourced = event.attributions
    assert [a.integrity for a in event.attributions] == [
        "", "exact", "repaired", "dropped", "no_source"]
    assert text[exact.start:exact.end] == "Tides rise."
    assert text[repaired.start:repaired.end] == "Moons pull."
    assert (dropped.start, dropped.end) == (None, None)  # kept, citing the whole event
    assert text[unsourced.start:unsourced.end] == "Seas swell."
