"""What the markdown plugins emit beyond plain markdown, named once for the plugins that write
it (``markdown.math``, ``markdown.code``) and the sanitizer that lets exactly it through."""

from __future__ import annotations

import re

from pygments.token import STANDARD_TYPES

# The MathML elements latex2mathml builds, and their attributes.
MATHML_TAGS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac",
    "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mstyle",
    "mpadded", "mphantom", "menclose",
})  # fmt: skip
MATHML_ATTRIBUTES = frozenset({
    "display", "mathvariant", "mathsize", "mathcolor", "mathbackground", "stretchy", "fence",
    "separator", "form", "largeop", "lspace", "rspace", "width", "height", "depth", "voffset",
    "minsize", "maxsize", "movablelimits", "accent", "accentunder", "linethickness", "notation",
    "displaystyle", "scriptlevel", "columnspacing", "rowspacing", "columnalign", "columnlines",
    "rowlines", "linebreak",
})  # fmt: skip
# Lengths, keywords, colour names and #hex: never a URL, a CSS function or markup.
MATHML_VALUE = re.compile(r"[A-Za-z0-9 .#%+-]{0,80}")

# Pygments' short token class names, prefixed so model text can never pick a page style.
HIGHLIGHT_PREFIX = "hl-"
HIGHLIGHT_CLASSES = frozenset(HIGHLIGHT_PREFIX + name for name in STANDARD_TYPES.values() if name)
