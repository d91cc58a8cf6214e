"""Markdown as plain text, for titles, list rows and search snippets."""

import pytest

from conversations.rendering.plain import plain_line, plain_text


@pytest.mark.parametrize(("markdown", "plain"), [
    ("## Answer 1", "Answer 1"),
    ("### Tides ###", "Tides"),
    ("The **answer** to [the site](https://example.com/a) is `x`.",
     "The answer to the site is x."),
    ("***both*** and __strong__ and ~~gone~~", "both and strong and gone"),
    ("- a *listed* item", "a listed item"),
    ("1. first", "first"),
    ("> quoted", "quoted"),
    ("![a chart](https://example.com/c.png)", "a chart"),
    ("2 * 3 * 4 = 24", "2 * 3 * 4 = 24"),  # no emphasis: left alone
    ("snake_case_name", "snake_case_name"),
    ("```python", ""),
    ("---", ""),
])
def test_a_line_reads_without_its_markdown(markdown, plain):
    assert plain_line(markdown) == plain


def test_lines_are_kept():
    assert plain_text("# Title\n\nSome **bold** text") == "Title\n\nSome bold text"
