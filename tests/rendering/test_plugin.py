"""``cite_plugin`` as a markdown-it plugin: inert without a plan, working on any parser it is
``use``-d on, and composing with another plugin."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.utils import read_fixture_file

from conversations.rendering.markdown import (
    PLUGINS,
    Cite,
    cite_env,
    cite_plugin,
    new_parser,
    render_markdown,
)
from conversations.rendering.sanitize import clean_html
from tests.support import shared_path

# Each wrapped rule's syntax at least once: emphasis, strikethrough, code spans (with padding),
# links and reference links, autolinks, fences, indented code, tables.
TEXTS = [
    "*a* **b** _c_ __d__ ***e*** a*b*c a_b_c",
    "~~gone~~ ~single~ ~~~three~~~",
    "`` `tick` `` ` a ` `b`",
    "[inline](https://a.example/x \"t\") [ref] [ref][] [other][ref]\n\n[ref]: https://b.example/",
    "<https://c.example/> <me@d.example> www.e.example https://f.example/y.",
    "```py\nx = 1\n```\n\n    indented code\n\nafter",
    "| a | b |\n|---|:-:|\n| *c* | `d` |",
    "> quote *with* [link](javascript:alert(1))\n\n- item\n- **two**",
]


def test_without_a_plan_the_output_is_markdown_its_own() -> None:
    plain = MarkdownIt("js-default")
    cited = MarkdownIt("js-default").use(cite_plugin)
    texts = list(TEXTS)
    try:
        fixtures = shared_path("fixtures", "security", "markdown-it-py_4.3.0")
    except pytest.skip.Exception:
        fixtures = None  # the built-in texts still run
    if fixtures is not None:
        for path in sorted(fixtures.glob("*.md")):
            texts += [case[1] for case in read_fixture_file(path)]
    for text in texts:
        assert cited.render(text) == plain.render(text), text
        assert cited.render(text, cite_env(text, [])) == plain.render(text), text


def test_on_any_parser_the_plugin_places_spans_and_markers() -> None:
    md = MarkdownIt("js-default").use(cite_plugin)
    text = "**Tides** rise twice.\n\n```\nmoon\n```"
    html = md.render(text, cite_env(text, [Cite(1, 0, 9), Cite(2, 27, 31)], "s-"))
    assert html.startswith(
        '<p><span class="cite" data-sources="1"><strong>Tides</strong></span>\u2060'
        '<a class="cite-marker" href="#s-1" data-source="1" aria-label="Source 1">[1]</a>'
    )
    assert '<pre><code><span class="cite" data-sources="2">moon</span>' in html


def test_the_project_parser_is_the_plugins_on_markdown_it() -> None:
    md = new_parser()
    assert md.core.ruler.get_active_rules() == [
        "block", "cite_sentinels", "cite_references", "table_align", "inline", "task_lists",
        "linkify", "replacements", "smartquotes", "text_join", "limit_depth", "cite_spans",
    ]  # fmt: skip
    assert [p.__name__ for p in PLUGINS] == [
        "inline_depth_plugin", "math_plugin", "task_list_plugin", "table_align_plugin",
        "highlight_plugin", "cite_plugin",
    ]  # fmt: skip
    text = "See [the *gauge*](https://g.example/r) and `code`, then www.h.example."
    cites = [Cite(1, 4, 38, title="Gauge"), Cite(2, 0, len(text))]
    assert render_markdown(text, cites, anchor_prefix="s-") == clean_html(
        md.render(text, cite_env(text, cites, "s-"))
    )


def _shout(md: MarkdownIt) -> None:
    """A stand-in for a third-party plugin: ``!!word`` becomes ``WORD`` (an inline rule)."""

    def rule(state: StateInline, silent: bool) -> bool:
        if not state.src.startswith("!!", state.pos):
            return False
        end = state.pos + 2
        while end < state.posMax and state.src[end].isalpha():
            end += 1
        if not silent:
            state.push("text", "", 0).content = state.src[state.pos + 2 : end].upper()
        state.pos = end
        return True

    md.inline.ruler.before("text", "shout", rule)


def test_another_plugin_composes_with_it() -> None:
    md = MarkdownIt("js-default").use(cite_plugin).use(_shout)
    text = "a !!loud word"
    html = md.render(text, cite_env(text, [Cite(1, 2, 8)], "s-"))
    assert '<span class="cite" data-sources="1">LOUD</span>' in html
