"""The streaming reader of a top-level JSON array: elements one at a time, whatever the read
size, with the line each starts on; broken structure named by line."""

from __future__ import annotations

import io

import orjson
import pytest

from importers.jsonstream import array_elements
from streams.errors import MalformedInput

TRICKY = [{"s": 'brackets ]}[{ and "quotes" and \\ backslashes', "n": [1, [2, {"x": None}]]},
          {"unicode": "é 【6†source】 \U0001F600", "empty": {}}, [], "a string", 3.5, True]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64, 1 << 20])
def test_elements_whatever_the_read_size(chunk):
    raw = orjson.dumps(TRICKY, option=orjson.OPT_INDENT_2)
    got = [orjson.loads(e) for e, _ in array_elements(io.BytesIO(raw), chunk=chunk)]
    assert got == TRICKY


def test_each_element_knows_its_line():
    raw = b'[\n  {"a": 1},\n\n  {"b":\n 2},\n  {"c": 3}\n]\n'
    assert [line for _, line in array_elements(io.BytesIO(raw), chunk=4)] == [2, 4, 6]


@pytest.mark.parametrize("raw, message, line", [
    (b"", "empty input", 1),
    (b'\n{"a": 1}', "expected a JSON array", 2),
    (b'[{"a": 1}\n {"b": 2}]', "expected ',' or ']'", 2),
    (b'[{"a": 1},\n{"b": "cut', "ends inside an element .* starts at line 2", 2),
    (b'[{"a": 1},\n{"b":\n  [1,\n   2,\n   "cut', "ends inside an element .* starts at line 2", 5),
    (b'[{"a": 1}\n', "ends inside the array", 2),
    (b"[] trailing", "unexpected content", 1),
])
def test_broken_structure_is_named_by_line(raw, message, line):
    with pytest.raises(MalformedInput, match=message) as info:
        list(array_elements(io.BytesIO(raw), source="f.json", chunk=3))
    assert info.value.line == line and info.value.source == "f.json"


def test_an_element_larger_than_the_limit_is_refused():
    raw = b'[{"a": "' + b"x" * 100 + b'"}]'
    with pytest.raises(MalformedInput, match="larger than"):
        list(array_elements(io.BytesIO(raw), chunk=16, max_element=50))


def test_a_bom_and_an_empty_array():
    assert list(array_elements(io.BytesIO(b"\xef\xbb\xbf [ ] \n"))) == []
