"""The ``ingest`` and ``import`` commands refuse bad input with a CommandError saying what and
where, and write nothing of it: ``ingest`` through ``conversations.management.refusals``,
``import`` per conversation (each problem named by its file; the rest is imported)."""

from __future__ import annotations

import io

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations import uploads
from conversations.models import Conversation, Event, Turn
from conversations.projections import export_json
from conversations.provenance import ProvenanceError
from conversations.reading import conversation_rows
from tests.api.conftest import build_conversation

pytestmark = pytest.mark.django_db

BAD_MODEL = (
    '{"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    '"model":"has space","content":[],"usage":{}}}\n'
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}\n'
    '{"type":"message_stop"}\n'
)


def rows() -> tuple[int, int, int]:
    return Conversation.objects.count(), Turn.objects.count(), Event.objects.count()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner")


def test_ingest_refuses_a_readable_response_it_cannot_store(tmp_path, owner):
    path = tmp_path / "bad-model.jsonl"
    path.write_text(BAD_MODEL)
    before = rows()
    with pytest.raises(CommandError) as refused:
        call_command("ingest", "--provider", "anthropic", "--owner", "owner", str(path))
    assert str(refused.value) == "the model 'has space' is not a valid identifier"
    assert rows() == before


def test_import_names_the_file_of_an_invalid_document(tmp_path, owner):
    doc = orjson.loads(export_json(build_conversation(owner=None), "portable"))
    doc["turns"][1]["end_reason"] = "bogus_reason"
    path = tmp_path / "export.json"
    path.write_bytes(orjson.dumps(doc))
    before = rows()
    with pytest.raises(CommandError) as refused:
        call_command("import", "--owner", "owner", str(path), stderr=io.StringIO())
    assert str(refused.value) == (f"1 problem: {path}: not a valid export document: turns[1]: "
                                  "unknown end_reason 'bogus_reason'")
    assert rows() == before


def test_import_refuses_every_refusal_alike_not_only_invalid_documents(tmp_path, monkeypatch,
                                                                      owner):
    """A document that passes the schema but is refused further in (here: provenance) is a
    CommandError too, not a traceback."""
    def refuse(doc, owner=None, source=None):
        raise ProvenanceError("the model looks like a credential; refusing to store it")

    monkeypatch.setattr(uploads, "import_document", refuse)
    path = tmp_path / "export.json"
    path.write_bytes(export_json(build_conversation(owner=None), "portable"))
    with pytest.raises(CommandError) as refused:
        call_command("import", "--owner", "owner", str(path), stderr=io.StringIO())
    assert str(refused.value) == (f"1 problem: {path}: cannot be imported: the model looks "
                                  "like a credential; refusing to store it")


# -- ingest --each: many conversations in one process ---------------------------------------

GOOD = (
    '{"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    '"model":"claude-x","content":[],"usage":{}}}\n'
    '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"answer %d"}}\n'
    '{"type":"content_block_stop","index":0}\n'
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}\n'
    '{"type":"message_stop"}\n'
)


def test_ingest_each_makes_one_conversation_per_file_and_a_bad_file_costs_only_itself(
        tmp_path, owner, monkeypatch):
    from conversations import ingest as ingest_module

    folder = tmp_path / "responses"
    (folder / "nested").mkdir(parents=True)
    for i in range(5):
        (folder / f"r{i}.jsonl").write_text(GOOD % i)
    (folder / "nested" / "r5.jsonl").write_text(GOOD % 5)
    (folder / "r2.jsonl").write_text("{not json\n")  # unreadable
    (folder / ".hidden").write_text("ignored")
    real = ingest_module._write

    def fails_after_writing(provider, read):  # the store wrote, then something failed
        summary = real(provider, read)
        if summary.conversation.title == "answer 3":
            raise ingest_module.DatabaseError("disk full")
        return summary

    monkeypatch.setattr(ingest_module, "_write", fails_after_writing)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="2 of 6 files"):
        call_command("ingest", "--provider", "anthropic", "--owner", "owner", "--each",
                     "--batch", "2", str(folder), stdout=out, stderr=err)  # several batches
    lines = out.getvalue().splitlines()
    assert all(line.split("\t")[0] in ids() for line in lines)  # id, title, file
    assert sorted(line.split("\t")[2].rsplit("/", 1)[1] for line in lines) == [
        "r0.jsonl", "r1.jsonl", "r4.jsonl", "r5.jsonl"]
    assert "r2.jsonl" in err.getvalue() and "r3.jsonl: disk full" in err.getvalue()
    titles = sorted(Conversation.objects.values_list("title", flat=True))
    assert titles == ["answer 0", "answer 1", "answer 4", "answer 5"]  # nothing half-written
    assert [line.split("\t")[1] for line in lines] == ["answer 5", "answer 0", "answer 1",
                                                       "answer 4"]  # in name order
    assert Turn.objects.count() == 4
    assert set(Conversation.objects.values_list("owner__username", flat=True)) == {"owner"}


def test_ingest_each_writes_a_batch_without_a_savepoint_per_file_and_tells_of_each_once(
        owner, monkeypatch):
    """A batch is written in one transaction: no savepoint per file (SQLite's FTS5 writes its
    index out at each). One the database refuses makes the batch run again, file by file; the
    progress hears of every file once all the same."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from conversations import ingest as ingest_module

    files = [ingest_module.ResponseFile(f"r{i}.jsonl", (GOOD % i).encode()) for i in range(6)]
    files[4] = ingest_module.ResponseFile("r4.jsonl", b"{not json\n")
    told = []
    with CaptureQueriesContext(connection) as queries:
        results = list(ingest_module.ingest_each("anthropic", files[:3], owner=owner, batch=3,
                                                 done=told.append))
    # one savepoint: the batch's own, inside the test's transaction
    assert sum("SAVEPOINT" in q["sql"] and "RELEASE" not in q["sql"]
               for q in queries.captured_queries) == 1
    assert [r.conversation.title for r in results] == ["answer 0", "answer 1", "answer 2"]
    # the batch's search docs in one statement at its end, every one of them found
    assert sum(q["sql"].startswith('INSERT INTO "conversations_searchdoc"')
               for q in queries.captured_queries) == 1
    for result in results:
        assert set(conversation_rows(owner, query=result.conversation.title).values_list(
            "pk", flat=True)) == {result.conversation.pk}

    real = ingest_module._write
    monkeypatch.setattr(ingest_module, "_write", lambda provider, read: (
        real(provider, read) if read.records[0].text != "answer 5"
        else (_ for _ in ()).throw(ingest_module.DatabaseError("disk full"))))
    told.clear()
    results = list(ingest_module.ingest_each("anthropic", files[3:], owner=owner, batch=3,
                                             done=told.append))
    assert [(r.name, r.error) for r in told] == [
        ("r4.jsonl", told[0].error), ("r3.jsonl", ""), ("r5.jsonl", "disk full")]
    assert [(r.name, bool(r.conversation)) for r in results] == [
        ("r3.jsonl", True), ("r4.jsonl", False), ("r5.jsonl", False)]
    assert sorted(Conversation.objects.values_list("title", flat=True)) == [
        "answer 0", "answer 1", "answer 2", "answer 3"]


def test_ingest_each_tells_the_progress_only_what_was_committed(owner, monkeypatch):
    """A batch whose end fails (here: its gathered search docs) is rolled back and written
    again file by file: the progress hears of each file once, as committed, never of a
    conversation that was rolled back."""
    from conversations import ingest as ingest_module
    from conversations.search import index as search_index

    insert, failures = search_index.insert_rows, []

    def fails_once(cursor, sql, rows):
        if not failures:
            failures.append(sql)
            raise ingest_module.DatabaseError("the batch's end failed")
        insert(cursor, sql, rows)

    monkeypatch.setattr(search_index, "insert_rows", fails_once)
    files = [ingest_module.ResponseFile(f"r{i}.jsonl", (GOOD % i).encode()) for i in range(3)]
    told: list = []
    results = list(ingest_module.ingest_each("anthropic", files, owner=owner, done=told.append))
    assert failures
    assert [(r.name, r.conversation.pk) for r in told] == [
        (r.name, r.conversation.pk) for r in results]
    assert Conversation.objects.filter(pk__in=[r.conversation.pk for r in told]).count() == 3


def test_ingest_each_batches_by_count_and_by_bytes(monkeypatch):
    from conversations import ingest as ingest_module

    monkeypatch.setattr(ingest_module, "BULK_BYTES", 10)
    files = [ingest_module.ResponseFile(f"f{n}", b"x" * n) for n in (4, 4, 4, 20, 1, 1, 1)]
    assert [[f.name for f in chunk] for chunk in ingest_module._batches(files, 2)] == [
        ["f4", "f4"], ["f4"], ["f20"], ["f1", "f1"], ["f1"]]


def ids() -> set[str]:
    return {str(pk) for pk in Conversation.objects.values_list("pk", flat=True)}


def test_ingest_each_progress_bar_only_on_a_terminal():
    from conversations.management.commands.ingest import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress(2, stream)
        bar.step()
        bar.step(failed=True)
        bar.close()
    assert pipe.getvalue() == ""
    assert tty.getvalue().startswith("\r[") and "2/2 files" in tty.getvalue()
    assert "1 failed" in tty.getvalue() and tty.getvalue().endswith("\n")


def test_ingest_each_logs_a_line_per_batch_and_each_refusal_by_name(owner, caplog):
    """A bulk ingest logs one line per committed batch (each file's own line is at DEBUG),
    and every file it refused in a line of its own: a batch never folds a failure into a
    count alone."""
    import logging

    from conversations import ingest as ingest_module

    files = [ingest_module.ResponseFile(f"r{i}.jsonl", (GOOD % i).encode()) for i in range(4)]
    files[1] = ingest_module.ResponseFile("r1.jsonl", b"{not json\n")
    files[3] = ingest_module.ResponseFile("r3.jsonl", BAD_MODEL.encode())
    with caplog.at_level(logging.DEBUG, logger="turnscope.ingest"):
        results = list(ingest_module.ingest_each("anthropic", files, owner=owner, batch=10))
    assert [bool(r.conversation) for r in results] == [True, False, True, False]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert info[0] == ("ingested a batch of 4 anthropic files: 2 stored, 0 already "
                       "imported, 2 refused")
    assert [line.split(":")[1].strip() for line in info[1:]] == ["r1.jsonl", "r3.jsonl"]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert sum(line.startswith("ingested anthropic turn") for line in debug) == 2
