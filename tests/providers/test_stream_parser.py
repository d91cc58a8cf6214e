"""``providers.stream_parser``: a response's bytes fed as they arrive give exactly the parts
``providers.parse`` gives for the same bytes, however the bytes are split."""

from __future__ import annotations

import json
import tracemalloc
from itertools import pairwise

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import providers
from providers import WireContext
from streams.parts import BlockEnd, BlockStart, Part, ResponseEnd, ResponseStart, TextDelta
from tests.support import REPO, SHARED, Recorded, cassette_responses

SAMPLES = REPO / "live" / "samples"
FIXTURE_SETS = ("providers", "providers-more")


def _recordings() -> list[tuple[str, str, Recorded]]:
    """(provider, name, recording) for every bundled sample and every shared fixture."""
    out = []
    manifest = json.loads((SAMPLES / "manifest.json").read_text())
    for sample in manifest["samples"]:
        for name in sample["files"]:
            raw = (SAMPLES / name).read_bytes()
            rec = Recorded(raw, None, sample.get("api_version"), sample.get("endpoint", ""))
            out.append((sample["provider"], f"samples/{name}", rec))
    for fixture_set in FIXTURE_SETS:
        for provider in ("anthropic", "openai", "google"):
            directory = SHARED / "fixtures" / fixture_set / provider
            for path in sorted(directory.glob("*")) if directory.is_dir() else ():
                recs = cassette_responses(path) if path.suffix == ".yaml" else [
                    Recorded(path.read_bytes())
                ]
                for i, rec in enumerate(recs):
                    out.append((provider, f"{fixture_set}/{provider}/{path.name}#{i}", rec))
    return out


RECORDINGS = _recordings()
IDS = [name for _, name, _ in RECORDINGS]
# The bundled samples run in the fast tier; the shared corpus is slow.
_SLOW = pytest.mark.slow
CASES = [
    pytest.param(*case, id=case[1], marks=() if case[1].startswith("samples/") else _SLOW)
    for case in RECORDINGS
]


def test_the_shared_fixtures_are_here() -> None:
    if not (SHARED / "fixtures" / "providers").exists():
        pytest.skip(f"{SHARED}/fixtures is absent (the property below runs on the samples only)")
    assert sum(name.startswith("providers") for name in IDS) > 50


def whole(provider: str, raw: bytes, context: WireContext) -> list[Part]:
    return list(providers.parse(provider, raw, context))


def pushed(provider: str, chunks: list[bytes], context: WireContext) -> list[Part]:
    parser = providers.stream_parser(provider, context)
    out: list[Part] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.close()


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(raw)]
    return [raw[a:b] for a, b in pairwise(bounds)]


def awkward_cuts(raw: bytes) -> list[int]:
    """Offsets inside a multi-byte UTF-8 character, and between a CR and its LF."""
    return [
        i for i in range(1, len(raw))
        if 0x80 <= raw[i] <= 0xBF or (raw[i] == 0x0A and raw[i - 1] == 0x0D)
    ]


def crlf(raw: bytes) -> bytes:
    """The same response with CRLF line ends (a raw newline is never inside a JSON string)."""
    return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


@st.composite
def cuts(draw: st.DrawFn, raw: bytes) -> list[int]:
    awkward = awkward_cuts(raw)
    anywhere = st.integers(0, len(raw))
    choice = st.sampled_from(awkward) | anywhere if awkward else anywhere
    return draw(st.lists(choice, max_size=40))


@pytest.mark.parametrize(("provider", "name", "rec"), CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_split_gives_the_parts_parse_gives(
    provider: str, name: str, rec: Recorded, data: st.DataObject
) -> None:
    raw = rec.raw if data.draw(st.booleans(), "lf") else crlf(rec.raw)
    expected = whole(provider, raw, rec.context)
    assert expected, f"{name} has no parts"
    assert pushed(provider, split(raw, data.draw(cuts(raw), "cuts")), rec.context) == expected


@pytest.mark.parametrize(("provider", "name", "rec"), CASES)
def test_one_byte_at_a_time(provider: str, name: str, rec: Recorded) -> None:
    raw = crlf(rec.raw)
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    assert pushed(provider, chunks, rec.context) == whole(provider, rec.raw, rec.context)


@pytest.mark.slow
def test_crlf_reads_as_lf() -> None:
    for provider, _, rec in RECORDINGS:
        assert whole(provider, crlf(rec.raw), rec.context) == whole(provider, rec.raw, rec.context)


# -- push-style behaviour ----------------------------------------------------------------------

START = {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "content": []}}
TEXT = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
    {"type": "message_stop"},
]


def sse(*events: dict) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


def test_parts_arrive_with_the_bytes_that_complete_them() -> None:
    parser = providers.stream_parser("anthropic")
    assert parser.feed(sse(START)[:-1]) == []  # its blank line has not come
    assert parser.feed(b"\n") == [ResponseStart("anthropic", "claude-x", "msg_1")]
    delta = sse(TEXT[1])
    assert parser.feed(sse(TEXT[0])) == []  # a text block opens with its first text
    assert parser.feed(delta[:30]) == []
    assert parser.feed(delta[30:]) == [BlockStart("b0", "message"), TextDelta("b0", "Hi")]
    rest = parser.feed(sse(*TEXT[2:]))
    assert isinstance(rest[0], BlockEnd) and rest[-1] == ResponseEnd("end_turn")
    assert parser.close() == []


def test_a_body_gives_its_parts_at_close() -> None:
    body = {"type": "message", "id": "msg_1", "model": "claude-x", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Hi"}]}
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    parser = providers.stream_parser("anthropic")
    assert parser.feed(raw[:20]) == [] and parser.feed(raw[20:]) == []
    assert parser.close() == whole("anthropic", raw, WireContext())


def test_a_cut_stream_ends_as_parse_ends_it() -> None:
    raw = sse(START, *TEXT[:2])[:-5]  # cut inside the text delta
    parts = pushed("anthropic", [raw[:9], raw[9:]], WireContext())
    assert parts == whole("anthropic", raw, WireContext())
    # no delta, no end (and no block: a text block opens with its first text)
    assert [type(p) for p in parts] == [ResponseStart]


def test_unknown_provider() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        providers.stream_parser("nope")


def test_unreadable_input_keeps_the_parts_before_it_and_raises_next() -> None:
    good = sse(START, TEXT[0], TEXT[1])
    raw = good + b"data: {oops}\n\n" + sse(*TEXT[2:])
    before = whole("anthropic", good, WireContext())  # a cut stream: the same parts so far
    bad_line = good.count(b"\n") + 1
    for at in range(0, len(raw) + 1, 7):
        parser = providers.stream_parser("anthropic")
        got = parser.feed(raw[:at])
        with pytest.raises(providers.MalformedInput) as info:
            got += parser.feed(raw[at:])
            parser.close()
        assert got == before and info.value.line == bad_line
        with pytest.raises(ValueError, match="closed"):
            parser.feed(b"")


def test_an_adapter_error_is_raised_by_the_next_call() -> None:
    raw = sse(START) + sse({"type": "content_block_delta", "index": 3, "delta": {}})
    parser = providers.stream_parser("anthropic")
    assert parser.feed(raw) == [ResponseStart("anthropic", "claude-x", "msg_1")]
    with pytest.raises(providers.MalformedInput, match="not open"):
        parser.close()


@pytest.mark.slow
def test_a_long_stream_is_never_held_whole() -> None:
    """700,000 pings (16 MB) in 64 KiB chunks: only the current event is held, so what the
    parser holds does not grow while the stream goes on (traced over its last 100,000 pings:
    tracing all of it would take minutes)."""
    ping = b'data: {"type":"ping"}\n\n'
    per_chunk = 65536 // len(ping)
    chunks = 700_000 // per_chunk
    traced = 100_000 // per_chunk
    parser = providers.stream_parser("anthropic")
    parts = parser.feed(sse(START))
    for _ in range(chunks - traced):
        parts += parser.feed(ping * per_chunk)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(traced):
            parts += parser.feed(ping * per_chunk)  # a new chunk, as from the network
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    parts += parser.feed(sse(*TEXT)) + parser.close()
    assert chunks * per_chunk * len(ping) > 15_000_000
    # Nothing accumulates (100,000 pings held as rows would take over 20 MB); the peak is one
    # chunk's lines and rows.
    assert held - before < 1_000_000, f"grew by {held - before:,} bytes"
    assert peak < 4_000_000, f"peak {peak:,} bytes"
    assert parts[-1] == ResponseEnd("end_turn") and TextDelta("b0", "Hi") in parts
