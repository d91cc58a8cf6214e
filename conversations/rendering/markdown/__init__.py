"""Markdown to sanitized HTML, with attributed spans placed by code-point range.

How spans are placed without breaking markdown, one module per step:

1. ``prepare`` — the model's text is cleaned first: every code point of the sentinel plane
   (U+F0000..) is removed (ranges are remapped), and newlines/NUL are normalised the way
   markdown-it would. Range boundaries are nudged out of spots where a foreign character would
   change the parse (inside ``**``/backtick runs, entities, after a backslash or ``<``, between
   ``]`` and ``(``, inside trailing spaces of a hard break); ``cites`` turns them into the
   sorted boundary events of a ``Plan``.
2. ``boundaries`` — markdown-it-py parses the *block* structure of the clean text. Only then is
   each boundary turned into a sentinel code point (``sentinels``), inserted into the content
   of the block token it falls in, so block syntax never sees one.
3. ``inline`` — inline parsing runs with sentinels in place: emphasis flanking and code span
   padding look through them, reference labels and link targets are read without them.
4. ``spans`` — the inline token stream is rewritten as a small tree and each maximal run of
   siblings cited by the same sources is wrapped in ``<span class="cite" data-sources="1 3">``,
   with ``<a class="cite-marker">`` markers after the cited text (never inside a link).
5. ``render`` — the HTML goes through the one sanitizer (``sanitize.clean_html``).

Steps 2-4 are one markdown-it plugin, ``cite_plugin`` (``plugin``); ``parser`` sets up the
parser and its plugin list; ``depth`` bounds inline nesting. No regular expression ever runs
over rendered HTML.
"""

from .boundaries import content_segments, line_starts
from .cites import Cite, marker_html
from .math import math_plugin
from .parser import PLUGINS, block_tokens, new_parser
from .plugin import cite_env, cite_plugin
from .prepare import prepare_text, remap
from .render import MAX_MARKDOWN_CHARS, render_markdown

__all__ = [
    "MAX_MARKDOWN_CHARS",
    "PLUGINS",
    "Cite",
    "block_tokens",
    "cite_env",
    "cite_plugin",
    "content_segments",
    "line_starts",
    "marker_html",
    "math_plugin",
    "new_parser",
    "prepare_text",
    "remap",
    "render_markdown",
]
