"""A bound on inline nesting: emphasis can nest thousands deep (``*a **a *a ...``), and
html5lib (inside bleach) costs O(depth) per element, so markup deeper than the limit is shown
as its literal delimiters."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

MAX_INLINE_DEPTH = 20


def inline_depth_plugin(md: MarkdownIt, max_depth: int = MAX_INLINE_DEPTH) -> None:
    """Adds the core rule ``limit_depth`` at the end of the chain (after linkify, whose links
    count as nesting too)."""

    def limit_depth(state: StateCore) -> None:
        for token in state.tokens:
            children = token.children
            if token.type != "inline" or not children or len(children) <= 2 * max_depth:
                continue
            depth = 0
            flattened: list[bool] = []
            for child in children:
                if child.nesting == 1:
                    depth += 1
                    flattened.append(depth > max_depth)
                    if flattened[-1]:
                        _as_text(child)
                elif child.nesting == -1:
                    depth -= 1
                    if flattened and flattened.pop():
                        _as_text(child)

    md.core.ruler.push("limit_depth", limit_depth)


def _as_text(token: Token) -> None:
    token.type, token.tag, token.nesting = "text", "", 0
    token.content, token.attrs = token.markup, {}
