"""The Claude.ai importer: the October 2024 fixtures (flat list, inline tags, no model) and a
hand-written sample of the newer content-block shape (see ``tests/importers/samples.py`` for
why it is hand-written)."""

from __future__ import annotations

import re

import orjson

from importers import claude_ai
from importers.base import ImportedConversation
from streams import run
from tests.importers.samples import claude_blocks
from tests.support import shared_path


def read(name: str) -> list:
    path = shared_path("fixtures", "chat-exports", name)
    with path.open("rb") as stream:
        return list(claude_ai.read(stream, name))


def events(turn):
    return run.assemble([(r.name, r.parts) for r in turn.responses])


def test_artifacts_fixture_facts():
    raw = orjson.loads(shared_path("fixtures", "chat-exports",
                                   "claude-to-sqlite__artifacts.json").read_bytes())[0]
    assert len(raw["chat_messages"]) == 20
    [item] = read("claude-to-sqlite__artifacts.json")
    assert item.title == "LLM Pricing Calculator" and item.forks == []
    # 10 human and 10 assistant messages, each its own turn, put back in time order: the
    # export lists the 03:37:51 question first, but it belongs after the 03:32:21 answer.
    assert [t.role for t in item.turns] == ["user", "agent"] * 10
    assert any("time order" in note for note in item.notes)
    times = [t.created_at for t in item.turns]
    assert times == sorted(times)
    records = [events(t) for t in item.turns]
    artifacts, files, models = [], [], set()
    for turn, (builder, turn_records) in zip(item.turns, records, strict=True):
        models.add(builder.model)
        for record in turn_records:
            artifacts += re.findall(r"^\*\*Artifact: (.+?)\*\* \(([^)]*)\)$", record.text,
                                    re.MULTILINE)
            if record.kind == "provider_artifact" and record.body.type == "attachments":
                files.append(record.body.summary)
            assert "<antArtifact" not in record.text and "<antThinking" not in record.text
        if turn.role == "agent":
            kinds = [r.kind for r in turn_records]
            assert "reasoning" in kinds  # the <antThinking> block
            assert turn_records[0].text.startswith("Certainly") or turn_records[0].text[0] != " "
    assert models == {""}  # no model anywhere in the export: none recorded, none guessed
    assert len(artifacts) == 10  # all versions of one identifier
    assert {detail for _, detail in artifacts} == {"llm-pricing-calculator · text/html"}
    assert len(files) == 1 and files[0].count("CleanShot") == 5
    # The question that came first in the list now follows the answer before it.
    assert events(item.turns[6])[1][0].text.startswith("Add a onkeyup event too")
    # No citations in this export.
    assert not any(r.attributions for _, rs in records for r in rs)


def test_example_fixture_is_the_smallest_valid_input():
    [item] = read("claude-to-sqlite__example.json")
    assert [t.role for t in item.turns] == ["user", "agent"]
    _, user = events(item.turns[0])
    assert user[0].text == "Turn this into a bash command"
    assert user[1].body.summary == "Attached: CleanShot 20241017 at 22.29.542x.png"
    _, answer = events(item.turns[1])
    assert answer[0].text.endswith("...")


def test_content_blocks_sample():
    item = claude_ai.convert(claude_blocks(), "sample.json")
    assert isinstance(item, ImportedConversation)
    assert [t.role for t in item.turns] == ["user", "agent", "user"]
    builder, records = events(item.turns[1])
    assert (builder.provider, builder.model) == ("anthropic", "claude-3-7-sonnet-20250219")
    kinds = [r.kind for r in records]
    assert kinds[0] == "reasoning" and "tool_call_request" not in kinds
    activities = [(r.body.to_body()["activity"]["name"], r.body.to_body()["activity"]["state"])
                  for r in records if r.kind == "hosted_activity"]
    assert activities == [("web_search", "started"), ("web_search", "completed"),
                          ("web_fetch", "started"), ("web_fetch", "failed"),
                          ("code_execution", "started"), ("code_execution", "completed")]
    search = next(r.body.to_body()["activity"] for r in records if r.kind == "hosted_activity"
                  and r.body.to_body()["activity"]["state"] == "completed")
    assert search["input"] == {"query": "Café Central"}
    assert search["sources"] == [{"url": "https://example.org/cafe",
                                  "title": "Café Central – history"}]
    [answer] = [r for r in records if r.kind == "message"]
    [attribution] = answer.attributions
    # Code points: "é" before the span's end would shift a UTF-16 or UTF-8 count.
    assert answer.text[attribution.start:attribution.end] == "Café Central opened in 1876."
    assert attribution.title == "Café Central – history"  # named by the search result
    _, user = events(item.turns[0])
    assert user[1].body.summary == "Attached: notes.txt"
    # The regenerated answer the user did not keep is a fork after the first question.
    [fork] = item.forks
    assert fork.at_turn == 0 and events(fork.turns[0])[1][0].text == "In 1876."


def test_a_conversation_without_messages_is_a_problem():
    problem = claude_ai.convert({"uuid": "u", "name": "n"}, "x.json", 3)
    assert problem.line == 3 and "no chat_messages" in problem.message
