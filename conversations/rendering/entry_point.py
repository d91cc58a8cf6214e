"""The search entry point policy: Google's ``searchEntryPoint.renderedContent``.

Third-party HTML + CSS that Google requires to be shown as provided. It is sanitized (no
scripts, no handlers, no ``url()`` fetches) *and* isolated: ``search_entry_point_document`` wraps
it in a document with its own CSP, for an ``<iframe sandbox>`` without ``allow-scripts``: on the
page the document has a URL of its own (served with ``ENTRY_POINT_POLICY``; a ``srcdoc`` frame
would inherit the page's policy), in an HTML export it is the frame's ``srcdoc``
(``search_entry_point_srcdoc``).

The Cleaner is not thread-safe (the parser keeps state), so each thread gets its own.
"""

from __future__ import annotations

import html
import threading
from functools import lru_cache
from html.parser import HTMLParser
from typing import Any

import bleach
import tinycss2
from bleach.css_sanitizer import CSSSanitizer

from .sanitize import ExternalLinks
from .urls import ALLOWED_SCHEMES, is_allowed_url

ENTRY_POINT_TAGS = frozenset(
    {
        "div",
        "span",
        "a",
        "p",
        "br",
        "b",
        "i",
        "em",
        "strong",
        "svg",
        "g",
        "path",
        "circle",
        "rect",
        "ellipse",
        "line",
        "polyline",
        "polygon",
    }
)
_ENTRY_POINT_COMMON = frozenset({"class", "style", "role", "title", "aria-label", "aria-hidden"})
_SVG_SHAPE = frozenset(
    {"fill", "fill-rule", "clip-rule", "stroke", "stroke-width", "opacity", "transform"}
)
ENTRY_POINT_ATTRIBUTES: dict[str, frozenset[str]] = {
    **{tag: _ENTRY_POINT_COMMON for tag in ("div", "span", "p", "br", "b", "i", "em", "strong")},
    "a": _ENTRY_POINT_COMMON | {"href", "rel", "target"},
    "svg": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"width", "height", "viewBox", "viewbox"},
    "g": _ENTRY_POINT_COMMON | _SVG_SHAPE,
    "path": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"d"},
    "circle": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"cx", "cy", "r"},
    "ellipse": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"cx", "cy", "rx", "ry"},
    "rect": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"x", "y", "width", "height", "rx", "ry"},
    "line": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"x1", "y1", "x2", "y2"},
    "polyline": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"points"},
    "polygon": _ENTRY_POINT_COMMON | _SVG_SHAPE | {"points"},
}

# Layout and typography only; nothing here can fetch (values are checked for url() as well).
ENTRY_POINT_CSS_PROPERTIES = frozenset(
    {
        "align-items",
        "align-self",
        "background",
        "background-color",
        "border",
        "border-bottom",
        "border-color",
        "border-left",
        "border-radius",
        "border-right",
        "border-style",
        "border-top",
        "border-width",
        "bottom",
        "box-shadow",
        "box-sizing",
        "clip-rule",
        "color",
        "cursor",
        "display",
        "fill",
        "fill-rule",
        "flex",
        "flex-direction",
        "flex-grow",
        "flex-shrink",
        "flex-wrap",
        "font",
        "font-family",
        "font-size",
        "font-style",
        "font-weight",
        "gap",
        "height",
        "justify-content",
        "left",
        "letter-spacing",
        "line-height",
        "margin",
        "margin-bottom",
        "margin-left",
        "margin-right",
        "margin-top",
        "max-height",
        "max-width",
        "min-height",
        "min-width",
        "opacity",
        "outline",
        "overflow",
        "overflow-x",
        "overflow-y",
        "padding",
        "padding-bottom",
        "padding-left",
        "padding-right",
        "padding-top",
        "position",
        "right",
        "scrollbar-width",
        "stroke",
        "stroke-width",
        "text-align",
        "text-decoration",
        "text-overflow",
        "top",
        "transform",
        "user-select",
        "vertical-align",
        "white-space",
        "width",
        "z-index",
        "-webkit-tap-highlight-color",
        "-webkit-user-select",
    }
)
# CSS functions that compute a value and never load anything.
_CSS_FUNCTIONS = frozenset(
    {
        "rgb",
        "rgba",
        "hsl",
        "hsla",
        "calc",
        "min",
        "max",
        "clamp",
        "linear-gradient",
        "radial-gradient",
        "translate",
        "translatex",
        "translatey",
        "scale",
        "rotate",
    }
)


_CSS_FETCH_WORDS = frozenset({"url", "src", "image", "image-set", "expression"})


def _css_value_safe(tokens: list[Any]) -> bool:
    for token in tokens:
        kind = token.type
        if kind in ("url", "at-keyword", "error", "bad-url"):
            return False
        if kind == "function":
            if token.lower_name not in _CSS_FUNCTIONS or not _css_value_safe(token.arguments):
                return False
        elif kind in ("() block", "[] block", "{} block"):
            # "url (x)" is not a url() to CSS, but nothing here needs a bare block: refuse.
            return False
        elif (kind == "ident" and token.lower_value in _CSS_FETCH_WORDS) or (
            kind == "string" and "<" in token.value
        ):
            return False
    return True


def _prelude_safe(tokens: list[Any]) -> bool:
    """Selectors and media queries: blocks are normal here; nothing may fetch."""
    for token in tokens:
        if token.type in ("url", "bad-url", "at-keyword", "error"):
            return False
        if token.type == "function" and (
            token.lower_name in _CSS_FETCH_WORDS or not _prelude_safe(token.arguments)
        ):
            return False
        if token.type in ("() block", "[] block", "{} block") and not _prelude_safe(token.content):
            return False
    return True


def _css_declarations(tokens_or_text: Any) -> str:
    """The allowed declarations of a declaration list, serialized canonically."""
    out = []
    for decl in tinycss2.parse_declaration_list(
        tokens_or_text, skip_comments=True, skip_whitespace=True
    ):
        if decl.type != "declaration" or decl.lower_name not in ENTRY_POINT_CSS_PROPERTIES:
            continue
        if not _css_value_safe(decl.value):
            continue
        value = tinycss2.serialize(decl.value).strip()
        if not value or "<" in value or "\\" in value:
            continue
        out.append(f"{decl.lower_name}: {value}{' !important' if decl.important else ''}")
    return "; ".join(out)


def _css_rules(rules: list[Any], depth: int = 0) -> list[str]:
    out = []
    for rule in rules:
        if rule.type == "qualified-rule":
            prelude = tinycss2.serialize(rule.prelude).strip()
            if not prelude or "<" in prelude or "\\" in prelude or not _prelude_safe(rule.prelude):
                continue
            body = _css_declarations(rule.content)
            if body:
                out.append(f"{prelude} {{ {body} }}")
        elif rule.type == "at-rule" and rule.lower_at_keyword == "media" and depth < 3:
            # @media is the only at-rule kept (light/dark variants); @import, @font-face and
            # friends can fetch, so they go.
            if rule.content is None or not _prelude_safe(rule.prelude):
                continue
            prelude = tinycss2.serialize(rule.prelude).strip()
            if "<" in prelude or "\\" in prelude:
                continue
            inner = _css_rules(
                tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True),
                depth + 1,
            )
            if inner:
                out.append(f"@media {prelude} {{ " + " ".join(inner) + " }")
    return out


def sanitize_stylesheet(css: str) -> str:
    """A ``<style>`` body reduced to allowlisted rules; never contains ``<`` or ``url()``."""
    rules = tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True)
    return "\n".join(_css_rules(rules))


class _EntryPointCSS(CSSSanitizer):
    """Style attributes in the entry point: same declaration policy as its stylesheet."""

    def sanitize_css(self, style: str) -> str:
        return _css_declarations(style)


def _entry_point_attribute(tag: str, name: str, value: str) -> bool:
    if name not in ENTRY_POINT_ATTRIBUTES.get(tag, ()):
        return False
    if name == "href":
        return is_allowed_url(html.unescape(value))
    return len(value) <= 20_000


def _entry_point_cleaner() -> bleach.Cleaner:
    return bleach.Cleaner(
        tags=ENTRY_POINT_TAGS,
        attributes=_entry_point_attribute,
        protocols=ALLOWED_SCHEMES,
        strip=True,
        strip_comments=True,
        filters=[ExternalLinks],
        css_sanitizer=_EntryPointCSS(),
    )


class _StyleSplitter(HTMLParser):
    """Separates ``<style>`` text from the markup and drops ``<script>`` with its content.

    Only a pre-pass: the markup it re-emits still goes through bleach (which parses like a
    browser), and the style text through ``sanitize_stylesheet``, so a parsing difference
    here can only lose content, never let any through.
    """

    _DROP = frozenset({"script", "style"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.markup: list[str] = []
        self.styles: list[str] = []
        self._inside: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._inside:
            return
        if tag in self._DROP:
            self._inside = tag
            return
        rendered = "".join(
            f' {name}="{html.escape(value or "", quote=True)}"'
            for name, value in attrs
            if name.replace("-", "").replace(":", "").isalnum()
        )
        self.markup.append(f"<{tag}{rendered}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if self._inside is None and tag not in self._DROP:
            self.markup.append(f"</{tag}>")
        elif self._inside == tag:
            self._inside = None

    def handle_endtag(self, tag: str) -> None:
        if self._inside:
            if tag == self._inside:
                self._inside = None
            return
        self.markup.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self._inside == "style":
            self.styles.append(data)
        elif self._inside is None:
            self.markup.append(html.escape(data, quote=False))


_local = threading.local()


def _cleaner() -> bleach.Cleaner:
    cleaner = getattr(_local, "cleaner", None)
    if cleaner is None:
        cleaner = _local.cleaner = _entry_point_cleaner()
    return cleaner


MAX_ENTRY_POINT_CHARS = 200_000


def clean_search_entry_point(fragment: str) -> str:
    """Google's renderedContent made safe: a ``<style>`` with allowlisted CSS followed by the
    allowlisted markup. Idempotent. Still meant for an isolated iframe, not the page."""
    if not isinstance(fragment, str) or not fragment:
        return ""
    out = _clean_entry_point_once(fragment[:MAX_ENTRY_POINT_CHARS])
    # SVG lets markup serialize into something that parses differently the next time
    # ("<svg><p>" leaves the SVG when parsed again). Iterate to a fixed point, so what the
    # browser parses is exactly what was sanitized; give up on input that never settles.
    for _ in range(3):
        again = _clean_entry_point_once(out)
        if again == out:
            return out
        out = again
    return ""


@lru_cache(maxsize=256)
def _clean_entry_point_once(fragment: str) -> str:
    # Cached: the same artifact is shown on every page load, and the fixed-point check above
    # asks for the same string twice.
    splitter = _StyleSplitter()
    try:
        splitter.feed(fragment)
        splitter.close()
    except (AssertionError, ValueError):
        # html.parser gives up on some malformed declarations ("<![>"); show nothing rather
        # than guess.
        return ""
    css = sanitize_stylesheet("\n".join(splitter.styles)) if splitter.styles else ""
    body = _cleaner().clean("".join(splitter.markup))
    return (f"<style>{css}</style>" if css else "") + body


# The iframe's own policy: inline styles only, nothing fetched, no scripts, framed by this site
# only. On the page the document is served with it (django-csp's form); the document also
# carries it as a meta tag (all of an export's ``srcdoc`` has), where frame-ancestors does not
# apply.
ENTRY_POINT_POLICY = {
    "default-src": ["'none'"], "style-src": ["'unsafe-inline'"], "base-uri": ["'none'"],
    "form-action": ["'none'"], "frame-ancestors": ["'self'"],
}
ENTRY_POINT_CSP = "; ".join(f"{name} {' '.join(values)}" for name, values
                            in ENTRY_POINT_POLICY.items() if name != "frame-ancestors")
# For the template: chips must open (Google's requirement) but never run script.
SEARCH_ENTRY_POINT_SANDBOX = "allow-popups allow-popups-to-escape-sandbox"


def search_entry_point_document(fragment: str) -> str:
    """The complete document for the ``<iframe sandbox>`` (served as is, or attribute-escaped
    for ``srcdoc``)."""
    body = clean_search_entry_point(fragment)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{ENTRY_POINT_CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f"</head><body>{body}</body></html>"
    )


def search_entry_point_srcdoc(fragment: str) -> str:
    """The document escaped for a double-quoted ``srcdoc="..."`` attribute value."""
    return html.escape(search_entry_point_document(fragment), quote=True)
