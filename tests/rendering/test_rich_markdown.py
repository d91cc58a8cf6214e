"""Math as MathML, highlighted code, task lists and table alignment, with citations in and
around them; checked against the restated policy in ``helpers``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conversations.rendering.markdown import Cite, render_markdown
from conversations.rendering.markdown.code import (
    DARK_BACKGROUND,
    DARK_STYLE,
    LIGHT_BACKGROUND,
    LIGHT_STYLE,
    contrast,
    highlight_css,
)
from conversations.rendering.markdown.math import MAX_FORMULAS
from conversations.rendering.sanitize import clean_html

from .helpers import (
    MARKDOWN_ALLOWED,
    cited_texts,
    elements,
    markers,
    nesting_errors,
    nh3_removes_nothing,
    policy_problems,
)

REPO = Path(__file__).resolve().parents[2]


def render(text: str, *cites: Cite) -> str:
    html = render_markdown(text, cites, anchor_prefix="s-")
    assert not policy_problems(html, MARKDOWN_ALLOWED), policy_problems(html, MARKDOWN_ALLOWED)
    assert not nesting_errors(html), nesting_errors(html)
    assert clean_html(html) == html
    assert nh3_removes_nothing(html)
    assert "style=" not in html  # the CSP would not apply one
    return html


def cite(text: str, part: str, number: int = 1) -> Cite:
    start = text.index(part)
    return Cite(number, start, start + len(part))


def tags(html: str) -> list[str]:
    return [el.tag.rsplit("}", 1)[-1] for el in elements(html)]


@pytest.mark.parametrize(
    ("text", "display"),
    [
        ("Energy $E = mc^2$ here.", "inline"),
        ("Energy \\(E = mc^2\\) here.", "inline"),
        ("$$\nE = mc^2\n$$", "block"),
        ("\\[\nE = mc^2\n\\]", "block"),
        ("\\[ E = mc^2 \\]", "block"),
        ("> $$E = mc^2$$", "block"),
        ("\\begin{equation}\nE = mc^2\n\\end{equation}", "block"),
    ],
)  # fmt: skip
def test_math_delimiters_become_mathml(text: str, display: str) -> None:
    html = render(text)
    assert f'<math display="{display}">' in html
    assert "<mi>E</mi><mo>=</mo><mi>m</mi><msup><mi>c</mi><mn>2</mn></msup>" in html
    assert "$" not in html and "\\(" not in html and "\\[" not in html


def test_thin_space_is_not_eaten() -> None:
    html = render("Integrate $\\int x\\,dx$.")
    assert '<mi>x</mi><mspace width="0.167em"></mspace><mi>d</mi>' in html


def test_prices_stay_text() -> None:
    for text in ("It costs $5 and $10.", "Pay $ 5 or $ 6 now.", "From 1$ to 2$ each."):
        html = render(text)
        assert "<math" not in html and "$" in html


def test_tex_text_and_links_are_escaped_or_dropped() -> None:
    html = render("$\\text{<img src=x onerror=alert(1)>}$ $\\href{javascript:alert(1)}{y}$ "
                  "$\\style{background:url(https://t.example/)}{z}$ "
                  "$\\color{url(https://t.example/x)}{w}$")
    assert "<mtext>&lt;img\xa0src=x\xa0onerror=alert(1)&gt;</mtext>" in html
    assert "href" not in html and "javascript" not in html and "url(" not in html
    assert "<img" not in html


def test_bad_tex_is_shown_as_code() -> None:
    html = render("Broken $\\frac{1}{$ and $\\begin{matrix}$.")
    assert '<code class="math-tex">' in html or "<math" in html
    assert "Broken" in html


def test_formulas_past_the_cap_are_shown_as_tex() -> None:
    text = " ".join(f"$x_{{{i}}}$" for i in range(MAX_FORMULAS + 5))
    html = render(text)
    assert html.count("<math") == MAX_FORMULAS
    assert html.count('<code class="math-tex">') == 5


def test_citation_inside_and_around_math() -> None:
    text = "The law $E = mc^2$ holds, see $F = ma$ too."
    # a range ending inside a formula: the formula is cited whole, the marker after it
    html = render(text, cite(text, "The law $E = m"))
    assert cited_texts(html)[1].startswith("The law ")
    assert re.search(r'</math></span>\u2060<a class="cite-marker"', html)
    # a range starting inside one formula and ending inside the next
    html = render(text, cite(text, "mc^2$ holds, see $F"))
    span = re.search(r'<span class="cite" data-sources="1">(.*?)</span>\u2060<a', html)
    assert span and span.group(1).count("<math") == 2
    assert [m["data-source"] for m in markers(html)] == ["1"]


def test_citation_over_display_math() -> None:
    text = "Before.\n\n$$\nE = mc^2\n$$\n\nAfter."
    html = render(text, cite(text, "fore.\n\n$$\nE = mc"), Cite(2, text.index("$$"), len(text)))
    assert '<div class="math-display"><span class="cite" data-sources="1 2"><math' in html
    assert '</math></span>\u2060<a class="cite-marker" href="#s-1"' in html
    assert cited_texts(html)[2].endswith("After.")


def test_code_is_highlighted_with_classes() -> None:
    html = render("```python\ndef f(x):\n    return x + 1  # one\n```")
    assert '<pre><code class="language-python"><span class="hl-k">def</span> ' in html
    assert '<span class="hl-c1"># one</span>' in html
    for el in elements(html):
        if el.tag == "span":
            assert el.attrib["class"].startswith("hl-")


def test_unknown_language_and_indented_code_are_plain() -> None:
    html = render("```nosuchlanguage\nx = 1\n```\n\n    y = 2\n")
    assert '<code class="language-nosuchlanguage">x = 1\n</code>' in html
    assert "<pre><code>y = 2\n</code></pre>" in html


def test_cited_code_nests_cite_and_token_spans() -> None:
    text = "Intro.\n\n```js\nconst total = price * count;\n```\n"
    html = render(text, cite(text, "= price *"))
    assert cited_texts(html)[1] == "= price *"
    assert '<span class="cite" data-sources="1"><span class="hl-o">=</span> price ' in html
    assert '<span class="hl-kd">const</span>' in html  # names and punctuation stay plain text
    assert html.index("</code>") < html.index("cite-marker") < html.index("</pre>")


def test_task_lists() -> None:
    html = render("- [x] done\n- [ ] to do\n- not a task [x]\n\n1. [X] numbered")
    boxes = [el for el in elements(html) if el.tag == "input"]
    assert len(boxes) == 3
    assert all(b.attrib.get("disabled") is not None for b in boxes)
    assert [b.attrib.get("checked") is not None for b in boxes] == [True, False, True]
    assert all(b.attrib["aria-label"] == "Task" for b in boxes)
    assert '<ul class="contains-task-list">' in html and '<ol class="contains-task-list">' in html
    assert "[x]" not in html.replace("not a task [x]", "")


def test_task_marker_survives_a_citation_that_starts_on_it() -> None:
    text = "- [x] checked the gauges\n- [ ] read the report"
    html = render(text, Cite(1, text.index("["), text.index("gauges") + 6),
                  Cite(2, text.index("[ ]") + 1, text.index("read")))
    assert html.count("<input") == 2
    assert "gauges" in cited_texts(html)[1] and "[" not in cited_texts(html)[1]


def test_table_alignment_is_classes() -> None:
    html = render("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |")
    assert '<th class="align-left">a</th>' in html
    assert '<td class="align-center">2</td>' in html
    assert '<td class="align-right">3</td>' in html


def test_stylesheet_is_up_to_date() -> None:
    path = REPO / "static" / "highlight.css"
    assert path.read_text(encoding="utf-8") == highlight_css(), (
        "regenerate: uv run python -c 'from conversations.rendering.markdown.code import "
        "highlight_css; print(highlight_css(), end=\"\")' > static/highlight.css"
    )


def test_highlight_colours_are_readable_in_both_schemes() -> None:
    css = highlight_css()
    light, dark = css.split("@media (prefers-color-scheme: dark)")
    for block, background in ((light, LIGHT_BACKGROUND), (dark, DARK_BACKGROUND)):
        colours = re.findall(r"color: #([0-9a-f]{6})", block)
        assert colours
        assert min(contrast(c, background) for c in colours) >= 4.5
    assert LIGHT_STYLE != DARK_STYLE
    # the page's code background is the one the colours were checked against
    app = (REPO / "static" / "app.css").read_text(encoding="utf-8")
    assert f"--code: #{LIGHT_BACKGROUND}" in app and f"--code: #{DARK_BACKGROUND}" in app


def test_a_url_with_an_impossible_port_is_not_linked() -> None:
    # found by the corpus in a table cell: nh3 and a browser refuse the port, so do we
    html = render("| a |\n|---|\n| http://foo.com:٣٩/ |\n\n[x](http://foo.com:99999/)")
    assert "<a" not in html
    assert '<a href="https://ok.example:8080/a"' in render("[y](https://ok.example:8080/a)")
