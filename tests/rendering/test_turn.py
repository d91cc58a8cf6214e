"""render_turn, the timeline items and the two exports."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from conversations.rendering import (
    render_export,
    render_turn,
    text_fragment,
)
from conversations.rendering.items import (
    ActivityItem,
    ArtifactItem,
    MessageItem,
    ReasoningItem,
    ToolCallItem,
)

from .helpers import (
    DOCUMENT_TAGS,
    ENTRY_POINT_ALLOWED,
    MARKDOWN_ALLOWED,
    cited_texts,
    elements,
    markers,
    policy_problems,
    srcdoc_document,
)

TEXT = "Rain fell all week. The river rose two metres."


def make_turn(**overrides: Any) -> dict[str, Any]:
    turn = {
        "id": "turn-1",
        "index": 0,
        "role": "agent",
        "status": "complete",
        "end_reason": "end_turn",
        "agent": {"agentId": "a1", "model": {"provider": "anthropic", "model": "claude-x"}},
        "events": [
            {"id": "r1", "seq": 1, "kind": "reasoning", "text": "", "redacted": True},
            {"id": "h1", "seq": 2, "kind": "hosted_activity", "activity": {
                "id": "srv_1", "name": "web_search", "state": "started",
                "input": {"query": "river levels"}}},
            {"id": "h2", "seq": 3, "kind": "hosted_activity", "activity": {
                "id": "srv_1", "name": "web_search", "state": "completed",
                "input": {"query": "river levels"}, "summary": "2 results",
                "sources": [{"url": "https://gauges.example/river", "title": "Gauges"},
                            {"url": "https://other.example/", "title": "Other"}]}},
            {"id": "h3", "seq": 4, "kind": "hosted_activity", "activity": {
                "id": "srv_2", "name": "web_fetch", "state": "started",
                "input": {"url": "https://slow.example/"}}},
            {"id": "m1", "seq": 5, "kind": "message", "text": TEXT, "incomplete": False,
             "attributions": [
                 {"source": {"url": "https://gauges.example/river#x", "title": ""},
                  "excerpt": "…the river rose two metres overnight, officials said…",
                  "range": {"start": 20, "end": len(TEXT)}, "incomplete": False}]},
            {"id": "c1", "seq": 6, "kind": "tool_call_request",
             "call": {"id": "call_1", "name": "lookup", "arguments": {"q": "x"}}},
            {"id": "p1", "seq": 7, "kind": "provider_artifact",
             "type": "google.search_entry_point", "summary": "Search suggestions",
             "display_html": '<style>.chip{color:red;background:url(https://t.example/x)}'
                             '</style><a class="chip" href="https://www.google.com/s">river'
                             '</a><script>alert(1)</script>'},
        ],
    }  # fmt: skip
    turn.update(overrides)
    return turn


def test_render_turn_items_in_seq_order() -> None:
    rendered = render_turn(make_turn())
    kinds = [type(item) for item in rendered.items]
    assert kinds == [ReasoningItem, ActivityItem, ActivityItem, MessageItem, ToolCallItem,
                     ArtifactItem]  # fmt: skip
    assert (rendered.provider, rendered.model, rendered.agent_id) == ("anthropic", "claude-x", "a1")


def test_redacted_reasoning() -> None:
    reasoning = render_turn(make_turn()).items[0]
    assert isinstance(reasoning, ReasoningItem)
    assert reasoning.redacted and reasoning.text == ""


def test_activity_grouped_by_id_with_latest_state_and_never_finished() -> None:
    items = [i for i in render_turn(make_turn()).items if isinstance(i, ActivityItem)]
    search, fetch = items
    assert search.event_ids == ("h1", "h2") and search.state == "completed"
    assert not search.never_finished and search.query == "river levels"
    assert [(s.number, s.title) for s in search.sources] == [(1, "Gauges"), (None, "Other")]
    assert fetch.state == "started" and fetch.never_finished and not fetch.running
    streaming = render_turn(make_turn(status="streaming"))
    live = [i for i in streaming.items if isinstance(i, ActivityItem)]
    assert live[1].running and not live[1].never_finished


def test_sources_and_also_consulted() -> None:
    rendered = render_turn(make_turn())
    [source] = rendered.sources
    assert (source.number, source.title, source.domain) == (1, "Gauges", "gauges.example")
    assert source.anchor == "src-turn-1-1"
    # the URL of the first occurrence (the search result, without "#x"); the excerpt's
    # leading/trailing ellipses trimmed; eight words, so used whole
    assert source.href == (
        "https://gauges.example/river#:~:text="
        "the%20river%20rose%20two%20metres%20overnight%2C%20officials%20said"
    )
    assert [s.title for s in rendered.also_consulted] == ["Other"]
    [marker] = markers(rendered.html["m1"])
    assert marker["href"] == "#" + source.anchor


def test_message_html_is_sanitized_html() -> None:
    rendered = render_turn(make_turn())
    html = rendered.html["m1"]
    assert html.__html__() == str(html)
    assert cited_texts(html) == {1: "The river rose two metres."}
    assert not policy_problems(html, MARKDOWN_ALLOWED)


def test_search_entry_point_srcdoc() -> None:
    [artifact] = [i for i in render_turn(make_turn()).items if isinstance(i, ArtifactItem)]
    assert artifact.srcdoc is not None and '"' not in artifact.srcdoc and "<" not in artifact.srcdoc
    document = srcdoc_document(artifact.srcdoc)
    assert "script" not in document and "url(" not in document and "alert" not in document
    assert ".chip { color: red }" in document
    assert "Content-Security-Policy" in document
    allowed = ENTRY_POINT_ALLOWED | {t: {"charset", "http-equiv", "content", "name"}
                                     for t in DOCUMENT_TAGS}  # fmt: skip
    assert not policy_problems(document, allowed, allow_fragment_urls=False)
    [link] = [el for el in elements(document) if el.tag == "a"]
    assert link.attrib["rel"] == "noopener noreferrer nofollow"
    assert "allow-scripts" not in artifact.sandbox


def test_tool_call_arguments_are_plain_json_text() -> None:
    [call] = [i for i in render_turn(make_turn()).items if isinstance(i, ToolCallItem)]
    assert (call.call_id, call.name) == ("call_1", "lookup")
    assert call.arguments == '{\n  "q": "x"\n}'


def test_cached_html_hook() -> None:
    turn = make_turn()
    first = render_turn(turn)
    assert set(first.fresh_html) == {"m1"}
    again = render_turn(turn, cached_html={"m1": "<p>cached</p>"})
    assert again.fresh_html == {} and again.html["m1"] == "<p>cached</p>"


def test_plain_strings_are_not_escaped_but_cleaned() -> None:
    title = '"><img src=x onerror=alert(1)>\u202egnp.exe\u202c\x00\x1b[31m'
    turn = make_turn()
    turn["events"][4]["attributions"][0]["source"]["title"] = title
    turn["events"][2]["activity"]["sources"][0]["title"] = ""
    [source] = render_turn(turn).sources
    assert source.title == '"><img src=x onerror=alert(1)>gnp.exe[31m'


@pytest.mark.parametrize(
    ("excerpt", "directive"),
    [
        ("...a short quote, with commas & dashes - here…",
         "text=a%20short%20quote%2C%20with%20commas%20%26%20dashes%20%2D%20here"),
        ("[...] one two three four five six seven eight nine ten eleven twelve",
         "text=one%20two%20three%20four%20five,eight%20nine%20ten%20eleven%20twelve"),
        ("first part … second part", "text=first%20part,second%20part"),
        ("   ", None),
        ("…", None),
    ],
)  # fmt: skip
def test_text_fragment_encoding(excerpt: str, directive: str | None) -> None:
    assert text_fragment(excerpt) == directive
    if directive:
        # decoding each comma-separated part gives back words of the excerpt
        for part in directive.removeprefix("text=").split(","):
            assert unquote(part) in excerpt


def conversation(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"format": "turnscope.conversation", "version": 1, "projection": "portable",
            "conversation": {"id": "c1", "title": "River [report](javascript:alert(1))",
                             "created_at": "2026-11-29T00:00:00Z", "forked_from": None},
            "turns": list(turns)}  # fmt: skip


def test_markdown_export_has_footnotes_and_literal_titles() -> None:
    user = {"id": "u", "index": 0, "role": "user", "status": "complete", "events": [
        {"id": "um", "seq": 1, "kind": "message", "text": "How high is the river?"}]}  # fmt: skip
    text = render_export(conversation(user, make_turn(index=1)), "markdown")
    assert "exported from Turnscope" in text and "renderer" not in text
    assert "## Turn 2 · Assistant · anthropic / claude-x" in text and "Agent" not in text
    assert "The river rose two metres.[^t2-1]" in text
    assert "[^t2-1]: Source 1: [Gauges](<https://gauges.example/river#:~:text=" in text
    assert "web search “river levels”: completed" in text
    assert "web fetch “https://slow.example/”: never finished" in text
    assert "Reasoning (redacted by the provider)" in text
    # the title stays text: no javascript: link appears when the export is rendered
    tokens = MarkdownIt("commonmark").parse(text)
    hrefs = [
        child.attrs.get("href", "")
        for token in tokens
        for child in token.children or []
        if child.type == "link_open"
    ]
    assert hrefs and all(h.startswith("https://") for h in hrefs)


def test_markdown_export_footnote_after_code_block() -> None:
    text = "Intro.\n\n```\ncode line\n```\n\nAfter."
    turn = make_turn()
    turn["events"][4].update(
        text=text,
        attributions=[
            {"source": {"url": "https://gauges.example/river"}, "range": {"start": 9, "end": 18}}
        ],
    )
    out = render_export(conversation(turn), "markdown")
    assert "```\ncode line\n```\n\n[^t1-1]\n" in out


def test_html_export_is_self_contained() -> None:
    page = render_export(conversation(make_turn()), "html")
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "javascript:" not in page.replace("javascript:alert(1))", "")
    assert 'id="src-turn-1-1"' in page and 'href="#src-turn-1-1"' in page
    assert "Content-Security-Policy" in page
    for el in elements(page):
        for name in ("src", "href"):
            value = el.attrib.get(name, "")
            assert not value or value.startswith(("#", "https://")), value


def _export_of(text: str, *ranges: tuple[int, int]) -> str:
    turn = make_turn()
    turn["events"][4].update(text=text, attributions=[
        {"source": {"url": f"https://s{i}.example/"}, "range": {"start": a, "end": b}}
        for i, (a, b) in enumerate(ranges)])  # fmt: skip
    return render_export(conversation(turn), "markdown")


def _range(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return start, start + len(part)


def test_markdown_export_puts_the_footnote_where_the_page_puts_the_marker() -> None:
    text = "Rain is common. The pull is weakest. Winds vary by season."
    out = _export_of(text, _range(text, "The pull is weakest. "))
    assert "The pull is weakest.[^t1-1] Winds vary by season." in out
    # and the page puts its marker at the same place
    html = render_turn(make_turn(events=[{"id": "m", "seq": 1, "kind": "message", "text": text,
        "attributions": [{"source": {"url": "https://s0.example/"},
                          "range": dict(zip(("start", "end"), _range(text, "The pull is weakest."),
                                            strict=True))}]}]))
    assert 'weakest.</span>\u2060<a class="cite-marker"' in html.html["m"]


@pytest.mark.parametrize(
    ("text", "part", "expected"),
    [
        ("See [the report](https://r.example/a) now.", "See [the rep",
         "See [the report](https://r.example/a)[^t1-1] now."),
        ("Call `compute(x)` daily.", "Call `comp", "Call `compute(x)`[^t1-1] daily."),
        ("The law $E = mc^2$ holds.", "The law $E =", "The law $E = mc^2$[^t1-1] holds."),
        ("The law \\(E = mc^2\\) holds.", "The law \\(E =",
         "The law \\(E = mc^2\\)[^t1-1] holds."),  # math without a dollar
        ("Link <https://a.example/x> here.", "Link <https://a.ex",
         "Link <https://a.example/x>[^t1-1] here."),
        ("| a | b |\n|---|---|\n| wet | dry |", "wet", "| wet[^t1-1] | dry |"),
        ("First item.\n\n- second", "First item.\n\n- ", "First item.[^t1-1]\n\n- second"),
        ("It is **very wet** today.", "It is **very wet", "It is **very wet[^t1-1]** today."),
        ("Wow!", "Wow!", "Wow\\![^t1-1]"),
        ("Run `f`('x') now", "Run `f", "Run `f`[^t1-1] ('x') now"),
    ],
)  # fmt: skip
def test_markdown_export_footnote_never_inside_syntax(text: str, part: str,
                                                      expected: str) -> None:
    assert expected in _export_of(text, _range(text, part))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hi <img src=x onerror=alert(1)> there", "Hi \\<img src=x onerror=alert(1)> there"),
        ("<div>\n<script>alert(1)</script>\n</div>",
         "\\<div>\n\\<script>alert(1)\\</script>\n\\</div>"),
        ("> <iframe src=https://e.example/>", "> \\<iframe src=https://e.example/>"),
        ("Pic ![x](https://t.example/p.png)", "Pic \\![x](https://t.example/p.png)"),
        ("| a |\n|---|\n| <b>x</b> |", "| \\<b>x\\</b> |"),
        ("Math $a <b> c$ too", "Math $a \\<b> c$ too"),
        ("[x](javascript:alert(1)) [y](https://ok.example/) <data:text/html,x>",
         "\\[x](javascript:alert(1)) [y](https://ok.example/) \\<data:text/html,x>"),
        # not HTML, kept as written
        ("Code `<b>` and <https://a.example/> and a < b", "Code `<b>` and <https://a.example/> "
         "and a < b"),
        ("```html\n<script>x</script>\n```", "```html\n<script>x</script>\n```"),
    ],
)  # fmt: skip
def test_markdown_export_makes_raw_html_and_images_text(text: str, expected: str) -> None:
    out = _export_of(text)
    assert expected in out
    # what a viewer with raw HTML on makes of it: no HTML, no image
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    for token in md.parse(out):
        assert token.type != "html_block" or token.content.startswith(("<details", "</details"))
        for child in token.children or []:
            assert child.type not in ("html_inline", "image"), child


def test_provider_labels() -> None:
    redirect = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQE"
    events = [
        {"id": "r1", "seq": 1, "kind": "reasoning", "text": "", "redacted": True},
        {"id": "o1", "seq": 2, "kind": "hosted_activity", "activity": {
            "id": "ws_1", "name": "web_search", "state": "completed",
            "input": {"action": "open_page", "url": "https://a.example/p?utm_source=openai"}}},
        {"id": "r2", "seq": 3, "kind": "reasoning", "text": "", "redacted": True},
        {"id": "f1", "seq": 4, "kind": "hosted_activity", "activity": {
            "id": "ws_2", "name": "web_search", "state": "completed",
            "input": {"action": "find_in_page", "url": "https://a.example/p", "pattern": "tide"}}},
        {"id": "r3", "seq": 5, "kind": "reasoning", "text": "", "redacted": True},
        {"id": "m1", "seq": 6, "kind": "message", "text": "Tides rise.", "attributions": [
            {"source": {"url": redirect, "title": "worldatlas.com"}, "excerpt": "",
             "range": {"start": 0, "end": 11}}]},
        {"id": "r4", "seq": 7, "kind": "reasoning", "text": "", "redacted": True},
        {"id": "p1", "seq": 8, "kind": "provider_artifact", "type": "google.search_entry_point",
         "summary": "", "display_html": "<div>chips</div>"},
    ]  # fmt: skip
    rendered = render_turn(make_turn(events=events))
    reasoning = [i for i in rendered.items if isinstance(i, ReasoningItem)]
    assert [r.count for r in reasoning] == [3, 1]  # three before the message, one after
    opened, found = [i for i in rendered.items if isinstance(i, ActivityItem)]
    assert opened.label == (("Page opened: https://a.example/p", False),) and opened.query is None
    assert found.label == (("Searched the page for: tide (in https://a.example/p)", False),)
    [source] = rendered.sources
    assert (source.label, source.domain, source.redirect) == ("worldatlas.com", "worldatlas.com",
                                                              True)
    [artifact] = [i for i in rendered.items if isinstance(i, ArtifactItem)]
    assert artifact.label == "Google Search suggestions"
    markdown = render_export(conversation(make_turn(events=events)), "markdown")
    assert "redacted by the provider, 3 steps" in markdown
    assert "Page opened: https://a.example/p —" in markdown
    assert "(via a Google redirect link)" in markdown
    assert "> Google Search suggestions" in markdown and "google.search_entry_point" not in markdown


def test_every_registered_event_kind_has_a_renderer():
    """``render_turn`` dispatches through its table of per-kind renderers: a kind a producer
    registers that no renderer shows would be silently left off every page. (Messages render
    in runs, not through the table.)"""
    import streams.builder  # noqa: F401  (registers the kinds the assembler makes)
    from conversations.rendering.turn import RENDERERS
    from streams.registries import EVENT_KINDS

    assert "error" in EVENT_KINDS
    assert set(EVENT_KINDS) - {"message"} <= set(RENDERERS)


def test_an_event_kind_without_a_renderer_is_left_off_the_timeline():
    turn = {"id": "t", "role": "agent", "status": "complete", "events": [
        {"id": "a", "seq": 1, "kind": "from_the_future", "text": "x"},
        {"id": "b", "seq": 2, "kind": ["not", "a", "string"]},
        {"id": "c", "seq": 3, "kind": "error", "error": {"code": "boom", "message": "it broke"}},
    ]}
    [item] = render_turn(turn).items
    assert (item.event_id, item.code, item.message) == ("c", "boom", "it broke")
