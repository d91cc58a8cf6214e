"""streams.bodies: one typed body per event kind, the only code that knows their shapes.

The stored JSON is a public contract (it is what an export event adds after id, seq and kind):
the shapes are asserted here byte for byte, and to_body/from_body are each other's inverse."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

import providers
from streams import bodies, run  # run imports the builder, which registers its event kinds
from streams.bodies import (
    MESSAGE,
    ActivityBody,
    ArtifactBody,
    ErrorBody,
    ReasoningBody,
    ToolCallBody,
    body_json,
    load,
)
from streams.registries import EVENT_KINDS
from tests.support import PROVIDER_FIXTURES, REPO, recorded

SEARCH = ActivityBody("srv_1", "web_search", "completed", {"query": "tides"}, "2 results",
                      ({"url": "https://a.example/", "title": "A"},), "")

# What each body is stored as (and what its export event carries after id, seq and kind).
STORED = [
    (MESSAGE, "{}"),
    (ReasoningBody(), '{"redacted":false}'),
    (ReasoningBody(redacted=True), '{"redacted":true}'),
    (SEARCH, '{"activity":{"id":"srv_1","name":"web_search","state":"completed",'
             '"input":{"query":"tides"},"summary":"2 results",'
             '"sources":[{"url":"https://a.example/","title":"A"}],"error_code":""}}'),
    # an imported transition that said nothing of sources or an error code
    (ActivityBody("x", "web_fetch", "started", {}), '{"activity":{"id":"x","name":"web_fetch",'
                                                    '"state":"started","input":{},"summary":""}}'),
    (ToolCallBody("call_1", "get_weather", {"city": "Brest"}),
     '{"call":{"id":"call_1","name":"get_weather","arguments":{"city":"Brest"}}}'),
    (ToolCallBody("call_2", "now"), '{"call":{"id":"call_2","name":"now","arguments":null}}'),
    (ArtifactBody("mystery", "kept whole"), '{"type":"mystery","summary":"kept whole"}'),
    (ArtifactBody("search_entry_point", "", "<b>x</b>"),
     '{"type":"search_entry_point","summary":"","display_html":"<b>x</b>"}'),
    (ErrorBody("overloaded_error", "Overloaded"),
     '{"error":{"code":"overloaded_error","message":"Overloaded"}}'),
]


@pytest.mark.parametrize(("body", "text"), STORED)
def test_bodies_are_stored_as_the_export_contract_says(body, text):
    assert body_json(body) == text
    assert load(body.kind, text) == body
    assert type(body).from_body(orjson.loads(text)) == body


@pytest.mark.parametrize(("body", "text"), STORED)
def test_a_portable_event_reads_as_its_stored_body(body, text):
    """An export event carries its body's fields at its top level (text and the like too)."""
    event = {"id": "e", "seq": 3, "kind": body.kind, "text": "t", "incomplete": False,
             **orjson.loads(text)}
    assert load(body.kind, event) == body


def test_every_event_kind_has_one_body_type():
    assert set(EVENT_KINDS) == set(bodies.BODIES)
    for kind, cls in bodies.BODIES.items():
        assert cls.kind == kind
    with pytest.raises(ValueError, match="no body type"):
        load("teleport", "{}")


def test_a_field_of_the_wrong_type_reads_as_absent():
    """The renderer reads untrusted documents: a reader gets defaults, never an exception."""
    odd = {"activity": {"id": 7, "name": None, "state": "paused", "input": ["q"],
                        "summary": {}, "sources": [{"url": "u"}, "v", None], "error_code": 0}}
    assert ActivityBody.from_body(odd) == ActivityBody("", "", "paused", {}, "", ({"url": "u"},))
    assert ActivityBody.from_body({"activity": "x"}) == ActivityBody("", "", "")
    assert ReasoningBody.from_body({"redacted": "yes"}) == ReasoningBody(False)
    assert ToolCallBody.from_body({"call": [1]}) == ToolCallBody("", "")
    assert ArtifactBody.from_body({"type": 1, "display_html": 2}) == ArtifactBody("")
    assert ErrorBody.from_body({"error": None}) == ErrorBody("")
    for kind in bodies.BODIES:
        assert load(kind, "[1, 2]") == load(kind, "{}")  # not an object: an empty body


def _fixture_records() -> list:
    if not PROVIDER_FIXTURES.exists():
        pytest.skip(f"{PROVIDER_FIXTURES} is absent (tests read ../shared in place)")
    records = []
    for provider in ("anthropic", "openai", "google"):
        for path in sorted((PROVIDER_FIXTURES / provider).glob("*")):
            for n, rec in enumerate(recorded(provider, path.name)):
                parts = providers.parse(provider, rec.raw, rec.context)
                records += run.assemble([(f"{path.name}#{n}", parts)], on_unreadable="cut")[1]
    return records


def test_every_body_the_builder_makes_round_trips():
    records = _fixture_records()
    kinds = {r.kind for r in records}
    assert {"message", "reasoning", "hosted_activity", "provider_artifact"} <= kinds
    for record in records:
        body = record.body
        assert body.kind == record.kind
        assert type(body).from_body(body.to_body()) == body
        text = body_json(body)
        assert body_json(load(record.kind, text)) == text


# -- nobody else reads a body by key ------------------------------------------------------------

# Reading an event's body JSON by key or substring (not building a dict with those keys): what
# this module exists to replace.
_BY_KEY = re.compile(
    r"body__(?:i?contains|startswith|regex)|\.data\.get\(|\.data\["
    r"|\.get\(\"(?:activity|call|redacted|display_html|error_code)\""
    r"|\[\"(?:activity|call|redacted|display_html|error_code)\"\](?!\s*=[^=])")


def test_no_code_outside_the_bodies_module_reads_a_body_by_key():
    own = REPO / "streams" / "bodies.py"
    found = []
    for package in ("streams", "conversations", "live", "api"):
        for path in sorted(Path(REPO / package).rglob("*.py")):
            if path == own or "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _BY_KEY.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "read event bodies through streams.bodies:\n" + "\n".join(found)
