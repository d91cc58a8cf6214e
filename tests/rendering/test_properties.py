"""Property tests for span placement.

Two honest properties:

* Plain prose (letters, digits, spaces, commas, line breaks, blank lines: nothing the markdown
  parser consumes) with random ranges: every span of source n, concatenated, has exactly the
  text of range n, up to whitespace (paragraph breaks and line-leading spaces are not text in
  HTML); the visible text equals the render without citations.
* Arbitrary markdown (emphasis, code, links, autolinks, bare URLs, lists, quotes, tables,
  fences, entities, escapes) with random ranges: well-formed, allowlisted HTML whose visible
  text equals the render without citations; sanitizing again changes nothing. Exact span text
  is not asserted here: a range may start inside ``**`` or a link target, which is not text.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.rendering.markdown import Cite, render_markdown
from conversations.rendering.sanitize import clean_html

from .helpers import (
    MARKDOWN_ALLOWED,
    cited_texts,
    markers,
    nesting_errors,
    policy_problems,
    text_without_markers,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SPACE = re.compile(r"\s+")

words = st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=8)
separators = st.sampled_from([" ", " ", " ", ", ", "\n", "\n\n", "  "])


@st.composite
def prose(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(words, separators), min_size=1, max_size=40))
    return "".join(word + sep for word, sep in parts).rstrip(" ,")


MARKDOWN_PIECES = [
    "*", "**", "_", "__", "~~", "`", "``", "[", "]", "(", ")", "![", "<", ">", "&", "&amp;",
    "&#65;", "\\", "\\*", "#", "# ", "> ", "- ", "1. ", "|", " | ", "\n", "\n\n", "    ",
    "```\n", "```py\n", "~~~\n", "http://a.example/x", "https://b.example", "www.c.example",
    "<https://d.example/y>", "[t](https://e.example/z)", "[r]", "[r]: https://f.example\n",
    "a@b.example", "---\n", "| a | b |\n|---|---|\n| c | d |\n", " ", "  \n", "\t",
    "\r\n", "===\n", "  - ", "> - ", "***", "<div>", "\U000f0003", "\x00", "é", "👍🏽",
]  # fmt: skip
markdown_text = st.lists(
    st.one_of(st.sampled_from(MARKDOWN_PIECES), words, st.just(" ")), min_size=1, max_size=50
).map("".join)


@st.composite
def ranges(draw: st.DrawFn, length: int) -> list[tuple[int, int]]:
    bounds = st.integers(min_value=0, max_value=length)
    pairs = draw(st.lists(st.tuples(bounds, bounds), min_size=0, max_size=6))
    return [(min(a, b), max(a, b)) for a, b in pairs]


def render(text: str, spans: list[tuple[int, int]]) -> str:
    cites = [Cite(n, start, end) for n, (start, end) in enumerate(spans, 1)]
    return render_markdown(text, cites, anchor_prefix="src-p-")


def check_structure(html: str, plain: str) -> None:
    assert not nesting_errors(html), html
    assert not policy_problems(html, MARKDOWN_ALLOWED), html
    assert clean_html(html) == html
    # (rstrip: text with no block to hold a marker gets a marker paragraph at the end)
    assert text_without_markers(html).rstrip() == text_without_markers(plain).rstrip()


@SETTINGS
@given(st.data())
def test_prose_spans_carry_exactly_the_cited_text(data: st.DataObject) -> None:
    text = data.draw(prose())
    spans = data.draw(ranges(len(text)))
    html = render(text, spans)
    check_structure(html, render_markdown(text))
    found = cited_texts(html)
    for number, (start, end) in enumerate(spans, 1):
        expected = _SPACE.sub("", text[start:end])
        assert _SPACE.sub("", found.get(number, "")) == expected, (number, text[start:end], html)
    # one marker per attribution, in text order of the range ends
    numbers = [int(m["data-source"]) for m in markers(html)]
    assert sorted(numbers) == list(range(1, len(spans) + 1))


@SETTINGS
@given(st.data())
def test_any_markdown_with_any_ranges_is_well_formed(data: st.DataObject) -> None:
    text = data.draw(markdown_text)
    spans = data.draw(ranges(len(text)))
    html = render(text, spans)
    check_structure(html, render_markdown(text))
    assert sorted(int(m["data-source"]) for m in markers(html)) == list(range(1, len(spans) + 1))


@SETTINGS
@given(markdown_text)
def test_whole_event_citation_covers_all_text(text: str) -> None:
    html = render_markdown(text, [Cite(1)], anchor_prefix="src-p-")
    check_structure(html, render_markdown(text))
    visible = _SPACE.sub("", text_without_markers(html))
    assert _SPACE.sub("", cited_texts(html).get(1, "")) == visible
