"""How the API refuses input: every domain error of the ingest, import and fork endpoints is a
400 whose ``detail`` says what was refused and why, with nothing written. The wording is part of
the API (clients show it), so each case pins the whole body.

Errors that a real request reaches are sent for real; the few that need a broken database or an
adapter bug are raised from the view's own call (``api.imports.ingest_response`` /
``import_document``)."""

from __future__ import annotations

import logging

import orjson
import pytest
from django.db import DataError, IntegrityError

from api import imports, views
from conversations import uploads
from conversations.projections import export_json
from conversations.provenance import ProvenanceError
from streams.registries import UnregisteredValue
from tests.api.conftest import build_conversation

pytestmark = pytest.mark.django_db

INGEST = "/api/v1/conversations/ingest?provider=anthropic"
IMPORT = "/api/v1/conversations/import"
# An Anthropic stream whose served model is not an identifier: readable, but refused.
BAD_MODEL = (
    b'{"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    b'"model":"has space","content":[],"usage":{}}}\n'
    b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}\n'
    b'{"type":"message_stop"}\n'
)


def ingest(client, body: bytes):
    return client.generic("POST", INGEST, body, content_type="application/x-ndjson")


def import_(client, doc):
    return client.post(IMPORT, doc, format="json")


def raising(exc: BaseException):
    def call(*args, **kwargs):
        raise exc
    return call


def a_document() -> dict:
    return orjson.loads(export_json(build_conversation(owner=None), "portable"))


# -- ingest ------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, detail", [
    (b"", "The body is not a readable anthropic response: body, line 1: empty input"),
    (b"\xff\xfe", "The body is not a readable anthropic response: body: not UTF-8 text "
                  "(invalid start byte)"),
    (BAD_MODEL, "The body cannot be ingested: the model 'has space' is not a valid identifier"),
])
def test_ingest_refuses_what_it_cannot_read_or_store(alice_api, body, detail):
    response = ingest(alice_api, body)
    assert (response.status_code, response.json()) == (400, {"detail": detail})


@pytest.mark.parametrize("exc, detail", [
    (UnregisteredValue("end reason: 'x' is not registered"),
     "The body cannot be ingested: end reason: 'x' is not registered"),
    (ValueError("nothing to ingest"), "The body cannot be ingested: nothing to ingest"),
    (IntegrityError("duplicate key value\nDETAIL: Key (id)=(1) already exists."),
     "The turn cannot be stored: duplicate key value"),
    (DataError(), "The turn cannot be stored: DataError"),
])
def test_ingest_refusals_raised_below_the_view(alice_api, monkeypatch, exc, detail):
    monkeypatch.setattr(imports, "ingest_response", raising(exc))
    response = ingest(alice_api, b"{}")
    assert (response.status_code, response.json()) == (400, {"detail": detail})


@pytest.mark.parametrize("exc", [KeyError("sk-ant-secret"), TypeError("sk-ant-secret"),
                                 AttributeError(), IndexError(), RecursionError()])
def test_an_adapter_bug_on_untrusted_input_is_a_400_logged_without_the_input(
    alice_api, monkeypatch, caplog, exc
):
    monkeypatch.setattr(imports, "ingest_response", raising(exc))
    with caplog.at_level(logging.WARNING, logger="turnscope.api"):
        response = ingest(alice_api, b"{}")
    name = type(exc).__name__
    assert (response.status_code, response.json()) == (
        400, {"detail": f"The body is not a readable anthropic response ({name})."})
    [record] = [r for r in caplog.records if r.name == "turnscope.api"]
    assert record.getMessage().startswith(f"ingest (anthropic): unexpected {name} at ")
    assert "test_errors.py" in record.getMessage()  # where it was raised
    assert "secret" not in record.getMessage()


# -- import ------------------------------------------------------------------------------------


def test_import_refuses_an_invalid_document(alice_api):
    doc = a_document()
    doc["turns"][1]["end_reason"] = "bogus_reason"
    response = import_(alice_api, doc)
    assert response.status_code == 400
    assert response.json()["detail"] == ("body: not a valid export document: turns[1]: unknown "
                                         "end_reason 'bogus_reason'")
    assert response.json()["imported"] == []


# The import reports each conversation, so a refusal below it is that conversation's problem
# (named by its file), and the answer a 400 when nothing else was imported.
@pytest.mark.parametrize("exc, detail", [
    (ProvenanceError("the model looks like a credential"),
     "body: cannot be imported: the model looks like a credential"),
    (UnregisteredValue("event kind: 'x' is not registered"),
     "body: cannot be imported: event kind: 'x' is not registered"),
    (ValueError("bad"), "body: cannot be imported: bad"),
    (IntegrityError("duplicate key value\nDETAIL: more"),
     "body: cannot be stored: duplicate key value"),
    (DataError("value too long"), "body: cannot be stored: value too long"),
    (KeyError("turns"), "body: cannot be read (KeyError)"),
    (TypeError(), "body: cannot be read (TypeError)"),
])
def test_import_refusals_raised_below_the_view(alice_api, monkeypatch, exc, detail):
    monkeypatch.setattr(uploads, "import_document", raising(exc))
    response = import_(alice_api, a_document())
    assert (response.status_code, response.json()["detail"]) == (400, detail)
    assert [p["detail"] for p in response.json()["problems"]] == [detail]


# -- fork --------------------------------------------------------------------------------------


def test_a_fork_point_that_does_not_exist_is_a_400_on_at_turn(alice, alice_api):
    source = build_conversation(owner=alice)
    response = alice_api.post(f"/api/v1/conversations/{source.pk}/fork", {"at_turn": 7},
                              format="json")
    reason = "at_turn 7 does not exist (the conversation has 5 turns)"
    assert (response.status_code, response.json()) == (
        400, {"detail": f"at_turn: {reason}", "errors": {"at_turn": reason}})


# -- elsewhere ---------------------------------------------------------------------------------


def test_a_view_that_takes_no_input_does_not_turn_its_bugs_into_400s(alice, alice_api,
                                                                     monkeypatch):
    """Only the endpoints that read untrusted input word refusals; a ValueError anywhere else
    is a bug and stays a 500."""
    conversation = build_conversation(owner=alice)
    monkeypatch.setattr(views, "conversation_dict", raising(ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        alice_api.get(f"/api/v1/conversations/{conversation.pk}")
