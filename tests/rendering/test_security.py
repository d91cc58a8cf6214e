"""Every XSS/sanitizer corpus in ../shared/fixtures/security, through every untrusted field.

Each vector goes into a turn as the assistant's markdown, a citation title, excerpt and URL, a
hosted search's query and sources, and Google's renderedContent. Properties, not strings
(see the corpus README): only allowlisted elements/attributes after parsing with html5lib, no
event handlers, no URL scheme outside http/https/mailto (modern urlsplit after unescaping),
sanitizing twice changes nothing, nh3 with the same policy finds nothing to remove. The
corpora are read in place; nothing is copied into this repository.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.utils import read_fixture_file

from conversations.rendering import (
    clean_html,
    clean_search_entry_point,
    render_export,
    render_turn,
)
from conversations.rendering.items import ActivityItem, ArtifactItem
from tests.support import shared_path

from .helpers import (
    DOCUMENT_TAGS,
    ENTRY_POINT_ALLOWED,
    MARKDOWN_ALLOWED,
    elements,
    nesting_errors,
    nh3_removes_nothing,
    parse,
    policy_problems,
    srcdoc_document,
    url_problem,
)

SECURITY = ("fixtures", "security")


def _json(name: str) -> Any:
    return json.loads(shared_path(*SECURITY, name).read_text(encoding="utf-8"))


def _lines(*parts: str) -> list[str]:
    text = shared_path(*SECURITY, *parts).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def _build(parts: list[dict[str, Any]]) -> str:
    out = []
    for part in parts:
        if "range" in part:
            for i in range(part["range"]):
                out.append("".join(p["s"] * (i if p.get("n") == "i" else p.get("n", 1))
                                   for p in part["parts"]))  # fmt: skip
        else:
            out.append(part["s"] * part.get("n", 1))
    return "".join(out)


def _strings(value: Any, skip: tuple[str, ...] = ("expected",)) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if not key.startswith(skip):
                yield from _strings(item, skip)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, skip)


def dompurify() -> list[str]:
    return [case["payload"] for case in _json("dompurify_3.4.14_expect.json")["cases"]]


def owasp() -> list[str]:
    data = _json("owasp_xss_filter_evasion_vectors.json")
    vectors = []
    for block in data["code_blocks"]:
        vectors.append(block["code"])
        lines = [line for line in block["code"].splitlines() if line.strip()]
        if len(lines) > 1:  # a block may hold several alternative vectors, one per line
            vectors.extend(lines)
    for items in data["inline_lists"].values():
        vectors.extend(items)
    for name in data["event_handler_names"]:
        vectors.append(f'<img src=x {name}="alert(1)"><a href=x {name}=alert(1)>x</a>')
    return vectors


def html5lib_tests() -> list[str]:
    return [case["input"] for case in _json("html5lib_sanitizer_tests1.json")]


def bleach_tests() -> list[str]:
    data = _json("bleach_6.4.0_test_vectors.json")
    vectors = []
    for name, cases in data.items():
        if name == "_meta":
            continue
        for case in cases:
            vectors.extend(_strings(case.get("args", {})))
            if "input" in case:
                vectors.append(case["input"])
    return vectors


def naughty_strings() -> list[str]:
    return _json("blns.json")


def payloads_all_the_things() -> list[str]:
    return _lines("payloadsallthethings", "IntrudersXSS.txt") + _lines(
        "payloadsallthethings", "XSS_Polyglots.txt"
    )


def app_specific() -> list[str]:
    vectors = []
    for vector in _json("app_specific_vectors.json")["vectors"]:
        if vector["field"].startswith("websocket."):
            continue  # not a rendering concern (the live layer tests these)
        payload = vector.get("payload")
        vectors.append(payload if payload is not None else _build(vector["payload_parts"]))
    return vectors


def markdown_it_fixtures() -> list[str]:
    vectors = []
    for name in ("xss.md", "linkify.md", "fatal.md", "proto.md", "normalize.md"):
        path = shared_path(*SECURITY, "markdown-it-py_4.3.0", name)
        vectors.extend(case[1] for case in read_fixture_file(path))
    return vectors


CORPORA = {
    "dompurify": dompurify,
    "owasp": owasp,
    "html5lib": html5lib_tests,
    "bleach": bleach_tests,
    "blns": naughty_strings,
    "payloadsallthethings": payloads_all_the_things,
    "app_specific": app_specific,
    "markdown_it": markdown_it_fixtures,
}


def vector_turn(index: int, vector: str) -> dict[str, Any]:
    """A turn with the vector in every untrusted field."""
    middle = len(vector) // 2
    source = {"url": vector, "title": vector}
    return {
        "id": f"t{index}",
        "index": index,
        "role": "agent",
        "status": "complete",
        "end_reason": "end_turn",
        "agent": {"agentId": vector, "model": {"provider": vector, "model": vector}},
        "events": [
            {"id": "a", "seq": 1, "kind": "hosted_activity", "activity": {
                "id": "s", "name": "web_search", "state": "completed",
                "input": {"query": vector}, "summary": vector,
                "sources": [source, {"url": "https://ok.example/", "title": vector}]}},
            {"id": "m", "seq": 2, "kind": "message", "text": vector, "attributions": [
                {"source": source, "excerpt": vector,
                 "range": {"start": 0, "end": middle}},
                {"source": {"url": "https://ok.example/", "title": vector}, "excerpt": vector,
                 "range": {"start": max(0, middle - 3), "end": len(vector)}},
                {"source": {"url": f"https://ok.example/{index}", "title": vector},
                 "excerpt": vector}]},
            {"id": "r", "seq": 3, "kind": "reasoning", "text": vector},
            {"id": "c", "seq": 4, "kind": "tool_call_request",
             "call": {"id": vector, "name": vector, "arguments": vector}},
            {"id": "p", "seq": 5, "kind": "provider_artifact", "type": vector,
             "summary": vector, "display_html": vector},
        ],
    }  # fmt: skip


_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _bad_characters(value: str) -> bool:
    """Controls or bidi overrides left in a plain display string."""
    return any(unicodedata.category(ch) == "Cc" or ch in _BIDI for ch in value)


ENTRY_POINT_DOCUMENT = ENTRY_POINT_ALLOWED | {
    tag: {"charset", "http-equiv", "content", "name"} for tag in DOCUMENT_TAGS
}


def entry_point_problems(document: str) -> list[str]:
    root = parse(document)
    problems = policy_problems(root, ENTRY_POINT_DOCUMENT, allow_fragment_urls=False)
    for el in elements(root):
        if el.tag == "style":
            css = (el.text or "").lower()
            for needle in ("url(", "@import", "expression", "<", "\\"):
                if needle in css:
                    problems.append(f"{needle!r} in the entry point stylesheet")
        if el.tag == "meta" and el.attrib.get("http-equiv", "").lower() == "refresh":
            problems.append("meta refresh")
    return problems


def check_vector(index: int, vector: str, documents: set[str]) -> list[str]:
    """Problems with one vector's rendering; adds its checked srcdoc document to
    ``documents`` (the export must embed exactly that)."""
    rendered = render_turn(vector_turn(index, vector))
    html = rendered.html["m"]
    root = parse(html)
    problems = policy_problems(root, MARKDOWN_ALLOWED)
    problems += nesting_errors(html)
    if clean_html(html) != html:
        problems.append("clean_html is not idempotent on the output")
    if not nh3_removes_nothing(html, root):
        problems.append("nh3 with the same policy removes something")
    for source in rendered.sources + rendered.also_consulted:
        if source.href and (url_problem(source.href, allow_fragment=False) or
                            not source.href.startswith(("http://", "https://"))):  # fmt: skip
            problems.append(f"source href {source.href!r}")
        for value in (source.title, source.label, source.url, source.domain, *source.excerpts):
            if _bad_characters(value):
                problems.append(f"control/bidi characters in {value!r}")
    for item in rendered.items:
        if isinstance(item, ActivityItem):
            for value in (item.query or "", item.summary, item.name):
                if _bad_characters(value):
                    problems.append(f"control/bidi characters in {value!r}")
        if isinstance(item, ArtifactItem) and item.srcdoc is not None:
            document = srcdoc_document(item.srcdoc)
            problems += entry_point_problems(document)
            documents.add(document)
    once = clean_search_entry_point(vector)
    if clean_search_entry_point(once) != once:
        problems.append("clean_search_entry_point is not idempotent")
    return problems


EXPORT_PAGE = MARKDOWN_ALLOWED | {
    "meta": {"charset", "name", "content", "http-equiv"},
    "title": set(),
    "style": set(),
    "main": set(),
    "header": set(),
    "section": {"class"},
    "div": {"class"},
    "details": {"class"},
    "summary": {"class"},
    "bdi": set(),
    "span": {"class", "data-sources"},
    "li": {"id", "value"},
    "iframe": {"class", "title", "sandbox", "srcdoc"},
}


def export_problems(turns: list[dict[str, Any]], documents: set[str]) -> list[str]:
    doc = {"format": "turnscope.conversation", "version": 1, "projection": "portable",
           "conversation": {"id": "c", "title": turns[0]["events"][1]["text"]},
           "turns": turns}  # fmt: skip
    page = render_export(doc, "html")
    problems = policy_problems(page, EXPORT_PAGE)
    for el in elements(page):
        if el.tag == "iframe":
            if "allow-scripts" in el.attrib.get("sandbox", "") or "sandbox" not in el.attrib:
                problems.append("iframe without a script-free sandbox")
            # html5lib decoded the attribute: it must be a document checked above, intact.
            if el.attrib.get("srcdoc") not in documents:
                problems.append("iframe srcdoc is not the sanitized document")
        if el.tag == "style" and "url(" in (el.text or ""):
            problems.append("url() in the export stylesheet")
    # Markdown export: titles, excerpts, URLs and queries stay text, and the model's own
    # markdown (kept as written) has its raw HTML and images escaped: a viewer that renders
    # HTML (GFM: raw HTML and tables on) finds none.
    markdown = render_export(doc, "markdown")
    viewer = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    for token in viewer.parse(markdown):
        if token.type == "html_block" and token.content.strip() not in (
            "<details><summary>Reasoning</summary>",
            "</details>",
        ):
            problems.append(f"raw HTML in the markdown export: {token.content[:80]!r}")
        for child in token.children or []:
            if child.type == "html_inline":
                problems.append(f"inline HTML in the markdown export: {child.content!r}")
            if child.type == "image":
                problems.append(f"an image in the markdown export: {child.attrs!r}")
            if child.type == "link_open":
                why = url_problem(child.attrs["href"], allow_fragment=False)
                if why:
                    problems.append(f"markdown export link: {why}")
    return problems


# The exports embed the same render_turn output checked vector by vector; in the big corpora
# every third vector also goes through both exports (keeps this file fast).
EXPORT_STRIDE_ABOVE = 100


@pytest.mark.slow
@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_corpus(corpus: str) -> None:
    vectors = list(dict.fromkeys(CORPORA[corpus]()))  # unique, in corpus order
    assert vectors, corpus
    failures = []
    documents: set[str] = set()
    for index, vector in enumerate(vectors):
        problems = check_vector(index, vector, documents)
        if problems:
            failures.append((index, vector[:120], problems[:3]))
    stride = 3 if len(vectors) > EXPORT_STRIDE_ABOVE else 1
    exported = list(enumerate(vectors))[::stride]
    for start in range(0, len(exported), 100):
        batch = [vector_turn(i, v) for i, v in exported[start : start + 100]]
        problems = export_problems(batch, documents)
        if problems:
            failures.append((f"export {start}", "", problems[:3]))
    assert not failures, f"{len(failures)} of {len(vectors)} vectors fail: {failures[:5]}"


# Math, highlighted code, task lists and aligned tables: the same vectors placed inside each
# construct (and so through latex2mathml, Pygments and the new sanitizer allowances).
CONSTRUCTS = ("${}$", "$$\n{}\n$$", "\\({}\\)", "\\[{}\\]", "$\\text{{}}$", "```html\n{}\n```",
              "```js\n{}\n```", "- [x] {}", "| a | b |\n|:-:|--:|\n| {} | x |")  # fmt: skip
CONSTRUCT_VECTORS = 60  # per corpus (evenly spread), times every construct


@pytest.mark.slow
@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_corpus_inside_rich_constructs(corpus: str) -> None:
    vectors = list(dict.fromkeys(CORPORA[corpus]()))
    stride = max(1, len(vectors) // CONSTRUCT_VECTORS)
    failures = []
    documents: set[str] = set()
    for index, vector in enumerate(vectors[::stride]):
        for construct in CONSTRUCTS:
            text = construct.replace("{}", vector.replace("\n", " ") if "|" in construct
                                     else vector)  # fmt: skip
            problems = check_vector(index, text, documents)
            if problems:
                failures.append((construct, vector[:120], problems[:3]))
    assert not failures, f"{len(failures)} fail: {failures[:5]}"
