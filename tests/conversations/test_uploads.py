"""``conversations.uploads``: files in, conversations stored through the store; and the
``import`` / ``ingest`` commands' owner."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations import uploads
from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from conversations.projections import conversation_dict
from tests.importers.samples import chatgpt_tools
from tests.support import SHARED, shared_path

pytestmark = pytest.mark.django_db

SECRET = "sk-ant-api03-" + "Q" * 40


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="pw-owner-123")


def export_files() -> list[uploads.Upload]:
    folder = shared_path("fixtures", "chat-exports")
    return [uploads.Upload(p.name, (lambda p=p: p.open("rb")), p.stat().st_size)
            for p in sorted(folder.glob("*.json"))]


def memory(name: str, data: bytes) -> uploads.Upload:
    return uploads.Upload(name, lambda: io.BytesIO(data), len(data))


def imported(results) -> tuple[list[uploads.Imported], list[uploads.Failed]]:
    """What was imported, and the problems; a conversation already imported fails the test
    (call ``uploads.import_files`` yourself to look at those)."""
    results = list(results)
    assert not [r for r in results if isinstance(r, uploads.Already)]
    return ([r for r in results if isinstance(r, uploads.Imported)],
            [r for r in results if isinstance(r, uploads.Failed)])


def test_every_chat_export_fixture(owner):
    results = list(uploads.import_files(export_files(), owner=owner))
    # Two of LibreChat's fixtures hold versions of one ChatGPT conversation (the same id, as an
    # export taken later holds it): the second is already imported, and says it differs.
    [already] = [r for r in results if isinstance(r, uploads.Already)]
    assert (already.source, already.conversation.title) == (
        "librechat__chatgpt-export.json", "Citation Convo")
    report = uploads.report(already, lambda c: f"/c/{c.pk}/")
    assert report["type"] == "already_imported" and report["url"] == \
        f"/c/{already.conversation.pk}/"
    assert report["changed"] is already.changed
    done, failed = imported(r for r in results if not isinstance(r, uploads.Already))
    # ChatGPT: 2 + 1 + 1 - 1 + 2 (one entry skipped) + 4; Claude.ai: 1 + 1.
    assert len(done) == 11
    assert [f.source for f in failed] == ["librechat__chatgpt-modern-export.json"]
    assert "Corrupted entry" in failed[0].message
    forks = [f for r in done for f in r.forks]
    assert len(forks) == 3  # tree: 2, enchanted-twin's A/B comparison: 1
    assert Conversation.objects.filter(owner=owner).count() == 14
    # The exported object is stored once per conversation, not once per turn or event.
    chatgpt = [r for r in done if r.format == "chatgpt"]
    assert ProviderPayload.objects.filter(format="chatgpt.export").count() == len(chatgpt)
    assert ProviderPayload.objects.filter(format="claude_ai.export").count() == 2
    for result in done:
        events = Event.objects.filter(conversation=result.conversation).order_by("seq")
        with_payload = [e for e in events if e.payload_id]
        assert len(with_payload) == 1 and with_payload[0] == events[0]


def test_forks_share_their_turns_and_the_payload(owner):
    tree = [u for u in export_files() if u.name == "librechat__chatgpt-tree.json"]
    [result], _ = imported(uploads.import_files(tree, owner=owner))
    main = result.conversation
    assert main.turns.count() == 6
    by_turn = {f.forked_at_turn: f for f in result.forks}
    assert set(by_turn) == {1, 4}
    edited = by_turn[1]
    assert edited.forked_from_id == main.pk and edited.owner == owner
    texts = [e.text for e in Event.objects.filter(conversation=edited, kind="message")
             .order_by("seq")]
    assert texts[:2] == ["hi there", "Hello! How can I assist you today?"]
    assert texts[2:4] == ["so cool bro", "Thanks! What brings you here today?"]
    last = edited.turns.order_by("index").last()
    assert last.status == "interrupted"  # the abandoned answer stopped mid-sentence
    first_payloads = {Event.objects.filter(conversation=c).order_by("seq").first().payload_id
                      for c in (main, *result.forks)}
    assert len(first_payloads) == 1  # one row, shared by the forks that copy turn 0
    native = conversation_dict(main, "native")
    payload = native["turns"][0]["events"][0]["payload"]
    assert payload["provider"] == "chatgpt" and payload["format"] == "chatgpt.export"
    value = orjson.loads(orjson.dumps(payload["value"]))
    # Hidden and system messages are not shown, but kept in the native projection.
    hidden = [n for n in value["mapping"].values() if n.get("message")
              and n["message"]["metadata"].get("is_visually_hidden_from_conversation")]
    assert hidden and value["current_node"] == "f63b8e17-aa5c-4ca6-a1bf-d4d285e269b8"


def test_stored_citations_provenance_and_text(owner):
    files = [u for u in export_files() if u.name in ("librechat__chatgpt-export.json",
                                                     "enchanted-twin__conversations.json")]
    done, _ = imported(uploads.import_files(files, owner=owner))
    by_title = {r.conversation.title: r.conversation for r in done}
    web = by_title["Conversation 1. Web Search"]
    # As old as the export says (create_time, Unix seconds), and so are its turns.
    assert web.created_at.timestamp() == pytest.approx(1704629915.775304)
    first = web.turns.get(index=0)
    assert web.created_at < first.created_at < web.turns.get(index=5).created_at
    agents = web.turns.filter(role="agent")
    assert {(t.provider, t.model) for t in agents} == {("openai", "gpt-4")}
    assert web.turns.filter(role="user").exclude(provider="").count() == 0
    attributions = Attribution.objects.filter(event__conversation=web)
    assert attributions.count() == 4
    for a in attributions.select_related("event"):
        assert "【" not in a.event.text
        assert a.event.text[a.range_start:a.range_end].strip()
    assert Event.objects.filter(conversation=web, kind="hosted_activity").count() == 8
    assert Event.objects.filter(conversation=web, kind="tool_call_request").count() == 0
    mice = by_title["Best Mice for MacBook Pro"]
    assert Attribution.objects.filter(event__conversation=mice).count() == 4
    strategic = by_title["Strategic LLM Agent System"]
    assert Event.objects.filter(conversation=strategic, kind="reasoning").count() == 1
    assert strategic.turns.get(role="agent").model == "o3-mini"


def export_with(*conversations: dict) -> bytes:
    return orjson.dumps(list(conversations))


def test_each_conversation_is_all_or_nothing_and_one_bad_file_stops_nothing(owner):
    good = chatgpt_tools()
    bad = chatgpt_tools()
    bad["title"] = "Bad provenance"
    bad["conversation_id"] = bad["id"] = "bad"
    # A credential posing as a model: refused when the turn is stored, with everything of
    # that conversation, while the conversations around it are stored.
    bad["mapping"]["a1"]["message"]["metadata"]["model_slug"] = SECRET
    also = chatgpt_tools()
    also["title"] = "After it"
    also["conversation_id"] = also["id"] = "after-it"
    other = chatgpt_tools()
    other["conversation_id"] = other["id"] = "other"
    before = Turn.objects.count()
    done, failed = imported(uploads.import_files([
        memory("a.json", export_with(good, bad, also)),
        memory("notes.txt", b"not a conversation"),
        memory("b.json", export_with(other)),
    ], owner=owner))
    assert [r.conversation.title for r in done] == ["Everest squared", "After it",
                                                    "Everest squared"]
    assert [(f.source, f.files) for f in failed] == [("a.json", (0,)), ("notes.txt", (1,))]
    assert "credential" in failed[0].message and failed[0].line == 1
    assert not Conversation.objects.filter(title="Bad provenance").exists()
    assert Turn.objects.count() == before + 3 * 2


def test_a_fork_that_cannot_be_stored_takes_its_conversation_with_it(owner):
    conversation = chatgpt_tools()
    mapping = conversation["mapping"]
    # An edited first question, on a branch the user left, answered by an invalid model.
    question = dict(mapping["u1"]["message"], id="u1b")
    answer = dict(mapping["a4"]["message"], id="a4b", metadata={"model_slug": "not a model!"})
    mapping["u1b"] = {"id": "u1b", "parent": "root", "children": ["a4b"], "message": question}
    mapping["a4b"] = {"id": "a4b", "parent": "u1b", "children": [], "message": answer}
    mapping["root"]["children"].append("u1b")
    done, failed = imported(uploads.import_files([memory("x.json", export_with(conversation))],
                                                 owner=owner))
    assert done == [] and "not a valid identifier" in failed[0].message
    assert not Conversation.objects.exists()


def test_credentials_are_redacted_from_text_and_payload(owner):
    conversation = chatgpt_tools()
    mapping = conversation["mapping"]
    mapping["u1"]["message"]["content"]["parts"] = [f"my key is {SECRET}, how tall is it?"]
    [result], _ = imported(uploads.import_files([memory("x.json", export_with(conversation))],
                                                owner=owner))
    events = Event.objects.filter(conversation=result.conversation)
    assert events.filter(text__contains="[REDACTED]").count() == 1
    assert not events.filter(text__contains=SECRET).exists()
    assert not ProviderPayload.objects.filter(value__contains=SECRET).exists()
    assert ProviderPayload.objects.filter(format="chatgpt.export", value__contains="[REDACTED]"
                                          ).count() == 1


def test_recordings_and_cassettes(owner):
    folder = SHARED / "fixtures" / "providers" / "anthropic"
    names = ["pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn"
             ".sse.txt",
             "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation"
             ".sse.txt",
             "pydantic-ai__test_anthropic_model_thinking_part_redacted_stream.yaml"]
    if not all((folder / n).exists() for n in names):
        pytest.skip(f"{folder} is absent (tests read ../shared in place)")
    files = [uploads.Upload(n, (lambda n=n: (folder / n).open("rb")),
                            (folder / n).stat().st_size) for n in names]
    results = list(uploads.import_files(files, owner=owner))
    progress = [r.done for r in results if isinstance(r, uploads.Progress)]
    assert progress == sorted(progress) and progress[-1] == sum(f.size for f in files)
    done, failed = imported(results)
    assert failed == []
    cassette, recording = done  # recordings come last: they are one turn together
    assert cassette.files == (2,) and cassette.format == "vcr"
    assert [t.role for t in cassette.conversation.turns.order_by("index")] == ["user", "agent"]
    assert recording.files == (0, 1) and recording.turns == 1
    turn = recording.conversation.turns.get()
    assert [r["trigger"] for r in turn.responses_list] == ["initial", "pause_turn"]
    assert turn.model.startswith("claude-sonnet-4-5")


# -- the commands -------------------------------------------------------------------------------


def sample_file(tmp_path: Path) -> Path:
    path = tmp_path / "conversations.json"
    path.write_bytes(export_with(chatgpt_tools()))
    return path


def test_import_command_reports_each_conversation(tmp_path, owner):
    out, err = io.StringIO(), io.StringIO()
    bad = tmp_path / "bad.txt"
    bad.write_text("nothing")
    with pytest.raises(CommandError, match=r"1 problem: .*bad\.txt, line 1: not a format"):
        call_command("import", str(sample_file(tmp_path)), str(bad), "--owner", "owner",
                     stdout=out, stderr=err)
    [line] = out.getvalue().splitlines()
    conversation_id, title, turns, source = line.split("\t")
    assert Conversation.objects.get(pk=conversation_id).owner == owner
    assert (title, turns, Path(source).name) == ("Everest squared", "2 turns",
                                                 "conversations.json")
    assert "bad.txt, line 1" in err.getvalue()


@pytest.mark.parametrize("command", ["import", "ingest"])
def test_without_owner_the_only_superuser_else_a_refusal_naming_the_option(
        command, tmp_path, django_user_model):
    path = sample_file(tmp_path)
    args = [str(path)] if command == "import" else ["--provider", "anthropic", str(path)]
    with pytest.raises(CommandError, match=r"--owner USER \(there is no superuser\)"):
        call_command(command, *args, stdout=io.StringIO())
    root = django_user_model.objects.create_superuser("root", password="pw-root-123")
    if command == "import":
        call_command(command, *args, stdout=io.StringIO())
        assert Conversation.objects.get().owner == root
    django_user_model.objects.create_superuser("root2", password="pw-root-123")
    with pytest.raises(CommandError, match=r"--owner USER \(there is more than one superuser"):
        call_command(command, *args, stdout=io.StringIO())
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command(command, *args, "--owner", "nobody", stdout=io.StringIO())


def test_conversations_are_committed_in_batches_and_one_refused_costs_only_itself(
        owner, monkeypatch):
    """An import commits several conversations a transaction (their search docs in one
    statement at its end); one the database refuses after its rows were written rolls the
    batch back, which is written again conversation by conversation: that one is reported by
    itself, in its place, and the others are stored once."""
    from django.db import DataError, connection
    from django.test.utils import CaptureQueriesContext

    def numbered(n: int) -> dict:
        conversation = chatgpt_tools()
        conversation["title"] = f"Number {n}"
        conversation["conversation_id"] = conversation["id"] = f"n{n}"
        return conversation

    with CaptureQueriesContext(connection) as queries:
        done, failed = imported(uploads.import_files(
            [memory("a.json", export_with(*(numbered(n) for n in range(3))))], owner=owner))
    assert [r.conversation.title for r in done] == ["Number 0", "Number 1", "Number 2"]
    assert failed == []
    assert sum(q["sql"].startswith('INSERT INTO "conversations_searchdoc"')
               for q in queries.captured_queries) == 1

    real = uploads.store.record_turns

    def refused_after_writing(turns, conversation):
        result = real(turns, conversation)
        if result[0].title == "Number 5":
            raise DataError("value too long")
        return result

    monkeypatch.setattr(uploads.store, "record_turns", refused_after_writing)
    monkeypatch.setattr(uploads, "IMPORT_BATCH", 2)
    results = [r for r in uploads.import_files([
        memory("b.json", export_with(*(numbered(n) for n in range(3, 7)))),
        memory("notes.txt", b"not a conversation"),
        memory("c.json", export_with(numbered(7))),
    ], owner=owner) if not isinstance(r, uploads.Progress)]
    assert [(type(r).__name__, r.files) for r in results] == [
        ("Imported", (0,)), ("Imported", (0,)), ("Failed", (0,)), ("Imported", (0,)),
        ("Failed", (1,)), ("Imported", (2,))]
    assert [r.conversation.title for r in results if isinstance(r, uploads.Imported)] == [
        "Number 3", "Number 4", "Number 6", "Number 7"]
    assert results[2].message == "cannot be stored: value too long"
    titles = list(Conversation.objects.order_by("title").values_list("title", flat=True))
    assert titles == [f"Number {n}" for n in (0, 1, 2, 3, 4, 6, 7)]  # once each, 5 not at all
