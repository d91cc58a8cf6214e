"""Django's ``{# … #}`` comment ends at its line: one spread over two lines is not a comment, and
its text shows on the page (a turn's Sources showed "{# Not a landmark: …")."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_no_template_comment_spans_lines():
    opened = re.compile(r"\{#(?![^\n]*#\})")
    found = [f"{path.relative_to(TEMPLATES)}:{n}"
             for path in sorted(TEMPLATES.rglob("*.html"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if opened.search(line)]
    assert found == []


def test_the_check_finds_a_comment_over_two_lines():
    line = "{# starts here\n"
    assert re.search(r"\{#(?![^\n]*#\})", line)
    assert not re.search(r"\{#(?![^\n]*#\})", "{# one line #}")
