"""Consecutive message events render as one markdown document (a provider splits one answer
into many blocks, e.g. Anthropic sends every cited passage as its own text block)."""

import html5lib

from conversations.rendering import render_turn
from conversations.rendering.runs import run_key


def event(seq, text, *cites, kind="message"):
    return {"id": f"e{seq}", "seq": seq, "kind": kind, "text": text, "incomplete": False,
            "attributions": [{"source": {"url": url, "title": url}, "excerpt": "",
                              "incomplete": False} for url in cites]}


def turn(*events):
    return {"id": "t1", "index": 0, "role": "agent", "status": "complete",
            "end_reason": "end_turn", "events": list(events)}


def test_a_list_split_across_cited_blocks_is_one_list():
    rendered = render_turn(turn(
        event(1, "Highlights:\n\n- "),
        event(2, "Tides are caused by the Moon.", "https://a.example/"),
        event(3, "\n- "),
        event(4, "The Sun adds a smaller pull.", "https://b.example/"),
        event(5, "\n\nThat is all."),
    ))
    [item] = [i for i in rendered.items if i.type == "message"]
    assert item.event_ids == ("e1", "e2", "e3", "e4", "e5")
    doc = html5lib.parse(str(item.html), namespaceHTMLElements=False)
    lists = doc.findall(".//ul")
    assert len(lists) == 1 and len(lists[0].findall("li")) == 2
    first, second = lists[0].findall("li")
    span = first.find(".//span[@data-sources]")
    assert "".join(span.itertext()) == "Tides are caused by the Moon."
    assert second.find(".//span[@data-sources]").get("data-sources") == "2"
    assert [s.number for s in rendered.sources] == [1, 2]


def test_runs_break_at_other_events_and_are_keyed_by_first_event_and_length():
    activity = {"id": "a1", "seq": 3, "kind": "hosted_activity", "activity": {
        "id": "srv", "name": "web_search", "state": "completed", "input": {"query": "q"},
        "summary": "", "sources": [], "error_code": ""}}
    rendered = render_turn(turn(event(1, "One "), event(2, "two."), activity, event(4, "Three.")))
    messages = [i for i in rendered.items if i.type == "message"]
    assert [m.event_ids for m in messages] == [("e1", "e2"), ("e4",)]
    assert set(rendered.html) == {run_key(("e1", "e2")), "e4"} == {"e1+2", "e4"}
    cached = render_turn(turn(event(1, "One "), event(2, "two."), activity, event(4, "Three.")),
                         cached_html={"e1+2": "<p>cached</p>"})
    assert cached.fresh_html.keys() == {"e4"} and cached.html["e1+2"] == "<p>cached</p>"


def test_markdown_export_keeps_every_block_of_a_run():
    from conversations.rendering import render_export

    doc = {"format": "turnscope.conversation", "version": 1, "projection": "portable",
           "conversation": {"id": "c1", "title": "t", "created_at": None, "forked_from": None},
           "turns": [turn(
               event(1, "Highlights:\n\n- "),
               event(2, "Tides are caused by the Moon.", "https://a.example/"),
               event(3, "\n- "),
               event(4, "The Sun adds a smaller pull.", "https://b.example/"),
           )]}
    markdown = render_export(doc, "markdown")
    expected = ("Highlights:", "- Tides are caused by the Moon.[^", "The Sun adds a smaller pull.")
    for text in expected:
        assert text in markdown
    html = render_export(doc, "html")
    assert "Tides are caused by the Moon." in html and "The Sun adds a smaller pull." in html
