"""The markdown sanitizer policy: every HTML string the markdown renderer emits passes here.

``clean_html`` keeps what the renderer emits (raw HTML is off, so this is a second wall, not
the first) plus the citation spans and markers: the highlighter's token classes, MathML (the
elements and plain-token attribute values ``markdown.math`` writes), disabled task checkboxes,
table alignment classes. Links: http, https and mailto only (see
``urls``); relative and protocol-relative URLs are refused; external links open in a new tab
with ``rel="noopener noreferrer nofollow"``. The search entry point has its own, stricter
policy (``entry_point``).

The Cleaner is not thread-safe (the parser keeps state), so each thread gets its own. Callers
run rendering in a worker thread (``sync_to_async``), never on the event loop.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import bleach
from bleach.css_sanitizer import CSSSanitizer

if TYPE_CHECKING:  # the stubs type bleach's vendored html5lib as html5lib itself
    from html5lib.filters.base import Filter
else:
    from bleach.html5lib_shim import Filter

from .markup import HIGHLIGHT_CLASSES, MATHML_ATTRIBUTES, MATHML_TAGS, MATHML_VALUE
from .urls import ALLOWED_SCHEMES, browser_url, is_allowed_url

EXTERNAL_REL = "noopener noreferrer nofollow"

MARKDOWN_TAGS = frozenset(
    {
        "p",
        "br",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "ul",
        "ol",
        "li",
        "pre",
        "code",
        "em",
        "strong",
        "s",
        "a",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "span",
        "div",  # display math (``markdown.math``)
        "input",  # task list checkboxes, disabled (``markdown.blocks``)
    }
) | MATHML_TAGS

# tag -> attributes; the values are checked further by _markdown_attribute.
MARKDOWN_ATTRIBUTES: dict[str, frozenset[str]] = {
    "a": frozenset({"href", "title", "class", "data-source", "aria-label", "rel", "target"}),
    "span": frozenset({"class", "data-sources"}),
    "code": frozenset({"class"}),
    "th": frozenset({"class"}),
    "td": frozenset({"class"}),
    "p": frozenset({"class"}),
    "pre": frozenset({"class"}),
    "div": frozenset({"class"}),
    "ul": frozenset({"class"}),
    "ol": frozenset({"start", "class"}),
    "li": frozenset({"class"}),
    "input": frozenset({"type", "class", "disabled", "checked", "aria-label"}),
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}

# Classes are a closed set: an attacker-chosen class could pick up page styles.
MARKDOWN_CLASSES: dict[str, frozenset[str]] = {
    "span": frozenset({"cite"}) | HIGHLIGHT_CLASSES,
    "a": frozenset({"cite-marker", "cite-incomplete", "cite-repaired"}),
    "p": frozenset({"render-note"}),
    "pre": frozenset({"render-plain"}),
    "div": frozenset({"math-display"}),
    "th": frozenset({"align-left", "align-center", "align-right"}),
    "td": frozenset({"align-left", "align-center", "align-right"}),
    "ul": frozenset({"contains-task-list"}),
    "ol": frozenset({"contains-task-list"}),
    "li": frozenset({"task-list-item"}),
    "input": frozenset({"task-list-item-checkbox"}),
}
# Exact attribute values where only one is ever emitted.
_FIXED_VALUES: dict[tuple[str, str], frozenset[str]] = {
    ("input", "type"): frozenset({"checkbox"}),
    ("input", "disabled"): frozenset({"", "disabled"}),
    ("input", "checked"): frozenset({"", "checked"}),
    ("input", "aria-label"): frozenset({"Task"}),
    ("math", "display"): frozenset({"inline", "block"}),
}
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")
_SOURCE_NUMBERS = re.compile(r"[1-9][0-9]{0,5}(?: [1-9][0-9]{0,5})*")
_SOURCE_NUMBER = re.compile(r"[1-9][0-9]{0,5}")


def _class_allowed(tag: str, value: str) -> bool:
    names = value.split()
    if not names:
        return False
    if tag == "code":
        return len(names) == 1 and (
            names[0] == "math-tex" or _LANGUAGE_CLASS.fullmatch(names[0]) is not None
        )
    allowed = MARKDOWN_CLASSES.get(tag, frozenset())
    return all(name in allowed for name in names)


def _markdown_attribute(tag: str, name: str, value: str) -> bool:
    if name not in MARKDOWN_ATTRIBUTES.get(tag, ()):
        return False
    fixed = _FIXED_VALUES.get((tag, name))
    if fixed is not None:
        return value in fixed
    if tag in MATHML_TAGS:
        return MATHML_VALUE.fullmatch(value) is not None
    if name == "href":
        # bleach hands us the raw attribute text (entities not decoded); a browser decodes.
        return is_allowed_url(html.unescape(value), allow_fragment=True)
    if name == "class":
        return _class_allowed(tag, value)
    if name == "data-sources":
        return _SOURCE_NUMBERS.fullmatch(value) is not None
    if name == "data-source":
        return _SOURCE_NUMBER.fullmatch(value) is not None
    if name == "start":
        return value.isascii() and value.isdigit() and len(value) <= 9
    if name in ("title", "aria-label"):
        return len(value) <= 2000
    return True  # rel, target: ExternalLinks rewrites them anyway


class ExternalLinks(Filter):
    """Forces rel/target on external links and removes them from in-page ones.

    Runs after bleach's sanitizer, so it only sees allowed links. Rewriting (not appending)
    keeps ``clean_html`` idempotent.
    """

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for token in Filter.__iter__(self):
            if token["type"] in ("StartTag", "EmptyTag") and token["name"] == "a":
                attrs = token["data"]
                attrs.pop((None, "rel"), None)
                attrs.pop((None, "target"), None)
                href = attrs.get((None, "href"))
                if href is not None and not browser_url(html.unescape(href)).startswith("#"):
                    attrs[(None, "rel")] = EXTERNAL_REL
                    attrs[(None, "target")] = "_blank"
            yield token


def _markdown_cleaner() -> bleach.Cleaner:
    return bleach.Cleaner(
        tags=MARKDOWN_TAGS,
        attributes=_markdown_attribute,
        protocols=ALLOWED_SCHEMES,
        strip=False,  # anything unexpected shows up escaped, not silently dropped
        strip_comments=True,
        filters=[ExternalLinks],
        # No style attribute is allowed at all (the CSP would not apply one anyway).
        css_sanitizer=CSSSanitizer(allowed_css_properties=frozenset()),
    )


_local = threading.local()


def clean_html(fragment: str) -> str:
    """Sanitize renderer output (markdown HTML with citation spans/markers). Idempotent."""
    if not fragment:
        return ""
    cleaner: bleach.Cleaner | None = getattr(_local, "cleaner", None)
    if cleaner is None:
        cleaner = _local.cleaner = _markdown_cleaner()
    return cleaner.clean(fragment)
