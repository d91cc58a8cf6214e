"""``cite_plugin``: attributed spans as a markdown-it plugin.

Like mdit-py-plugins' footnote plugin, it only registers named rules on ``md`` (and wraps the
two link hooks markdown-it documents as replaceable), so it composes with other plugins:

========================  =======================  ===============================================
ruler                     rule                     job
========================  =======================  ===============================================
core, after ``block``     ``cite_sentinels``       boundaries into block contents (``boundaries``)
core                      ``cite_references``      reference labels looked up without sentinels
inline (replaced)         ``emphasis``,            flanking that looks through sentinels
                          ``strikethrough``
inline (replaced)         ``backticks``            code span padding that ignores sentinels
core, last                ``cite_spans``           sentinels into spans and markers (``spans``)
renderer                  ``fence``,               cited code drawn from the token's meta, else
                          ``code_block``           the renderer's rule as it was
``md.normalizeLink``,     (wrapped)                see the URL without sentinels
``md.validateLink``
========================  =======================  ===============================================

It does nothing unless ``env[CITE_PLAN]`` holds a ``Plan`` (``render.render_markdown`` puts
one there); without one the output is markdown-it's own. Plugins ``use``-d after this one and
pushing core rules run after ``cite_spans``: give them a place with ``ruler.before``.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_inline import emphasis, strikethrough

from .boundaries import insert_sentinels
from .inline import backticks, link_hooks, sentinel_blind_references, sentinel_transparent
from .spans import code_render_rule, place_spans


def cite_plugin(md: MarkdownIt) -> None:
    md.core.ruler.after("block", "cite_sentinels", insert_sentinels)
    md.core.ruler.after("cite_sentinels", "cite_references", sentinel_blind_references)
    md.inline.ruler.at("emphasis", sentinel_transparent(emphasis.tokenize, lambda m: m == "*"))
    md.inline.ruler.at("strikethrough", sentinel_transparent(strikethrough.tokenize, _always))
    md.inline.ruler.at("backticks", backticks)
    md.core.ruler.push("cite_spans", place_spans)
    for name in ("fence", "code_block"):
        md.add_render_rule(name, code_render_rule(name, md.renderer.rules[name]))
    md.normalizeLink, md.validateLink = link_hooks(md.normalizeLink, md.validateLink)  # type: ignore[method-assign]


def _always(marker: str) -> bool:
    return True
