"""The sanitizer policies, on targeted cases and on Google's real renderedContent."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from conversations.rendering.entry_point import (
    clean_search_entry_point,
    sanitize_stylesheet,
    search_entry_point_document,
)
from conversations.rendering.sanitize import clean_html
from conversations.rendering.urls import is_allowed_url
from tests.support import provider_fixture

from .helpers import ENTRY_POINT_ALLOWED, elements, policy_problems


@pytest.mark.parametrize(
    "href",
    [
        "javascript:123",  # bleach's vendored urlparse reads "123" as a port and keeps it
        "vbscript:123",
        "data:123",
        "&#106;avascript:alert(1)",
        "java&#x09;script:alert(1)",
        "javascript\u200b:alert(1)",
        "//evil.example/x",
        "\\\\evil.example/x",
        "/\\evil.example",
        "/relative/path",
        "relative",
    ],
)
def test_refused_links(href: str) -> None:
    out = clean_html(f'<p><a href="{href}">x</a></p>')
    assert "href" not in out


def test_allowed_links_and_rel() -> None:
    out = clean_html(
        '<p><a href="https://a.example/">a</a> <a href="mailto:x@a.example">m</a> '
        '<a class="cite-marker" href="#src-t-1" data-source="1" aria-label="Source 1">[1]</a>'
        '<a href="https://b.example/" rel="opener" target="_self">b</a></p>'
    )
    links = [el.attrib for el in elements(out) if el.tag == "a"]
    assert links[0] == {
        "href": "https://a.example/",
        "rel": "noopener noreferrer nofollow",
        "target": "_blank",
    }
    assert links[1]["href"] == "mailto:x@a.example"
    assert "rel" not in links[2] and "target" not in links[2]
    assert links[3]["rel"] == "noopener noreferrer nofollow" and links[3]["target"] == "_blank"
    assert clean_html(out) == out


@pytest.mark.parametrize(
    ("fragment", "kept"),
    [
        ('<span class="cite evil" data-sources="1">x</span>', '<span data-sources="1">x</span>'),
        ('<span class="cite" data-sources="1 x">x</span>', '<span class="cite">x</span>'),
        ('<code class="language-py">x</code>', '<code class="language-py">x</code>'),
        ('<code class="language-py extra">x</code>', "<code>x</code>"),
        ('<td style="text-align:right">x</td>', "x"),  # a cell needs its table
        ('<p id="x" style="color:red" onclick="alert(1)">x</p>', "<p>x</p>"),
    ],
)
def test_attribute_values_are_a_closed_set(fragment: str, kept: str) -> None:
    assert clean_html(fragment) == kept


def test_stylesheet_policy() -> None:
    css = (
        "@import url(https://evil.example/x.css);"
        "@font-face { src: url(https://evil.example/f.woff) }"
        ".a { color: red; background: url(https://evil.example/t.gif); width: expression(1) }"
        ".b { background: linear-gradient(90deg, #fff 15%, #000 100%) }"
        '.c { font-family: "</style><script>alert(1)</script>" }'
        "@media (prefers-color-scheme: dark) { .d { color: #fff; behavior: url(x.htc) } }"
    )
    assert sanitize_stylesheet(css) == (
        ".a { color: red }\n"
        ".b { background: linear-gradient(90deg, #fff 15%, #000 100%) }\n"
        "@media (prefers-color-scheme: dark) { .d { color: #fff } }"
    )


def _rendered_content() -> str:
    path = provider_fixture("google", "pydantic-ai__test_google_model_web_search_tool.yaml")

    def find(node: Any) -> Any:
        if isinstance(node, dict):
            for key, value in node.items():
                found = value if key == "renderedContent" else find(value)
                if found:
                    return found
        if isinstance(node, list):
            for value in node:
                found = find(value)
                if found:
                    return found
        return None

    content = find(yaml.safe_load(path.read_text()))
    assert isinstance(content, str) and "chip" in content
    return content


def test_google_search_entry_point_survives_sanitizing() -> None:
    raw = _rendered_content()
    out = clean_search_entry_point(raw)
    assert clean_search_entry_point(out) == out
    assert not policy_problems(out, ENTRY_POINT_ALLOWED | {"style": set()})
    # What Google requires shown: the chip, its link, the logo, the light/dark styles.
    [chip] = [el for el in elements(out) if el.tag == "a"]
    assert chip.attrib["class"] == "chip"
    assert chip.attrib["href"].startswith("https://vertexaisearch.cloud.google.com/")
    assert chip.attrib["rel"] == "noopener noreferrer nofollow"
    assert '<div class="container">' in out and "<svg" in out and "<path" in out
    assert "@media (prefers-color-scheme: dark)" in out
    document = search_entry_point_document(raw)
    assert document.startswith("<!DOCTYPE html>") and "default-src 'none'" in document


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://a.example", True),
        ("HTTP://a.example", True),
        ("mailto:a@b.example", True),
        ("#src-1", False),
        ("ftp://a.example", False),
        (" javascript:alert(1)", False),
        ("\x01javascript:alert(1)", False),
    ],
)
def test_is_allowed_url(url: str, allowed: bool) -> None:
    assert is_allowed_url(url) is allowed
    assert is_allowed_url("#src-1", allow_fragment=True)
