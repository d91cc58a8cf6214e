"""The one wire reader: SSE (as the WHATWG server-sent events spec defines its lines and fields),
JSON lines and JSON documents, whole (``read``) and push-style (``Reader``)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from providers.wire import DONE, MalformedInput, Reader, read


def rows(raw: bytes | str) -> list[tuple[int, Any, str | None]]:
    return list(read(raw).rows)


def pushed(raw: bytes, cuts: list[int]) -> tuple[str | None, list[tuple[int, Any, str | None]]]:
    """``raw`` fed to a Reader in the pieces ``cuts`` makes, then closed."""
    reader = Reader()
    out: list[tuple[int, Any, str | None]] = []
    start = 0
    for cut in [*sorted(cuts), len(raw)]:
        out += reader.feed(raw[start:cut])
        start = cut
    out += reader.close()
    return reader.kind, out


# -- server-sent events ------------------------------------------------------------------------

SSE = b'event: a\ndata: {"n": 1}\n\ndata: {"n": 2}\n\n'


def test_sse_events_carry_their_name_and_first_line() -> None:
    wire = read(SSE)
    assert wire.kind == "stream"
    assert list(wire.rows) == [(1, {"n": 1}, "a"), (4, {"n": 2}, None)]
    assert wire.frames[0].line == 1 and wire.frames[0].event == "a"


def test_sse_fields_without_a_space_comments_id_and_retry() -> None:
    raw = b': keep-alive\nid: 7\nretry: 100\nevent:b\ndata:{"n": 1}\n\n'
    assert rows(raw) == [(4, {"n": 1}, "b")]


def test_sse_data_lines_of_one_event_are_joined_with_a_newline() -> None:
    assert rows(b'data: {"a":\ndata: [1,\ndata: 2]}\n\n') == [(1, {"a": [1, 2]}, None)]


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
def test_cr_lf_and_crlf_end_lines_alike(end: bytes) -> None:
    assert rows(SSE.replace(b"\n", end)) == rows(SSE)


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    raw = SSE.replace(b"\n", b"\r\n")
    for at in range(len(raw) + 1):
        assert pushed(raw, [at]) == ("stream", rows(SSE))


def test_a_bom_is_ignored() -> None:
    assert rows(b"\xef\xbb\xbf" + SSE) == rows(SSE)
    assert rows(b'\xef\xbb\xbf{"a": 1}') == [(1, {"a": 1}, None)]
    assert pushed(b"\xef\xbb\xbf" + SSE, [1, 2]) == ("stream", rows(SSE))


def test_unicode_line_separators_inside_json_are_not_line_ends() -> None:
    text = "one\u2028two\u2029three\x85four"
    raw = b"data: " + orjson.dumps({"t": text}) + b"\n\n"
    assert rows(raw) == [(1, {"t": text}, None)]
    assert rows(orjson.dumps({"t": text}) + b"\n" + orjson.dumps({"t": 2})) == [
        (1, {"t": text}, None), (2, {"t": 2}, None),
    ]


def test_done_sentinel() -> None:
    assert rows(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == [(1, {"a": 1}, None), (3, DONE, None)]


def test_a_cut_last_event_simply_ends_the_stream() -> None:
    assert rows(SSE + b'data: {"n": 3') == rows(SSE)  # cut inside its JSON
    assert rows(SSE + b"event: c\nda") == rows(SSE)  # cut inside a field name
    # The last event whole but its blank line never came: it is dispatched.
    assert rows(SSE + b'data: {"n": 3}') == [*rows(SSE), (6, {"n": 3}, None)]
    assert rows(SSE + b'data: {"n": 3}\n') == [*rows(SSE), (6, {"n": 3}, None)]


def test_a_bad_line_elsewhere_is_malformed_and_named() -> None:
    with pytest.raises(MalformedInput) as info:
        read(SSE + b"data: {oops}\n\n" + SSE)
    assert info.value.line == 6 and "invalid JSON" in info.value.message
    with pytest.raises(MalformedInput) as info:
        read(SSE + b"bogus line\n" + SSE)
    assert info.value.line == 6 and "not a server-sent event line" in info.value.message


# -- JSON lines --------------------------------------------------------------------------------


def test_json_lines_count_blank_lines_and_drop_a_cut_last_line() -> None:
    raw = b'{"a": 1}\n\n{"b": 2}\r\n{"c": '
    wire = read(raw)
    assert wire.kind == "stream" and list(wire.rows) == [(1, {"a": 1}, None), (3, {"b": 2}, None)]


def test_json_lines_padded_with_other_whitespace() -> None:
    assert rows(b'{"a": 1}\n\x0c{"b": 2}\x0b\n') == [(1, {"a": 1}, None), (2, {"b": 2}, None)]


def test_a_malformed_json_line_is_named() -> None:
    with pytest.raises(MalformedInput) as info:
        read(b'{"a": 1}\n{"b": \n{"c": 3}\n')
    assert info.value.line == 2


# -- JSON documents ----------------------------------------------------------------------------


def test_a_json_body_on_one_line_or_many() -> None:
    body = {"type": "message", "content": [{"type": "text", "text": "hi"}]}
    for raw in (orjson.dumps(body), orjson.dumps(body) + b"\n  \n",
                orjson.dumps(body, option=orjson.OPT_INDENT_2), "\u00a0\u2028".encode() +
                orjson.dumps(body)):
        wire = read(raw)
        assert wire.kind == "body" and list(wire.rows) == [(1, body, None)]


def test_a_json_array_is_a_stream_of_events() -> None:
    wire = read(b'[{"a": 1},\n {"b": 2}]')
    assert wire.kind == "stream" and list(wire.rows) == [(1, {"a": 1}, None), (2, {"b": 2}, None)]


@pytest.mark.parametrize("raw", [b"", b"  \n\t", b"\xef\xbb\xbf", "\u2028 ".encode()])
def test_empty_input(raw: bytes) -> None:
    with pytest.raises(MalformedInput, match="empty input") as info:
        read(raw)
    assert info.value.line == 1


def test_text_input_is_read_as_its_utf8() -> None:
    assert rows(SSE.decode()) == rows(SSE)


# -- push-style --------------------------------------------------------------------------------


def test_rows_arrive_as_their_events_complete() -> None:
    reader = Reader()
    assert reader.feed(b'event: a\ndata: {"n"') == []
    assert reader.feed(b": 1}\n") == []  # the event is not over before its blank line
    assert reader.feed(b"\n") == [(1, {"n": 1}, "a")]
    assert reader.kind == "stream"
    assert reader.feed(b'data: {"n": 2}\n\n') == [(4, {"n": 2}, None)]
    assert reader.close() == []


def test_a_body_is_read_at_close() -> None:
    reader = Reader()
    assert reader.feed(b'{"a": [1,\n') == []
    assert reader.feed(b"2]}\n") == []
    assert reader.kind is None
    assert reader.close() == [(1, {"a": [1, 2]}, None)]
    assert reader.kind == "body"


def test_json_lines_are_told_from_a_body_by_their_second_line() -> None:
    reader = Reader()
    assert reader.feed(b'{"a": 1}\n') == []  # maybe a one-line body
    assert reader.feed(b"  ") == []
    assert reader.feed(b'{"b": 2}\n') == [(1, {"a": 1}, None), (2, {"b": 2}, None)]
    assert reader.kind == "stream"


def test_an_error_comes_after_the_rows_before_it() -> None:
    raw = SSE + b"data: {oops}\n\n" + SSE
    reader = Reader()
    assert reader.feed(raw) == rows(SSE)  # everything before the bad event
    with pytest.raises(MalformedInput) as info:
        reader.close()
    assert info.value.line == 6
    for at in range(len(raw) + 1):
        reader, got = Reader(), []
        with pytest.raises(MalformedInput):
            got += reader.feed(raw[:at])
            got += reader.feed(raw[at:])
            reader.close()
        assert got == rows(SSE)


def test_a_closed_reader_refuses_more() -> None:
    reader = Reader()
    reader.feed(SSE)
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        reader.feed(SSE)
