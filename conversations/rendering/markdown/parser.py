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
from .sentinels import SENTINEL, is_sentinel

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


class QuickLinkify:
    """linkify-it with a conservative pre-check in ``test``/``pretest``; same results."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def test(self, text: str) -> bool:
        return bool(_MAY_LINK.search(text)) and self._inner.test(text)

    def pretest(self, text: str) -> bool:
        return bool(_MAY_LINK.search(text)) and self._inner.pretest(text)

    def match(self, text: str) -> Any:
        """Links in ``text`` found as if its sentinels were not there: a range boundary right
        after a URL's trailing punctuation ("x.S") must not pull that punctuation into the
        link. A link's offsets and text are the original's (sentinels inside it ride along,
        for span placement); its URL is read without them."""
        if not SENTINEL.search(text):
            return self._inner.match(text)
        positions = [i for i, ch in enumerate(text) if not is_sentinel(ch)]
        links = self._inner.match("".join(text[i] for i in positions))
        for link in links or ():
            start = positions[link.index]
            end = positions[link.last_index - 1] + 1
            link.index, link.last_index = start, end
            found, link.raw = link.raw, text[start:end]
            if link.text == found:  # (linkify-it's own normalizations of the text are kept)
                link.text = link.raw
        return links

    def match_at_start(self, text: str) -> Any:
        """The same for the inline rule, which reads a URL from where its scheme starts and
        consumes ``len(url)`` characters: the URL it gets is the original's, up to where the
        link ends without its sentinels (those inside it ride along)."""
        if not SENTINEL.search(text):
            return self._inner.match_at_start(text)
        positions = [i for i, ch in enumerate(text) if not is_sentinel(ch)]
        link = self._inner.match_at_start("".join(text[i] for i in positions))
        if link is None or link.url != link.raw:  # normalized: as it was before
            return self._inner.match_at_start(text)
        end = positions[link.last_index - 1] + 1
        link.last_index = end
        link.raw = link.url = link.text = text[:end]
        return link

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
    md.linkify = QuickLinkify(md.linkify)
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
