"""``math_plugin``: TeX math rendered to MathML on the server (no client-side library).

Delimiters: ``$…$`` and ``$$…$$`` (mdit-py-plugins' dollarmath; a ``$`` next to a digit or a
space does not open or close, so prices stay text), ``\\(…\\)`` and ``\\[…\\]`` (small rules
here), and amsmath environments (``\\begin{align}…``). They are parsed before markdown's
backslash escapes, so ``\\,`` reaches the TeX intact.

latex2mathml builds an element tree; it is serialized here, not by the library: its own
serializer neither escapes ``\\text{…}`` nor filters attributes (``\\href``, ``\\style``). Only
the elements and attributes in ``markup.MATHML_TAGS`` / ``MATHML_ATTRIBUTES`` are written, attribute
values must be plain tokens (no ``:``, ``(`` or quotes, so no URL or CSS function), text is
escaped. TeX that fails to convert, or is longer than ``MAX_TEX_CHARS``, is shown as code.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from xml.etree.ElementTree import Element

from latex2mathml.converter import convert_to_element
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.amsmath import amsmath_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

from ..markup import MATHML_ATTRIBUTES, MATHML_TAGS, MATHML_VALUE
from .prepare import escaped
from .spans import MATH_BLOCK_TOKENS, MATH_INLINE

MAX_TEX_CHARS = 4000  # per formula; longer TeX is shown as code
MAX_FORMULAS = 300  # converted per render (about 0.5 ms each); the rest are shown as code
_COUNT = "math_formulas"  # the env key counting them

_ENTITY = re.compile(r"&#x([0-9A-Fa-f]{1,6});")
MATH_TOKENS = MATH_INLINE | MATH_BLOCK_TOKENS


def _text(value: str | None) -> str:
    if not value:
        return ""
    # latex2mathml stores symbols (and \text{}'s spaces) as hex character references
    # ("&#x0002B;"), everything else as is: decode those, escape the result.
    if "&#x" in value:
        value = _ENTITY.sub(_decode, value)
    return html.escape(value, quote=False)


def _decode(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def _serialize(el: Element, out: list[str]) -> None:
    tag = el.tag if isinstance(el.tag, str) else ""
    # An <mrow> around exactly one element (and no text or attributes) is that element
    # (MathML Core): latex2mathml writes many; each is work for the sanitizer and the page.
    while (tag == "mrow" and not el.attrib and len(el) == 1 and not (el.text or "").strip()
           and not (el[0].tail or "").strip()):  # fmt: skip
        el = el[0]
        tag = el.tag if isinstance(el.tag, str) else ""
    known = tag in MATHML_TAGS
    if known:
        attrs = "".join(
            f' {name}="{value}"'
            for name, value in sorted(el.attrib.items())
            if name in MATHML_ATTRIBUTES and MATHML_VALUE.fullmatch(value)
        )
        out.append(f"<{tag}{attrs}>")
    out.append(_text(el.text))
    for child in el:
        _serialize(child, out)
        out.append(_text(child.tail))
    if known:
        out.append(f"</{tag}>")


@lru_cache(maxsize=2048)
def render_math(tex: str, display: bool) -> str:
    """TeX as a MathML ``<math>`` element (``display="block"`` for display math), or the TeX
    as code when it cannot be converted."""
    mode = "block" if display else "inline"
    if len(tex) <= MAX_TEX_CHARS and tex.strip():
        try:
            root = convert_to_element(tex, display=mode)
        except Exception:  # latex2mathml raises many kinds (and RecursionError) on bad TeX
            root = None
        if root is not None:
            out: list[str] = []
            _serialize(root, out)  # no xmlns: the HTML parser puts <math> in its namespace
            return "".join(out)
    return _tex_code(tex, display)


def _tex_of(token: Token) -> str:
    meta = token.meta or {}
    return str(meta.get("tex", token.content))


def _tex_code(tex: str, display: bool) -> str:
    code = f'<code class="math-tex">{html.escape(tex, quote=False)}</code>'
    return f"<pre>{code}</pre>" if display else code


def math_html(token: Token, env: dict[str, Any] | None = None) -> str:
    """The HTML of a math token (inline, or a display block). ``env`` counts the formulas of
    one render: past ``MAX_FORMULAS`` they are shown as TeX code."""
    display = token.type in MATH_BLOCK_TOKENS or token.type == "math_inline_double"
    tex = _tex_of(token)
    if env is not None:
        env[_COUNT] = env.get(_COUNT, 0) + 1
    over = env is not None and env[_COUNT] > MAX_FORMULAS
    body = _tex_code(tex, display) if over else render_math(tex, display)
    if token.type in MATH_BLOCK_TOKENS:
        return f'<div class="math-display">{body}</div>\n'
    return body


def _render_rule(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    token = tokens[idx]
    meta = token.meta or {}
    body = math_html(token, env if isinstance(env, dict) else None)
    # Citations (``cite_plugin``) leave the span around and the markers after the formula.
    if meta.get("cite_open"):
        if token.type in MATH_BLOCK_TOKENS:
            inner = body[len('<div class="math-display">') : -len("</div>\n")]
            return (f'<div class="math-display">{meta["cite_open"]}{inner}</span>'
                    f'{meta.get("cite_markers", "")}</div>\n')  # fmt: skip
        return f"{meta['cite_open']}{body}</span>"
    if meta.get("cite_markers") and token.type in MATH_BLOCK_TOKENS:
        return body[: -len("</div>\n")] + str(meta["cite_markers"]) + "</div>\n"
    return body


def _bracket_inline(state: StateInline, silent: bool) -> bool:
    r"""``\(…\)`` on one inline run (before the escape rule, which would eat the ``\(``)."""
    src, pos = state.src, state.pos
    if not src.startswith("\\(", pos) or escaped(src, pos):
        return False
    # The last closing of this run, found once: many "\(" with no "\)" stay linear.
    cache: dict[int, int] = state.__dict__.setdefault("_turnscope_last_close", {})
    last = cache.get(state.posMax)
    if last is None:
        last = cache[state.posMax] = src.rfind("\\)", 0, state.posMax)
    if last < pos + 2:
        return False
    end = src.find("\\)", pos + 2, state.posMax)
    if end < 0 or end == pos + 2:
        return False
    if not silent:
        token = state.push("math_inline", "math", 0)
        token.content = src[pos + 2 : end]
        token.markup = "\\("
    state.pos = end + 2
    return True


def _bracket_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    r"""``\[…\]`` starting a line, ending at a line's end (within the same block)."""
    if state.sCount[start] - state.blkIndent >= 4:
        return False  # indented code
    begin = state.bMarks[start] + state.tShift[start]
    src = state.src
    if not src.startswith("\\[", begin):
        return False
    line = start
    while line < end:
        lo = begin + 2 if line == start else state.bMarks[line] + state.tShift[line]
        text = src[lo : state.eMarks[line]].rstrip()
        if line > start and not text:
            return False  # a blank line ends the block before any closing
        if text.endswith("\\]"):
            break
        line += 1
    else:
        return False
    if silent:
        return True
    # The lines' content without their container prefixes ("> ", list indentation).
    parts = [src[begin + 2 : state.eMarks[start]]]
    parts += [src[state.bMarks[i] + state.tShift[i] : state.eMarks[i]]
              for i in range(start + 1, line + 1)]
    body = "\n".join(parts).rstrip()
    token = state.push("math_block", "math", 0)
    token.block = True
    token.content = body[:-2]
    token.markup = "\\["
    token.map = [start, line + 1]
    state.line = line + 1
    return True


def math_plugin(md: MarkdownIt) -> None:
    """Math as MathML: dollarmath (``$``, ``$$``), amsmath environments, ``\\(`` and ``\\[``."""
    dollarmath_plugin(
        md,
        allow_labels=False,
        allow_space=False,  # "$ 5 and $ 6" is prose
        allow_digits=False,  # "$5 and $10" too
        allow_blank_lines=False,
        double_inline=True,
    )
    amsmath_plugin(md)
    md.inline.ruler.before("escape", "math_inline_bracket", _bracket_inline)
    md.block.ruler.before("fence", "math_block_bracket", _bracket_block)
    for name in MATH_TOKENS:
        md.add_render_rule(name, _render_rule)
