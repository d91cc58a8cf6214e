"""The ChatGPT importer against the facts the chat-exports README gives for each fixture, and the
hand-written sample for what the fixtures do not show. Everything runs through the one stream
runner (``streams.run.assemble``), as an import does; no database."""

from __future__ import annotations

import re
from collections import Counter

import orjson
import pytest

from importers import chatgpt, markers
from importers.base import ImportedConversation, Problem
from streams import run
from tests.importers.samples import chatgpt_tools
from tests.support import shared_path


def fixture(name: str) -> list:
    return orjson.loads(shared_path("fixtures", "chat-exports", name).read_bytes())


def read(name: str) -> list:
    path = shared_path("fixtures", "chat-exports", name)
    with path.open("rb") as stream:
        return list(chatgpt.read(stream, name))


def events(turn) -> tuple:
    builder, records = run.assemble([(r.name, r.parts) for r in turn.responses])
    return builder, records


def current_branch(conversation: dict) -> list[dict]:
    """The messages from the root to current_node, walked independently of the importer."""
    mapping, node, out = conversation["mapping"], conversation["current_node"], []
    while node:
        if mapping[node]["message"]:
            out.append(mapping[node]["message"])
        node = mapping[node]["parent"]
    return out[::-1]


def shown(message: dict) -> bool:
    """What the README says is not shown: hidden, system, empty placeholders, custom
    instructions (tool messages become activities, never messages)."""
    meta = message["metadata"]
    if meta.get("is_visually_hidden_from_conversation") or message["author"]["role"] == "system":
        return False
    if message.get("recipient", "all") != "all":
        return False  # a call to a tool: a hosted activity
    parts = message["content"].get("parts") or [message["content"].get("text", "")]
    return any(isinstance(p, str) and p.strip() for p in parts)


# -- librechat__chatgpt-export.json ---------------------------------------------------------------


def test_export_fixture_facts():
    raw = fixture("librechat__chatgpt-export.json")
    assert [len(current_branch(c)) for c in raw] == [16, 5]  # the README's counts
    items = read("librechat__chatgpt-export.json")
    assert all(isinstance(i, ImportedConversation) for i in items) and len(items) == 2
    first, second = items
    assert first.title == "Conversation 1. Web Search" and first.forks == []
    # 3 user questions and 3 answers: 6 turns; the tools live inside the agent turns.
    assert [t.role for t in first.turns] == ["user", "agent"] * 3
    assert [t.role for t in second.turns] == ["user", "agent"] * 2
    kinds, activities, citations = Counter(), [], []
    for turn in first.turns:
        builder, records = events(turn)
        kinds.update(r.kind for r in records)
        activities += [r.body.to_body()["activity"] for r in records if r.kind == "hosted_activity"]
        citations += [(r, a) for r in records for a in r.attributions]
        if turn.role == "agent":
            assert (builder.provider, builder.model) == ("openai", "gpt-4")
    # 4 calls (search twice, mclick twice), each started and completed; never a tool call.
    assert kinds["tool_call_request"] == 0
    assert [(a["name"], a["state"]) for a in activities] == [
        ("web_search", "started"), ("web_search", "completed"),
        ("web_fetch", "started"), ("web_fetch", "completed")] * 2
    assert activities[0]["input"] == {"query": "Volkswagen Transporter fuel consumption with 8 "
                                               "people l/km"}
    # The first mclick([0, 3, 7]) yielded two quote messages: two pages, one activity.
    assert activities[3]["summary"] == "2 pages" and len(activities[3]["sources"]) == 2
    assert len(citations) == 4  # 2 + 1 + 1
    for record, attribution in citations:
        assert "【" not in record.text and "†" not in record.text
        cited = record.text[attribution.start:attribution.end]
        assert cited and not cited[0].isspace() and not cited[-1].isspace()
    _, answer = events(second.turns[1])
    model = events(second.turns[1])[0].model
    assert model == "text-davinci-002-render-sha" and answer[0].attributions == []


def test_export_offsets_count_code_points():
    """How the 2023-24 export counts offsets: in characters (code points) — every
    ``text[start_ix:end_ix]`` in Python is exactly a marker, although the text has non-ASCII
    characters before them (as UTF-8 bytes the same offsets would not land on a marker)."""
    raw = fixture("librechat__chatgpt-export.json") + fixture("librechat__chatgpt-citations.json")
    checked = 0
    for conversation in raw:
        for node in conversation["mapping"].values():
            message = node.get("message") or {}
            text = "".join(p for p in (message.get("content") or {}).get("parts") or ()
                           if isinstance(p, str))
            for cite in (message.get("metadata") or {}).get("citations") or ():
                start, end = cite["start_ix"], cite["end_ix"]
                assert markers.TETHER_MARKER.fullmatch(text[start:end])
                before = text[:start]
                if not before.isascii():
                    as_bytes = text.encode()[start:end].decode(errors="replace")
                    assert not markers.TETHER_MARKER.fullmatch(as_bytes)
                checked += 1
    assert checked == 8


def test_export_ranges_address_the_sentence_each_marker_ends():
    [first, _] = read("librechat__chatgpt-export.json")
    _, records = events(first.turns[3])
    [answer] = [r for r in records if r.kind == "message"]
    [attribution] = answer.attributions
    assert answer.text[attribution.start:attribution.end] == (
        "The actual consumption might be higher when carrying eight people due to the "
        "additional weight")
    assert attribution.url.startswith("https://www.carsales.com.au/")
    assert answer.text.endswith("due to the additional weight.")  # the marker went, the stop


# -- librechat__chatgpt-citations.json: the broken tree -------------------------------------------


def test_broken_tree_is_imported_as_orphans_and_said_so():
    raw = fixture("librechat__chatgpt-citations.json")[0]
    assert raw["current_node"] not in raw["mapping"]  # 0 reachable from current_node
    [item] = read("librechat__chatgpt-citations.json")
    assert isinstance(item, ImportedConversation)
    assert any("orphans" in note for note in item.notes)
    [turn] = item.turns  # the tool message and the answer: one agent turn
    builder, records = events(turn)
    assert builder.model == "gpt-4"
    search = [r.body.to_body()["activity"] for r in records if r.kind == "hosted_activity"]
    # The call is outside the export: the search is started from what the result says.
    assert search[0]["input"] == {"query": "Signal Sciences organization"}
    assert search[-1]["state"] == "completed" and len(search[-1]["sources"]) == 20
    [answer] = [r for r in records if r.kind == "message"]
    assert len(answer.attributions) == 4
    # The two-number markers 【3:0†source】 are gone, raw † and 【 before them or not.
    assert not re.search(r"【\d+:\d+†", answer.text)
    spans = {answer.text[a.start:a.end] for a in answer.attributions}
    assert all(s.endswith(("hybrid environments", "businesses operating online")) for s in spans)


# -- librechat__chatgpt-tree.json: branches as forks ----------------------------------------------


def test_tree_branches_become_forks_at_the_turn_they_diverge():
    raw = fixture("librechat__chatgpt-tree.json")[0]
    assert len(raw["mapping"]) == 13 and len(current_branch(raw)) == 7
    branch_points = [n for n in raw["mapping"].values() if len(n["children"]) > 1]
    leaves = [n for n in raw["mapping"].values() if not n["children"]]
    assert (len(branch_points), len(leaves)) == (2, 3)
    [item] = read("librechat__chatgpt-tree.json")
    user_texts = [events(t)[1][0].text for t in item.turns if t.role == "user"]
    assert user_texts == ["hi there", "hi again", "tell me a joke"]
    assert len(item.turns) == 6  # 7 on the branch less the hidden system message
    forks = {f.key: f for f in item.forks}
    assert len(forks) == 2  # 3 leaves, one of them the current one
    edited = forks["ada93f81-f59e-4b31-933d-1357efd68bfc"]
    # The follow-up question was edited after the first answer (turn 1).
    assert edited.at_turn == 1
    assert [events(t)[1][0].text for t in edited.turns if t.role == "user"] == [
        "so cool bro", "tell me a story"]
    builder, records = events(edited.turns[-1])  # the abandoned, interrupted answer
    assert builder.outcome.status == "interrupted" and records[-1].incomplete
    regenerated = forks["d0d2a7df-d2fc-4df9-bf0a-1c5121e227ae"]
    # The answer was regenerated after the last question (turn 4); both answers have the same
    # text, and stay two: nodes are told apart by id, never by text.
    assert regenerated.at_turn == 4 and len(regenerated.turns) == 1
    assert events(regenerated.turns[0])[1][0].text == events(item.turns[5])[1][0].text


# -- librechat__chatgpt-modern-export.json ------------------------------------------------------


def test_modern_export_skips_the_corrupted_entry_and_reads_on():
    items = read("librechat__chatgpt-modern-export.json")
    assert [type(i).__name__ for i in items] == ["ImportedConversation", "Problem",
                                                 "ImportedConversation"]
    deploy, problem, pasta = items
    assert "Corrupted entry" in problem.message and problem.line is not None
    # 5 on the branch: custom instructions (hidden) + 2 user + 2 assistant.
    assert [t.role for t in deploy.turns] == ["user", "agent", "user", "agent"]
    models = [events(t)[0].model for t in deploy.turns if t.role == "agent"]
    # Only the last assistant names a model; default_model_slug (gpt-5-thinking) is never
    # taken for it.
    assert models == ["", "o4-mini"]
    assert events(deploy.turns[1])[0].provider == ""
    assert [t.role for t in pasta.turns] == ["user", "agent"]
    assert events(pasta.turns[1])[0].model == ""


# -- enchanted-twin__conversations.json ---------------------------------------------------------


def test_enchanted_twin_facts():
    raw = fixture("enchanted-twin__conversations.json")
    assert [len(current_branch(c)) for c in raw] == [4, 6, 4, 8]
    items = read("enchanted-twin__conversations.json")
    strategic, _mice, tee, temperature = items
    # The reasoning summary arrives as a tool message: it is reasoning, not a tool call.
    builder, records = events(strategic.turns[1])
    assert [r.kind for r in records] == ["reasoning", "message"]
    assert records[0].text.startswith("**Designing agent system**")
    assert builder.model == "o3-mini"
    assert [len(c.forks) for c in items] == [0, 0, 0, 1]  # 1 branch point, the A/B choice
    assert temperature.forks[0].at_turn == 4  # after "do llm use random number generators"
    for conversation, expected in zip(items, (4, 6, 4, 8), strict=True):
        visible = sum(shown(m) for m in current_branch(raw[items.index(conversation)])
                      if m["author"]["role"] != "tool")
        messages = sum(r.kind == "message" for t in conversation.turns for r in events(t)[1])
        assert messages == visible, (conversation.title, expected)
    assert [events(t)[0].model for t in tee.turns if t.role == "agent"] == ["gpt-4o"]


def test_2025_web_search_results_ride_on_the_answer_and_markers_go():
    raw = fixture("enchanted-twin__conversations.json")[1]
    answer_node = raw["mapping"][raw["current_node"]]["message"]
    text = answer_node["content"]["parts"][0]
    refs = answer_node["metadata"]["content_references"]
    # How the 2025 export counts offsets: code points. 2,004 of them, 2,086 UTF-8 bytes, and
    # every non-empty span equals its matched_text when sliced as a Python str.
    assert (len(text), len(text.encode())) == (2004, 2086)
    assert len(refs) == 29 and Counter(r["type"] for r in refs)["grouped_webpages"] == 4
    assert len(answer_node["metadata"]["citations"]) == 29
    assert len(answer_node["metadata"]["search_result_groups"]) == 7
    spans = [r for r in refs if r["end_idx"] > r["start_idx"]]
    assert len(spans) == 28
    assert all(text[r["start_idx"]:r["end_idx"]] == r["matched_text"] for r in spans)
    footnote = next(r for r in refs if r["type"] == "sources_footnote")
    assert footnote["start_idx"] == footnote["end_idx"] == 2003

    mice = read("enchanted-twin__conversations.json")[1]
    _builder, records = events(mice.turns[1])
    activity = [r.body.to_body()["activity"] for r in records if r.kind == "hosted_activity"]
    # The search is started by the assistant's code message; its results are on the answer
    # (search_result_groups), not on the empty, hidden tool message.
    assert activity[0]["input"] == {"query": "what are the mouse compatile with apple mac book "
                                             "pro 2023"}
    assert activity[-1]["state"] == "completed" and len(activity[-1]["sources"]) == 9
    [message] = [r for r in records if r.kind == "message"]
    assert not re.search("[\ue200-\ue2ff]", message.text)  # every private-use marker removed
    assert "image_fetch" not in message.text
    assert len(message.attributions) == 4  # one per grouped_webpages item
    # Each range is the marked sentence (U+E203 … U+E204) right before its reference: the
    # export gives that text, and the stored range addresses exactly it.
    for ref, attribution in zip([r for r in refs if r["type"] == "grouped_webpages"],
                                message.attributions, strict=True):
        close = text.rfind("\ue204", 0, ref["start_idx"])
        opening = text.rfind("\ue203", 0, close)
        assert message.text[attribution.start:attribution.end] == text[opening + 1:close]
        assert attribution.url == ref["items"][0]["url"]


# -- the hand-written sample: tools, a repaired offset, a token limit ----------------------------


def test_sample_with_browsing_code_and_a_token_limit():
    item = chatgpt.convert(chatgpt_tools(), "sample.json")
    builder, records = events(item.turns[1])
    activities = [(r.body.name, r.body.state, r.body.summary) for r in records
                  if r.kind == "hosted_activity"]
    assert activities == [
        ("web_search", "started", ""), ("web_search", "completed", "2 results"),
        ("web_fetch", "started", ""), ("web_fetch", "completed", "Everest"),
        ("code_execution", "started", ""), ("code_execution", "completed", "78304801"),
    ]
    assert builder.outcome.end_reason == "max_tokens"
    [answer] = [r for r in records if r.kind == "message"]
    # The offsets (26..36) miss the marker (23..33): the marker is found, removed, and the
    # range is the sentence it ends.
    [attribution] = answer.attributions
    assert answer.text.startswith("Everest is 8,849 m high. Squared")
    assert answer.text[attribution.start:attribution.end] == "Everest is 8,849 m high"


def test_an_entry_that_is_not_an_object_or_has_no_messages_is_a_problem():
    assert isinstance(chatgpt.convert([], "x"), Problem)
    empty = {"title": "t", "mapping": {"r": {"id": "r", "parent": None, "children": [],
                                             "message": None}}, "current_node": "r"}
    assert "no visible message" in chatgpt.convert(empty, "x").message


def test_a_cycle_in_the_tree_does_not_loop():
    cyclic = {"title": "loop", "current_node": "a", "mapping": {
        "a": {"id": "a", "parent": "b", "children": ["b"], "message": None},
        "b": {"id": "b", "parent": "a", "children": ["a"], "message": {
            "id": "b", "author": {"role": "user"}, "content": {"content_type": "text",
                                                               "parts": ["hello"]},
            "metadata": {}}}}}
    item = chatgpt.convert(cyclic, "x")
    assert isinstance(item, ImportedConversation) and len(item.turns) == 1


@pytest.mark.parametrize("text, spans, old, new", [
    ("ab【1†x】cd", [(2, 7)], 7, 2),
    ("ab【1†x】cd", [(2, 7)], 4, 2),
    ("a\ue203b\ue204c", [(1, 2), (3, 4)], 4, 2),
])
def test_removal_maps_positions(text, spans, old, new):
    removal = markers.Removal(text, spans)
    assert removal.position(old) == new
