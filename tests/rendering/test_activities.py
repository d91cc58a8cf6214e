"""The new hosted activities as a reader sees them: labels in plain words, code runs with
their code, output and exit code, images only as checked ``data:`` URLs, refusals and calls cut
mid-arguments — in ``render_turn``, the page fragment and both exports. The portable events
here are hand-written, some hostile: the renderer reads untrusted documents."""

from __future__ import annotations

import re
from typing import Any

import pytest

from conversations.rendering import render_export, render_turn
from conversations.rendering.activities import label_text, safe_image_url
from conversations.rendering.items import ActivityItem, RefusalItem, ToolCallItem
from streams.bodies import MAX_IMAGE_URL_CHARS

PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
       "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def activity(eid: str, seq: int, **fields: Any) -> dict[str, Any]:
    body = {"input": {}, "summary": "", **fields}
    return {"id": eid, "seq": seq, "kind": "hosted_activity", "activity": body}


def turn(*events: dict[str, Any], status: str = "complete",
         end_reason: str = "end_turn") -> dict[str, Any]:
    return {"id": "t1", "index": 0, "role": "agent", "status": status, "end_reason": end_reason,
            "agent": {"agentId": "a", "model": {"provider": "openai", "model": "gpt-x"}},
            "events": list(events)}


def document(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"format": "turnscope.conversation", "version": 1, "projection": "portable",
            "conversation": {"id": "c1", "title": "t", "created_at": None, "forked_from": None},
            "turns": list(turns)}


def activities(t: dict[str, Any]) -> list[ActivityItem]:
    return [i for i in render_turn(t).items if isinstance(i, ActivityItem)]


MCP_FAILED = [
    activity("e1", 1, id="mcp_1", name="mcp_call", state="started", input={
        "server": "google_calendar", "server_description": "Google Calendar",
        "tool": "list_events", "arguments": {"day": "today"}}),
    activity("e2", 2, id="mcp_1", name="mcp_call", state="failed",
             summary="An unknown error occurred.", error_code="500",
             output={"error": "An unknown error occurred."}),
]


def test_an_mcp_call_that_failed() -> None:
    (item,) = activities(turn(*MCP_FAILED))
    assert label_text(item.label) == "MCP call `list_events` on Google Calendar"
    assert item.state_label == "failed: 500"
    assert item.details.error == "An unknown error occurred."
    for fmt in ("markdown", "html"):
        out = render_export(document(turn(*MCP_FAILED)), fmt)
        assert "on Google Calendar — failed: 500" in out
    markdown = render_export(document(turn(*MCP_FAILED)), "markdown")
    assert "> MCP call `list_events` on Google Calendar — failed: 500" in markdown


@pytest.mark.parametrize(("events", "label", "state"), [
    ([activity("e1", 1, id="ig_1", name="image_generation", state="started",
               output={"images": [{"url": PNG, "media_type": "image/png"}]})],
     "Image generation", "never finished"),
    ([activity("e1", 1, id="ts_1", name="tool_search", state="started",
               input={"query": "exchange rate"}),
      activity("e2", 2, id="ts_1", name="tool_search", state="completed", summary="1 tool",
               output={"tools": ["get_exchange_rate"]})],
     "Looked up tools: `get_exchange_rate`", "completed"),
    ([activity("e1", 1, id="ts_2", name="tool_search", state="completed",
               output={"tools": []})], "Looked up tools: none found", "completed"),
    ([activity("e1", 1, id="l_1", name="mcp_list_tools", state="completed",
               input={"server": "deepwiki"}, output={"tools": ["ask_question"]})],
     "Listed MCP tools on deepwiki", "completed"),
    ([activity("e1", 1, id="r_1", name="mcp_approval_request", state="started",
               input={"server": "zip1", "tool": "create_short_url", "arguments": {}})],
     "MCP call `create_short_url` on zip1", "waiting for approval"),
    ([activity("e1", 1, id="a_1", name="advisor", state="completed", summary="4.",
               output={"text": "4.\n\nShip it."})], "Asked the advisor", "completed"),
])
def test_labels_in_the_readers_words(events: list, label: str, state: str) -> None:
    (item,) = activities(turn(*events))
    assert (label_text(item.label), item.state_label) == (label, state)
    line = f"{label} — {state}"
    assert line in render_export(document(turn(*events)), "markdown")


def test_an_activity_still_running_while_the_turn_streams() -> None:
    events = [activity("e1", 1, id="ig_1", name="image_generation", state="started")]
    (item,) = activities(turn(*events, status="streaming"))
    assert item.state_label == "running…" and not item.never_finished


def test_existing_activities_keep_their_own_layout() -> None:
    (item,) = activities(turn(activity("e1", 1, id="s", name="web_search", state="started",
                                       input={"query": "q"})))
    assert item.label == () and item.name == "web_search"


def test_a_code_run_shows_its_code_output_and_exit_code() -> None:
    events = [
        activity("e1", 1, id="c1", name="code_execution", state="started",
                 input={"command": "ls /tmp"}),
        activity("e2", 2, id="c1", name="code_execution", state="completed",
                 summary="exit code 2: ls: cannot access", output={
                     "text": "a.txt\n", "stderr": "ls: cannot access\n", "return_code": 2}),
    ]
    (item,) = activities(turn(*events))
    details = item.details
    assert (details.code, details.code_language) == ("ls /tmp", "shell")
    assert (details.output, details.stderr) == ("a.txt\n", "ls: cannot access\n")
    assert details.return_code is None  # the summary says "exit code 2" already
    markdown = render_export(document(turn(*events)), "markdown")
    assert "```shell\nls /tmp\n```" in markdown and "a.txt" in markdown
    html = render_export(document(turn(*events)), "html")
    assert "<pre><code>ls /tmp</code></pre>" in html and "ls: cannot access" in html
    python = [activity("e1", 1, id="c2", name="code_execution", state="completed",
                       input={"code": "print(1)", "language": "PYTHON"},
                       output={"text": "1\n", "return_code": 0})]
    (run,) = activities(turn(*python))
    assert (run.details.code, run.details.code_language, run.details.return_code) == (
        "print(1)", "python", 0)
    assert "Exit code 0." in render_export(document(turn(*python)), "markdown")


HOSTILE_IMAGES = [
    "javascript:alert(1)",
    "data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+",
    'data:image/png;base64,AAAA" onerror="alert(1)',
    "data:image/png;base64,AAAA<script>",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "https://tracker.example/pixel.png",
    "//tracker.example/pixel.png",
    "data:image/png;base64," + "A" * MAX_IMAGE_URL_CHARS,
    "DATA:image/png;base64,AAAA",
    "data:image/png;charset=utf-8;base64,AAAA",
    " data:image/png;base64,AAAA",
    7,
    None,
]


@pytest.mark.parametrize("url", HOSTILE_IMAGES)
def test_only_checked_data_images_are_ever_shown(url: object) -> None:
    assert safe_image_url(url) is None
    events = [activity("e1", 1, id="x", name="image_generation", state="completed",
                       output={"images": [{"url": url, "media_type": "image/png"},
                                          {"url": PNG, "media_type": "image/png"}]})]
    (item,) = activities(turn(*events))
    assert item.details.images == (PNG,)
    html = render_export(document(turn(*events)), "html")
    sources = re.findall(r'<img src="([^"]*)"', html)
    assert sources == [PNG]
    assert "onerror" not in html and "javascript:" not in html and "tracker" not in html
    # The Markdown export names images, never embeds them (no policy allows data: there).
    markdown = render_export(document(turn(*events)), "markdown")
    assert "data:" not in markdown and "An image, image/png" in markdown


def test_the_html_exports_policy_allows_data_images_and_nothing_else_outside() -> None:
    html = render_export(document(turn(*MCP_FAILED)), "html")
    (policy,) = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["img-src"] == "data:" and directives["default-src"] == "'none'"


def test_a_refusal_and_a_call_cut_mid_arguments() -> None:
    events = [
        {"id": "e1", "seq": 1, "kind": "refusal", "refusal": {
            "category": "reasoning_extraction", "explanation": "Blocked.\u202eevil"}},
        {"id": "e2", "seq": 2, "kind": "tool_call_request", "call": {
            "id": "c", "name": "getWeather", "arguments": {"location": "Bos"},
            "incomplete": True}},
    ]
    items = render_turn(turn(*events, end_reason="refusal")).items
    refusal = next(i for i in items if isinstance(i, RefusalItem))
    assert (refusal.category, refusal.explanation) == ("reasoning_extraction", "Blocked.evil")
    call = next(i for i in items if isinstance(i, ToolCallItem))
    assert call.incomplete
    markdown = render_export(document(turn(*events, end_reason="refusal")), "markdown")
    assert "**Refused by the provider** (reasoning\\_extraction)" in markdown
    assert "Tool call `getWeather` (cut off while its arguments arrived):" in markdown
    html = render_export(document(turn(*events, end_reason="refusal")), "html")
    assert "Refused by the provider (reasoning_extraction)" in html
