"""Checks on rendered HTML, written independently of the sanitizer they check.

The allowlists below restate the policy on purpose instead of importing it: a change to the
policy module that widens it must also change this file.
"""

from __future__ import annotations

import html as htmllib
from collections import defaultdict
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import html5lib
import nh3

MARKDOWN_ALLOWED: dict[str, set[str]] = {
    "p": {"class"},
    "br": set(),
    "hr": set(),
    **{f"h{i}": set() for i in range(1, 7)},
    "blockquote": set(),
    "ul": {"class"},
    "ol": {"start", "class"},
    "li": {"class"},
    "pre": {"class"},
    "code": {"class"},
    "em": set(),
    "strong": set(),
    "s": set(),
    "a": {"href", "title", "class", "data-source", "aria-label", "rel", "target"},
    "table": set(),
    "thead": set(),
    "tbody": set(),
    "tr": set(),
    "th": {"class"},
    "td": {"class"},
    "span": {"class", "data-sources"},
    "div": {"class"},
    "input": {"type", "class", "disabled", "checked", "aria-label"},
}
# MathML as latex2mathml builds it (restated, not imported: see the module docstring).
MATHML_ALLOWED_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac",
    "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mstyle",
    "mpadded", "mphantom", "menclose",
}  # fmt: skip
MATHML_ALLOWED_ATTRIBUTES = {
    "display", "mathvariant", "mathsize", "mathcolor", "mathbackground", "stretchy", "fence",
    "separator", "form", "largeop", "lspace", "rspace", "width", "height", "depth", "voffset",
    "minsize", "maxsize", "movablelimits", "accent", "accentunder", "linethickness", "notation",
    "displaystyle", "scriptlevel", "columnspacing", "rowspacing", "columnalign", "columnlines",
    "rowlines", "linebreak",
}  # fmt: skip
MARKDOWN_ALLOWED.update({tag: MATHML_ALLOWED_ATTRIBUTES for tag in MATHML_ALLOWED_TAGS})

_COMMON = {"class", "style", "role", "title", "aria-label", "aria-hidden"}
ENTRY_POINT_ALLOWED: dict[str, set[str]] = {
    tag: _COMMON for tag in ("div", "span", "p", "br", "b", "i", "em", "strong")
}
_SHAPE = _COMMON | {"fill", "fill-rule", "clip-rule", "stroke", "stroke-width", "opacity",
                    "transform"}  # fmt: skip
ENTRY_POINT_ALLOWED.update(
    {
        "a": _COMMON | {"href", "rel", "target"},
        "svg": _SHAPE | {"width", "height", "viewBox"},
        "g": _SHAPE,
        "path": _SHAPE | {"d"},
        "circle": _SHAPE | {"cx", "cy", "r"},
        "ellipse": _SHAPE | {"cx", "cy", "rx", "ry"},
        "rect": _SHAPE | {"x", "y", "width", "height", "rx", "ry"},
        "line": _SHAPE | {"x1", "y1", "x2", "y2"},
        "polyline": _SHAPE | {"points"},
        "polygon": _SHAPE | {"points"},
    }
)
DOCUMENT_TAGS = {"html", "head", "body", "meta", "style", "title"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "srcset", "poster",
                  "background", "data", "codebase", "cite", "ping"}  # fmt: skip
SCHEMES = {"http", "https", "mailto"}


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def parse(fragment: str) -> Any:
    """An HTML fragment parsed the way a browser would (html5lib, etree)."""
    return html5lib.parseFragment(fragment, treebuilder="etree", namespaceHTMLElements=False)


def elements(fragment: str | Any) -> list[Any]:
    """Every element of an HTML fragment (a string, or the result of ``parse``)."""
    root = parse(fragment) if isinstance(fragment, str) else fragment
    return [el for el in root.iter() if isinstance(el.tag, str)][1:]


def url_problem(value: str, *, allow_fragment: bool) -> str | None:
    """Why an attribute URL is not acceptable, or None. ``value`` is already entity-decoded
    (html5lib decodes attributes); strip what a browser strips and parse with the modern
    urllib."""
    url = value.strip("".join(chr(c) for c in range(0x21)))
    url = url.replace("\t", "").replace("\n", "").replace("\r", "")
    if url.startswith("#"):
        return None if allow_fragment else f"fragment URL {value!r}"
    if url[:2].replace("\\", "/") == "//":
        return f"protocol-relative URL {value!r}"
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return f"unparseable URL {value!r}"
    if scheme not in SCHEMES:
        return f"URL scheme {scheme!r} in {value!r}"
    return None


def policy_problems(
    fragment: str | Any, allowed: dict[str, set[str]], *, allow_fragment_urls: bool = True
) -> list[str]:
    """Elements/attributes outside ``allowed``, event handlers, and bad URL schemes."""
    problems = []
    for el in elements(fragment):
        tag = _local(el.tag)
        if tag not in allowed:
            problems.append(f"element <{tag}>")
            continue
        for raw_name, value in el.attrib.items():
            name = _local(raw_name)
            if name.lower().startswith("on"):
                problems.append(f"event handler {name} on <{tag}>")
            if name not in allowed[tag] and name.lower() not in allowed[tag]:
                problems.append(f"attribute {name} on <{tag}>")
            if name.lower() in URL_ATTRIBUTES or raw_name.endswith("}href"):
                why = url_problem(value, allow_fragment=allow_fragment_urls)
                if why:
                    problems.append(why)
            if "url(" in value.lower().replace(" ", "") and name == "style":
                problems.append(f"url() in style on <{tag}>")
    return problems


def canonical(fragment: str | Any) -> list[tuple[Any, ...]]:
    """A parse-level fingerprint: elements with their attributes, and the text between."""
    out: list[tuple[Any, ...]] = []

    def walk(el: Any) -> None:
        if isinstance(el.tag, str):
            out.append(("start", _local(el.tag), tuple(sorted(el.attrib.items()))))
        if el.text:
            out.append(("text", el.text))
        for child in el:
            walk(child)
            if child.tail:
                out.append(("text", child.tail))
        if isinstance(el.tag, str):
            out.append(("end", _local(el.tag)))

    walk(parse(fragment) if isinstance(fragment, str) else fragment)
    # Merge adjacent text nodes (comments split them).
    merged: list[tuple[Any, ...]] = []
    for item in out:
        if item[0] == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + item[1])
        else:
            merged.append(item)
    return merged


def nh3_removes_nothing(fragment: str, parsed: Any = None) -> bool:
    """nh3 (ammonia), configured with our markdown policy, leaves the fragment unchanged."""
    cleaned = nh3.clean(
        fragment,
        tags=set(MARKDOWN_ALLOWED),
        attributes={tag: set(attrs) for tag, attrs in MARKDOWN_ALLOWED.items() if attrs},
        url_schemes=SCHEMES,
        link_rel=None,
        strip_comments=True,
    )
    if cleaned == fragment:
        return True
    return canonical(cleaned) == canonical(parsed if parsed is not None else fragment)


class _Balance(HTMLParser):
    VOID = {"br", "hr", "img", "meta", "input", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def nesting_errors(fragment: str) -> list[str]:
    """Well-formedness as written (not as repaired by a browser): every end tag closes the
    innermost open element and nothing is left open."""
    checker = _Balance()
    checker.feed(fragment)
    checker.close()
    return checker.errors + [f"<{tag}> left open" for tag in checker.stack]


def is_marker(el: Any) -> bool:
    return _local(el.tag) == "a" and "cite-marker" in el.attrib.get("class", "").split()


def text_without_markers(fragment: str) -> str:
    root = html5lib.parseFragment(fragment, treebuilder="etree", namespaceHTMLElements=False)
    parts: list[str] = []

    def walk(el: Any) -> None:
        if el.text:
            parts.append(el.text)
        for child in el:
            if not is_marker(child):
                walk(child)
            elif parts and parts[-1].endswith("\u2060"):
                parts[-1] = parts[-1][:-1]  # the word joiner the marker brings with it
            if child.tail:
                parts.append(child.tail)

    walk(root)
    return "".join(parts)


def cited_texts(fragment: str) -> dict[int, str]:
    """For each source number: the concatenated text of every span that lists it."""
    root = html5lib.parseFragment(fragment, treebuilder="etree", namespaceHTMLElements=False)
    found: dict[int, list[str]] = defaultdict(list)

    def text_of(el: Any) -> str:
        parts = [el.text or ""]
        for child in el:
            if not is_marker(child):
                parts.append(text_of(child))
            parts.append(child.tail or "")
        return "".join(parts)

    for el in root.iter():
        if isinstance(el.tag, str) and _local(el.tag) == "span" and "data-sources" in el.attrib:
            for number in el.attrib["data-sources"].split():
                found[int(number)].append(text_of(el))
    return {n: "".join(parts) for n, parts in found.items()}


def markers(fragment: str) -> list[dict[str, str]]:
    return [dict(el.attrib) | {"text": el.text or ""} for el in elements(fragment) if is_marker(el)]


def srcdoc_document(escaped: str) -> str:
    """The document inside an already attribute-escaped srcdoc value."""
    return htmllib.unescape(escaped)
