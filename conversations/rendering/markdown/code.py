"""``highlight_plugin``: fenced code highlighted on the server with Pygments.

Tokens become ``<span class="hl-k">`` (Pygments' short class names with a prefix, so model
text can never pick up a page style); colours live in static CSS for both schemes
(``highlight_css``, written to ``static/highlight.css``), never in ``style=`` attributes, which
the CSP forbids. A fence without a language, with one Pygments does not know, or longer than
``MAX_HIGHLIGHT_CHARS`` is shown as plain escaped code.

Citations: ``cite_plugin`` leaves a cited block's text in ``token.meta["cite_pieces"]``
(``(text, sources)`` runs); the highlighter splits its tokens at those runs so the cite spans
and the token spans nest properly, and the markers (``cite_markers``) follow the code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml, unescapeAll
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

from ..markup import HIGHLIGHT_PREFIX
from .cites import span_open

MAX_HIGHLIGHT_CHARS = 20_000  # per block: longer code is shown plain (bounded lexing time)
# Per render: every token is an element the sanitizer parses, so highlighting is bounded.
MAX_HIGHLIGHT_TOTAL = 40_000
_BUDGET = "highlighted_chars"  # the env key counting them
CLASS_PREFIX = HIGHLIGHT_PREFIX

Pieces = Sequence[tuple[str, frozenset[int]]]


@lru_cache(maxsize=256)
def _lexer(language: str) -> Lexer | None:
    if not language or len(language) > 40:
        return None
    try:
        # Keep the text exactly as written: the cite pieces address it.
        return get_lexer_by_name(language, stripnl=False, stripall=False, ensurenl=False)
    except (ClassNotFound, ValueError):
        return None


def _short_class(ttype: _TokenType) -> str:
    while ttype not in STANDARD_TYPES and ttype.parent is not None:
        ttype = ttype.parent
    name = STANDARD_TYPES.get(ttype, "")  # the root (Token) is a standard type
    return CLASS_PREFIX + name if name and name != "w" else ""


@lru_cache(maxsize=1024)
def _class_of(ttype: _TokenType) -> str:
    """The span class of a token type; "" for types drawn as plain text in both schemes
    (names, punctuation): fewer elements, less for the sanitizer to parse."""
    cls = _short_class(ttype)
    return "" if cls in _plain_classes() else cls


def _tokens(code: str, language: str) -> list[tuple[str, str]] | None:
    """``(class, text)`` runs covering ``code`` exactly, or None to show it plain."""
    lexer = _lexer(language.lower())
    if lexer is None or len(code) > MAX_HIGHLIGHT_CHARS:
        return None
    runs: list[tuple[str, str]] = []
    try:
        for ttype, value in lexer.get_tokens(code):
            if not value:
                continue
            cls = _class_of(ttype)
            if runs and runs[-1][0] == cls:
                runs[-1] = (cls, runs[-1][1] + value)
            else:
                runs.append((cls, value))
    except Exception:  # a lexer bug must not break the page
        return None
    if "".join(text for _, text in runs) != code:
        return None
    return runs


def _split(runs: list[tuple[str, str]], pieces: Pieces) -> Iterable[tuple[str, str, Any]]:
    """Token runs cut at cite piece boundaries: ``(class, text, sources)``."""
    i = 0
    cls, text = runs[0] if runs else ("", "")
    for piece, key in pieces:
        need = len(piece)
        while need:
            if not text:
                i += 1
                cls, text = runs[i]
            take = min(need, len(text))
            yield cls, text[:take], key
            text = text[take:]
            need -= take


def code_html(pieces: Pieces, language: str = "") -> str:
    """The inner HTML of a ``<code>`` element: ``pieces`` (the code as runs cited by sets of
    sources) escaped, highlighted when ``language`` is one Pygments knows."""
    code = "".join(text for text, _ in pieces)
    runs = _tokens(code, language) if language else None
    out: list[str] = []
    open_key: frozenset[int] = frozenset()
    if runs is None:
        parts: Iterable[tuple[str, str, Any]] = (("", text, key) for text, key in pieces)
    else:
        parts = _split(runs, pieces)
    for cls, text, key in parts:
        if key != open_key:
            if open_key:
                out.append("</span>")
            if key:
                out.append(span_open(key))
            open_key = key
        body = escapeHtml(text)
        out.append(f'<span class="{cls}">{body}</span>' if cls else body)
    if open_key:
        out.append("</span>")
    return "".join(out)


def fence_language(token: Token) -> str:
    info = unescapeAll(token.info).strip() if token.info else ""
    return info.split(maxsplit=1)[0] if info else ""


def _code_rule(name: str) -> Any:
    def rule(self: RendererHTML, tokens: Sequence[Token], idx: int, options: Any,
             env: Any) -> str:
        token = tokens[idx]
        meta = token.meta or {}
        pieces: Pieces = (
            meta.get("cite_pieces") or ((token.content, frozenset()),))
        language = fence_language(token) if name == "fence" else ""
        highlighted = language  # over the page's highlighting budget: named, not highlighted
        if language and isinstance(env, dict):
            used = env.get(_BUDGET, 0) + len(token.content)
            env[_BUDGET] = used
            if used > MAX_HIGHLIGHT_TOTAL:
                highlighted = ""
        cls = f' class="{escapeHtml(options.langPrefix + language)}"' if language else ""
        markers = meta.get("cite_markers", "")
        return f"<pre><code{cls}>{code_html(pieces, highlighted)}</code>{markers}</pre>\n"

    rule.draws_cite_pieces = True  # type: ignore[attr-defined]
    return rule


def highlight_plugin(md: MarkdownIt) -> None:
    """Fences and indented code drawn by ``code_html`` (fences highlighted by language)."""
    for name in ("fence", "code_block"):
        md.add_render_rule(name, _code_rule(name))


# The colour schemes: Pygments styles, each colour darkened (light) or lightened (dark) until
# it keeps a 4.5:1 contrast on the page's code background (--code in static/app.css).
LIGHT_STYLE, LIGHT_BACKGROUND = "default", "f0f1f3"
DARK_STYLE, DARK_BACKGROUND = "github-dark", "2a2e35"
MIN_CONTRAST = 4.6


def _luminance(hex_colour: str) -> float:
    def channel(value: float) -> float:
        return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two ``rrggbb`` colours."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _readable(colour: str, background: str) -> str:
    target = 0 if _luminance(background) > 0.5 else 255
    rgb = [int(colour[i : i + 2], 16) for i in (0, 2, 4)]
    while contrast("".join(f"{c:02x}" for c in rgb), background) < MIN_CONTRAST:
        rgb = [round(c + (target - c) * 0.08) for c in rgb]
    return "".join(f"{c:02x}" for c in rgb)


def _declarations(style_name: str, background: str) -> dict[str, tuple[str, str, str]]:
    """class -> (colour, weight, style) in one scheme; the style's own text colour and no
    colour are both "inherit"."""
    from pygments.styles import get_style_by_name
    from pygments.token import Text

    style = get_style_by_name(style_name)
    base = style.style_for_token(Text)["color"]
    out = {}
    for ttype, spec in style:
        cls = _short_class(ttype)
        if not cls or ttype not in STANDARD_TYPES:
            continue
        colour = spec["color"]
        shown = f"#{_readable(colour, background)}" if colour and colour != base else "inherit"
        out[cls] = (shown, "bold" if spec["bold"] else "normal",
                    "italic" if spec["italic"] else "normal")
    return out


_PLAIN = ("inherit", "normal", "normal")


@lru_cache(maxsize=1)
def _plain_classes() -> frozenset[str]:
    light = _declarations(LIGHT_STYLE, LIGHT_BACKGROUND)
    dark = _declarations(DARK_STYLE, DARK_BACKGROUND)
    return frozenset(c for c in light if light[c] == _PLAIN and dark.get(c, _PLAIN) == _PLAIN)


def _style_rules(style_name: str, background: str) -> list[str]:
    # Every property in every rule, so the dark block fully replaces the light one.
    plain = _plain_classes()
    return [f".{cls} {{ color: {colour}; font-weight: {weight}; font-style: {italic} }}"
            for cls, (colour, weight, italic) in _declarations(style_name, background).items()
            if cls not in plain]


def highlight_css() -> str:
    """The stylesheet of the token classes: light, then dark under ``prefers-color-scheme``."""
    light = "\n".join(_style_rules(LIGHT_STYLE, LIGHT_BACKGROUND))
    dark = "\n".join("  " + rule for rule in _style_rules(DARK_STYLE, DARK_BACKGROUND))
    return (
        "/* Code highlighting (generated by conversations.rendering.markdown.code."
        "highlight_css; do not edit). */\n"
        f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"
    )
