r"""The parser set-up: markdown-it-py with this project's options, link policy and plugins.

js-default (raw HTML off), typographer off, linkify on, images off, links http(s)/mailto only.
``PLUGINS`` are applied in order; adding one is one line there:

* ``inline_depth_plugin`` — a bound on inline nesting (``depth``);
* ``math_plugin`` — ``$…$``, ``$$…$$``, ``\(…\)``, ``\[…\]`` and amsmath as MathML (``math``);
* ``task_list_plugin`` — GFM task lists, disabled checkboxes (``blocks``);
* ``table_align_plugin`` — column alignment as classes, not inline styles (``blocks``);
* ``highlight_plugin`` — fenced code highlighted by Pygments (``code``);
* ``cite_plugin`` — attributed spans and markers (``plugin``).

Order matters for plugins that push core rules or wrap render rules: the depth limit must run
before ``cite_spans``, and ``cite_plugin`` wraps the code render rules, so it comes last.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ..urls import is_allowed_url, shown_url
from .blocks import table_align_plugin, task_list_plugin
from .code import highlight_plugin
from .depth import inline_depth_plugin
from .math import math_plugin
from .plugin import cite_plugin

PLUGINS: tuple[Callable[[MarkdownIt], None], ...] = (
    inline_depth_plugin,
    math_plugin,
    task_list_plugin,
    table_align_plugin,
    highlight_plugin,
    cite_plugin,
)

# What linkify-it needs before it can find anything: a scheme colon, "//", an "@", "www.",
# a dot followed by a label character, or "localhost". Checked first because its own tests
# run large regexes over every text token (about 40% of markdown-it's time on prose).
_MAY_LINK = re.compile(r"[:@]|//|www\.|\.[^\s.]|localhost", re.IGNORECASE)


class _QuickLinkify:
    """linkify-it with a conservative pre-check in ``test``/``pretest``; same results."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def test(self, text: str) -> bool:
        return bool(_MAY_LINK.search(text)) and self._inner.test(text)

    def pretest(self, text: str) -> bool:
        return bool(_MAY_LINK.search(text)) and self._inner.pretest(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def new_parser() -> MarkdownIt:
    """A fresh parser (``parser()`` keeps one per thread: markdown-it-py and linkify-it do not
    promise that an instance is safe to share between threads)."""
    md = MarkdownIt("js-default", {"typographer": False, "linkify": True})
    # Images would load third-party URLs (exfiltration by prompt injection): "![a](u)"
    # renders as "!" plus an ordinary link.
    md.disable("image")
    # prepare_text already normalised newlines and NUL (it has to, to keep offsets).
    md.disable("normalize")
    md.linkify = _QuickLinkify(md.linkify)
    # The link policy (markdown-it's documented hook): absolute http, https and mailto only.
    md.validateLink = is_allowed_url  # type: ignore[method-assign]
    # Links shown without the provider's tracking parameter (``urls.shown_url``).
    normalize = md.normalizeLink
    md.normalizeLink = lambda url: normalize(shown_url(url))  # type: ignore[method-assign]
    for plugin in PLUGINS:
        md.use(plugin)
    return md


_local = threading.local()


def parser() -> MarkdownIt:
    """This thread's parser."""
    md = getattr(_local, "md", None)
    if md is None:
        md = _local.md = new_parser()
    return md


def block_tokens(text: str) -> list[Token]:
    """The block-level tokens of prepared text (no inline parse, no citations)."""
    md = parser()
    return md.block.parse(text, md, {}, []) or []
