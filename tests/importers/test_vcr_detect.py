"""VCR cassettes (as vcrpy, pytest-recording and pydantic-ai's recorder write them) and content
detection: every format read by what it holds, never by its name."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import orjson
import pytest
import yaml

import providers
from importers import detect, vcr
from importers.base import ExportDocument, ImportedConversation, Problem
from streams import run
from tests.support import SHARED, shared_path

CHAT_EXPORTS = SHARED / "fixtures" / "chat-exports"


def agent(turn):
    return run.assemble([(r.name, providers.parse(r.provider, r.raw, r.context))
                         for r in turn.responses])


def cassette(*interactions: dict) -> bytes:
    return yaml.safe_dump({"interactions": list(interactions), "version": 1}).encode()


def anthropic_interaction(messages: list, reply: str, stop: str = "end_turn",
                          encoding: str | None = None) -> dict:
    body = orjson.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                         "model": "claude-x", "content": [{"type": "text", "text": reply}],
                         "stop_reason": stop, "usage": {"input_tokens": 1, "output_tokens": 1}})
    headers = {"content-type": ["application/json"]}
    if encoding == "gzip":
        body = gzip.compress(body)
        headers["content-encoding"] = ["gzip"]
    return {
        "request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages",
                    "body": orjson.dumps({"model": "claude-x", "messages": messages}).decode(),
                    "headers": {"anthropic-version": ["2023-06-01"],
                                "x-api-key": ["sk-ant-api03-" + "a" * 40]}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": headers,
                     "body": {"string": body}},
    }


def test_vcrpy_cassette_threads_consecutive_interactions():
    first = [{"role": "user", "content": "Hi"}]
    second = [*first, {"role": "assistant", "content": "Hello"},
              {"role": "user", "content": [{"type": "text", "text": "Bye"}]}]
    other = [{"role": "user", "content": "Unrelated"}]
    raw = cassette(anthropic_interaction(first, "Hello"),
                   anthropic_interaction(second, "Goodbye", encoding="gzip"),
                   anthropic_interaction(other, "Sure"),
                   {"request": {"method": "GET", "uri": "https://auth.example/token",
                                "body": None, "headers": {}},
                    "response": {"status": {"code": 200}, "headers": {},
                                 "body": {"string": "ok"}}})
    items = list(vcr.read(raw, "chat.yaml"))
    assert [type(i) for i in items] == [ImportedConversation, ImportedConversation]
    one, two = items
    assert [t.role for t in one.turns] == ["user", "agent", "user", "agent"]
    prompts = [t.responses[0].parts[1].text for t in one.turns if t.role == "user"]
    assert prompts == ["Hi", "Bye"]
    builder, records = agent(one.turns[3])  # the gzip body was decompressed
    assert records[0].text == "Goodbye" and builder.model == "claude-x"
    response = one.turns[1].responses[0]
    assert response.context.api_version == "2023-06-01"
    assert response.context.request["messages"] == first
    assert response.context.endpoint == "https://api.anthropic.com/v1/messages"
    assert [t.role for t in two.turns] == ["user", "agent"]
    assert any("skipped interaction 3" in n for n in one.notes)
    assert one.line == 2 and two.line is not None and two.line > one.line


def test_pause_turn_cassette_is_one_turn_with_its_continuation():
    path = shared_path("fixtures", "providers-more", "anthropic",
                       "pydantic-ai__test_pause_turn_web_search_streaming_vcr.yaml")
    [item] = list(vcr.read(path.read_bytes(), path.name))
    assert [t.role for t in item.turns] == ["user", "agent"]
    builder, _ = agent(item.turns[1])
    assert [r["trigger"] for r in builder.responses] == ["initial", "pause_turn"]
    assert builder.outcome.status == "complete"


def test_a_tool_result_round_continues_the_turn():
    path = shared_path("fixtures", "providers", "google", "pydantic-ai__test_google_vertex_tool_"
                       "combination_omits_include_server_side_tool_invocations.yaml")
    [item] = list(vcr.read(path.read_bytes(), path.name))
    builder, _ = agent(item.turns[-1])
    assert [r["trigger"] for r in builder.responses] == ["initial", "tool_result"]


def test_pydantic_ai_parsed_bodies_and_repeated_questions():
    path = shared_path("fixtures", "providers", "openai",
                       "pydantic-ai__test_openai_include_raw_annotations_streaming.yaml")
    items = list(vcr.read(path.read_bytes(), path.name))
    # The same question asked twice is two conversations (the second does not extend the
    # first); the third question is a third.
    assert len(items) == 3 and all(len(i.turns) == 2 for i in items)
    assert agent(items[0].turns[1])[0].model.startswith("gpt-5.2")


def test_json_cassette_and_unreadable_ones():
    doc = {"interactions": [anthropic_interaction([{"role": "user", "content": "Q"}], "A")],
           "version": 1}
    doc["interactions"][0]["response"]["body"]["string"] = \
        doc["interactions"][0]["response"]["body"]["string"].decode()
    [item] = list(vcr.read(orjson.dumps(doc), "c.json"))
    assert agent(item.turns[1])[1][0].text == "A"
    [problem] = list(vcr.read(b"interactions:\n  - request: [\n", "bad.yaml"))
    assert isinstance(problem, Problem) and problem.line is not None
    assert "not YAML" in problem.message
    [problem] = list(vcr.read(b"interactions: []\n", "empty.yaml"))
    assert "no interaction with a provider API" in problem.message


# -- detection ----------------------------------------------------------------------------------


def upload(path: Path) -> detect.Upload:
    return detect.Upload(path.name, lambda: path.open("rb"), path.stat().st_size)


def test_every_fixture_is_detected_by_content():
    folder = shared_path("fixtures", "chat-exports")
    for path in sorted(folder.glob("*.json")):
        expected = "claude_ai" if path.name.startswith("claude") else "chatgpt"
        assert detect.detect(path.read_bytes()[:detect.HEAD]) == expected, path.name
    for provider in ("anthropic", "openai", "google"):
        for path in sorted((SHARED / "fixtures" / "providers" / provider).glob("*")):
            head = path.read_bytes()[:detect.HEAD]
            found = detect.detect(head)
            if path.suffix == ".yaml":
                assert found == "vcr", path.name
            else:
                assert found in (provider, "recording"), path.name


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_zip_with_split_conversation_files():
    export = orjson.loads(shared_path("fixtures", "chat-exports",
                                      "enchanted-twin__conversations.json").read_bytes())
    data = zipped({
        "conversations-000.json": orjson.dumps(export[:2]),
        "conversations-001.json": orjson.dumps(export[2:]),
        "chat.html": b"<html></html>", "user.json": b"{}",
    })
    items = list(detect.read([detect.Upload("export.zip", lambda: io.BytesIO(data))]))
    assert [i.title for i in items] == [c["title"] for c in export]
    assert items[0].source == "export.zip/conversations-000.json"
    assert items[3].source == "export.zip/conversations-001.json"


def test_one_bad_file_never_stops_the_others():
    files = [
        detect.Upload("notes.txt", lambda: io.BytesIO(b"plain text, nothing else")),
        detect.Upload("broken.zip", lambda: io.BytesIO(b"PK\x03\x04 not really")),
        detect.Upload("empty.json", lambda: io.BytesIO(b"")),
        detect.Upload("cut.json", lambda: io.BytesIO(b'[{"mapping": {}, "title": "a"},\n{"ma')),
        detect.Upload("doc.json", lambda: io.BytesIO(orjson.dumps(
            {"format": "turnscope.conversation", "version": 1}))),
        detect.Upload("archive.zip", lambda: io.BytesIO(zipped({"readme.txt": b"hi"}))),
    ]
    items = list(detect.read(files))
    problems = [i for i in items if isinstance(i, Problem)]
    assert [p.source for p in problems] == ["notes.txt", "broken.zip", "empty.json", "cut.json",
                                            "cut.json", "archive.zip"]
    assert "no message tree" in problems[3].message  # the first entry: read, and skipped
    assert problems[4].line == 2 and "ends inside" in problems[4].message
    [document] = [i for i in items if isinstance(i, ExportDocument)]
    assert document.source == "doc.json"  # validated when it is stored, not here


def test_recordings_of_one_provider_are_one_turn_in_the_order_given():
    folder = shared_path("fixtures", "providers", "anthropic")
    names = ["pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn"
             ".sse.txt",
             "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation"
             ".sse.txt"]
    [item] = list(detect.read([upload(folder / n) for n in names]))
    assert item.files == tuple(names)
    builder, _ = agent(item.turns[0])
    assert [r["trigger"] for r in builder.responses] == ["initial", "pause_turn"]


def test_the_format_override():
    body = b'{"type": "message", "content": []}'  # nothing in it names a provider
    [problem] = list(detect.read([detect.Upload("x.json", lambda: io.BytesIO(body))]))
    assert "choose the format" in problem.message
    [item] = list(detect.read([detect.Upload("x.json", lambda: io.BytesIO(body))],
                              "anthropic"))
    assert item.turns[0].responses[0].provider == "anthropic"
    export = CHAT_EXPORTS / "claude-to-sqlite__example.json"
    if export.exists():
        [wrong] = list(detect.read([upload(export)], "chatgpt"))
        assert isinstance(wrong, Problem) and "no message tree" in wrong.message
    with pytest.raises(ValueError, match="unknown format"):
        list(detect.read([], "pdf"))


def test_claude_on_vertex_and_compatible_hosts_are_read_by_their_wire_and_named_by_host():
    claude = anthropic_interaction([{"role": "user", "content": "Hi"}], "Hello")
    claude["request"]["uri"] = ("https://us-east5-aiplatform.googleapis.com/v1/projects/p/"
                                "locations/us-east5/publishers/anthropic/models/claude-x:rawPredict")
    grok = {
        "request": {"method": "POST", "uri": "https://api.x.ai/v1/chat/completions",
                    "body": orjson.dumps({"model": "m", "messages": [
                        {"role": "user", "content": "Hi"}]}).decode(), "headers": {}},
        "response": {"status": {"code": 200}, "headers": {}, "body": {"string": orjson.dumps({
            "id": "c1", "object": "chat.completion", "model": "any-model", "choices": [
                {"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Hello"}}]}).decode()}},
    }
    served = []
    for interaction in (claude, grok):
        [item] = list(vcr.read(cassette(interaction), "c.yaml"))
        builder, records = agent(item.turns[1])
        assert records[0].text == "Hello"
        served.append(builder.provider)
    assert served == ["vertex", "xai"]


def test_a_gzip_body_is_decompressed_only_up_to_the_cap(monkeypatch):
    """A cassette's gzip body that decodes past the cap is refused with its interaction, and
    never decoded whole (a 1.5 MB cassette took the server to 2 GB)."""
    monkeypatch.setattr(vcr, "MAX_DECOMPRESSED", 1024 * 1024)
    seen = []
    real = vcr.zlib.decompressobj

    class Watched:
        def __init__(self, *args):
            self.inner = real(*args)

        def decompress(self, data, limit=0):
            out = self.inner.decompress(data, limit)
            seen.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(vcr.zlib, "decompressobj", Watched)
    bomb = anthropic_interaction([{"role": "user", "content": "Q"}], "A", encoding="gzip")
    bomb["response"]["body"]["string"] = gzip.compress(b"{" + b" " * (50 * 1024 * 1024) + b"}")
    problems = [i for i in vcr.read(cassette(bomb), "bomb.yaml") if isinstance(i, Problem)]
    assert "interaction 0: the gzip body is too large once decompressed" in problems[0].message
    assert max(seen) <= 1024 * 1024 + 1  # never more than the cap was decoded
    fine = anthropic_interaction([{"role": "user", "content": "Q"}], "A", encoding="gzip")
    [item] = list(vcr.read(cassette(fine), "fine.yaml"))
    assert agent(item.turns[1])[1][0].text == "A"


def test_a_zip_member_larger_than_its_directory_says_is_refused(monkeypatch):
    """A zip is read within its directory's sizes and a total (detect.MAX_UNZIPPED)."""
    export = shared_path("fixtures", "chat-exports",
                         "enchanted-twin__conversations.json").read_bytes()
    data = zipped({"conversations.json": export})
    monkeypatch.setattr(detect, "MAX_UNZIPPED", len(export) - 1)
    items = list(detect.read([detect.Upload("x.zip", lambda: io.BytesIO(data), len(data))]))
    assert [i.message for i in items if isinstance(i, Problem)] == ["too large once unzipped"]
