"""``cite_plugin``: attributed spans as a markdown-it plugin.

Like mdit-py-plugins' footnote plugin, it only registers named rules on ``md`` (and wraps the
two link hooks markdown-it documents as replaceable), so it composes with other plugins:

========================  =======================  ===============================================
ruler                     rule                     job
========================  =======================  ===============================================
core, after ``block``     ``cite_sentinels``       boundaries into block contents (``boundaries``)
core, after that          ``cite_references``      reference labels looked up without sentinels
inline (wrapped)          ``emphasis``,            flanking that looks through sentinels
                          ``strikethrough``
inline (wrapped)          ``backticks``            code span padding that ignores sentinels
core, last                ``cite_spans``           sentinels into spans and markers (``spans``)
renderer                  ``fence``,               cited code drawn from the token's meta, else
                          ``code_block``           the renderer's rule as it was
``md.normalizeLink``,     (wrapped)                see the URL without sentinels
``md.validateLink``
========================  =======================  ===============================================

It does nothing unless the env holds a plan (``cite_env``); without one the output is
markdown-it's own. ::

    md = MarkdownIt("js-default").use(cite_plugin)
    html = md.render(text, cite_env(text, [Cite(1, 0, 12)], anchor_prefix="src-t-"))

``text`` must be as ``prepare_text`` returns it (the ranges address it). ``render_markdown``
does that, uses the parser set up in ``parser`` (images and markdown-it's own normalize step
off) and sanitizes the result. A plugin ``use``-d after this one that pushes a core rule runs
after ``cite_spans``, on spans already placed: give it a place with ``ruler.before``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import emphasis, strikethrough

from .boundaries import insert_sentinels
from .cites import CITE_PLAN, Cite, Plan, build_events
from .inline import backticks, link_hooks, sentinel_blind_references, sentinel_transparent
from .spans import code_render_rule, place_spans


def cite_plugin(md: MarkdownIt) -> None:
    """Register the citation rules on ``md`` (``md.use(cite_plugin)``)."""
    md.core.ruler.after("block", "cite_sentinels", insert_sentinels)
    md.core.ruler.after("cite_sentinels", "cite_references", sentinel_blind_references)
    md.inline.ruler.at("emphasis", sentinel_transparent(emphasis.tokenize, lambda m: m == "*"))
    md.inline.ruler.at("strikethrough", sentinel_transparent(strikethrough.tokenize, _always))
    md.inline.ruler.at("backticks", backticks)
    md.core.ruler.push("cite_spans", place_spans)
    renderer = md.renderer
    if not isinstance(renderer, RendererHTML):  # the rules wrapped are the HTML renderer's
        raise TypeError(f"cite_plugin renders HTML, not with {type(renderer).__name__}")
    for name in ("fence", "code_block"):
        md.add_render_rule(name, code_render_rule(name, renderer.rules[name]))
    # Not rules: markdown-it's documented hooks for link handling, wrapped (the link policy
    # set before stays in force).
    normalize, validate = link_hooks(md.normalizeLink, md.validateLink)
    md.normalizeLink = normalize  # type: ignore[method-assign,assignment]
    md.validateLink = validate  # type: ignore[method-assign,assignment]


def cite_env(text: str, cites: Sequence[Cite], anchor_prefix: str = "") -> dict[str, Any]:
    """The env that makes ``cite_plugin`` mark ``cites`` in ``text`` (one render only: the
    plan keeps the render's state)."""
    env: dict[str, Any] = {}
    if cites:
        env[CITE_PLAN] = Plan(
            cites=list(cites), events=build_events(text, cites), anchor_prefix=anchor_prefix
        )
    return env


def _always(marker: str) -> bool:
    return True
