"""The OpenAPI schema, the self-hosted docs UI, and schemathesis against the running app.

schemathesis drives the WSGI app in-process, authenticated with a token, in two passes:
property-based cases generated from the schema, and explicit cases carrying strings from the
security corpus (../shared/fixtures/security) in every string parameter and in request bodies.
Every response must be a non-5xx that conforms to the schema (status, content type, body).
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import orjson
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conversations.projections import export_json
from tests.api.conftest import build_conversation, token_client
from tests.support import shared_path

pytestmark = pytest.mark.django_db

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]
FUZZ_EXAMPLES = 12  # per operation: keeps the whole tests/api run well under 90 s
CORPUS_STRINGS = 48
# Provider wire text (SSE, JSON lines) goes on the wire as it is, like text/plain.
schemathesis.serializer.alias(["application/x-ndjson", "text/event-stream"], "text/plain")


def api_schema() -> dict[str, Any]:
    raw = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(raw))


def security_strings(count: int = CORPUS_STRINGS) -> list[str]:
    """A fixed, varied sample of the security corpus: naughty strings, XSS vectors, polyglots,
    and this project's own vectors."""
    folder = shared_path("fixtures", "security")
    pool: list[str] = []
    pool += json.loads((folder / "blns.json").read_text())
    pool += [v["payload"] for v in json.loads((folder / "app_specific_vectors.json").read_text())
             ["vectors"] if "payload" in v]
    pool += (folder / "payloadsallthethings" / "XSS_Polyglots.txt").read_text().splitlines()
    owasp = json.loads((folder / "owasp_xss_filter_evasion_vectors.json").read_text())
    pool += [s for values in owasp["inline_lists"].values() for s in values]
    pool = [s for s in dict.fromkeys(pool) if isinstance(s, str) and s.strip()]
    rng = random.Random(5)  # the same sample every run
    sample = rng.sample(pool, min(count, len(pool)))
    return [*sample, "\x00", "a\x00b", "💩" * 50, "‮evil", "%00", "../../etc/passwd"]


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch, settings):
    """The fuzzer sends turns too: never with a real key to a real provider."""
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    settings.TURNSCOPE_RECORDED_UPSTREAM = ""


@pytest.fixture
def wsgi_app():
    """The real WSGI app. Django's test client stops request signals from closing the test's
    connection; do the same, or the first request would end the test transaction."""
    from turnscope.wsgi import application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield application
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def api(alice, wsgi_app, monkeypatch):
    # Hundreds of requests a minute from one user: throttling is tested elsewhere.
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(SimpleRateThrottle, "allow_request", lambda self, request, view: True)
    schema = schemathesis.openapi.from_dict(api_schema())
    schema.app = wsgi_app
    client = token_client(alice)
    headers = {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}
    conversation = build_conversation(owner=alice)
    return schema, headers, conversation


def operations(schema) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


# -- the schema itself -------------------------------------------------------------------------


def test_schema_generates_without_warnings_and_covers_every_endpoint(capsys):
    from drf_spectacular.drainage import GENERATOR_STATS

    GENERATOR_STATS.reset()
    schema = api_schema()
    assert not GENERATOR_STATS._warn_cache and not GENERATOR_STATS._error_cache
    paths = set(schema["paths"])
    assert paths == {
        "/api/v1/capabilities", "/api/v1/conversations", "/api/v1/conversations/import",
        "/api/v1/conversations/ingest", "/api/v1/conversations/{id}",
        "/api/v1/conversations/{id}/turns", "/api/v1/conversations/{id}/events",
        "/api/v1/conversations/{id}/export", "/api/v1/conversations/{id}/ingest",
        "/api/v1/conversations/{id}/fork",
        "/api/v1/conversations/{id}/turns/{index}/fork",
        "/api/v1/conversations/{id}/turns/{index}/rerun",
        "/api/v1/conversations/{id}/turns/{index}/stop",
        "/api/v1/conversations/{id}/shares", "/api/v1/shares", "/api/v1/shares/{token}",
        "/api/v1/sources", "/api/v1/sources/models",
    }
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert operation.get("security"), f"{method} {path} is documented as open"


def test_schema_and_docs_are_served_to_signed_in_users(alice, client):
    assert client.get("/api/v1/schema").status_code in (401, 403)
    assert client.get("/api/v1/docs").status_code == 302
    client.login(username="alice", password="pw-alice-123")
    schema = client.get("/api/v1/schema?format=json")
    assert schema.status_code == 200
    assert set(orjson.loads(schema.content)["paths"]) == set(api_schema()["paths"])
    docs = client.get("/api/v1/docs")
    assert docs.status_code == 200
    html = docs.content.decode()
    # self-hosted (sidecar), no CDN, no inline script or style: the strict CSP holds
    assert "cdn" not in html.lower() and "http://" not in html and "https://" not in html
    assert "<script>" not in html and "<style" not in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    script = client.get("/api/v1/docs?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_both_ingests_document_the_answer_to_an_ingest_sent_again():
    """A 200 naming what the first ingest became (the turn, for an ingest into a
    conversation), and the ``copy`` parameter that stores it again."""
    paths = api_schema()["paths"]
    for path in ("/api/v1/conversations/ingest", "/api/v1/conversations/{id}/ingest"):
        operation = paths[path]["post"]
        assert {"200", "201"} <= set(operation["responses"]), path
        assert "copy" in {p["name"] for p in operation["parameters"]}, path
    turn = paths["/api/v1/conversations/{id}/ingest"]["post"]["responses"]["200"]
    ref = turn["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = api_schema()["components"]["schemas"][ref]["properties"]
    assert {"already_imported", "conversation", "turn", "url"} <= set(fields)


# -- schemathesis ------------------------------------------------------------------------------


@pytest.mark.slow
def test_schemathesis_fuzz(api):
    """Property-based cases from the schema, for every operation: no 5xx, responses conform."""
    schema, headers, conversation = api
    ran = []
    # DELETE last: the other operations run against a conversation that still exists.
    for operation in sorted(operations(schema), key=lambda o: o.method.upper() == "DELETE"):
        strategy = operation.as_strategy(path_parameters={"id": str(conversation.pk)})

        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def run(case):
            case.call_and_validate(headers=headers, checks=CHECKS)

        run()
        ran.append(operation.label)
    assert len(ran) == 22  # every operation of the API, the Sources ones included


def import_document_with(text: str) -> dict[str, Any]:
    doc = orjson.loads(export_json(build_conversation(owner=None), "portable"))
    for turn in doc["turns"]:
        turn["id"] = f"{turn['id'][:-8]}{random.getrandbits(32):08x}"
        for event in turn["events"]:
            event["id"] = f"{event['id'][:-8]}{random.getrandbits(32):08x}"
    doc["conversation"]["id"] = f"{doc['conversation']['id'][:-8]}{random.getrandbits(32):08x}"
    doc["conversation"]["title"] = text[:300]
    message = doc["turns"][1]["events"][2]
    message["text"] = text + message["text"]
    for a in message["attributions"]:
        a["source"] = {"url": text, "title": text}
        a["excerpt"] = text
        a.pop("range", None)
    return doc


def anthropic_stream_with(text: str) -> bytes:
    lines = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message",
                                              "role": "assistant", "model": "claude-x",
                                              "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                      "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                              "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return b"\n".join(orjson.dumps(line) for line in lines) + b"\n"


@pytest.mark.slow
def test_schemathesis_security_corpus(api):
    """Explicit cases: corpus strings in every string query parameter of every operation, and
    inside import documents and ingest bodies."""
    schema, headers, conversation = api
    strings = security_strings()
    calls = 0
    for operation in operations(schema):
        string_params = [p for p in operation.definition.raw.get("parameters", [])
                         if p["in"] == "query" and p.get("schema", {}).get("type") == "string"]
        base_query = {"provider": "anthropic"} if "ingest" in operation.path else {}
        path_parameters = {"id": str(conversation.pk)} if "{id}" in operation.path else {}
        if "{index}" in operation.path:
            path_parameters["index"] = 1
        if "{token}" in operation.path:
            path_parameters["token"] = "no-such-share-token"
        body: Any = schemathesis.core.NOT_SET
        media_type = None
        if operation.method.upper() == "POST" and "ingest" in operation.path:
            body, media_type = anthropic_stream_with("hello"), "application/x-ndjson"
        elif "fork" in operation.path:
            body, media_type = {"at_turn": 1}, "application/json"
        elif operation.path.endswith(("/turns", "/rerun")) and operation.method == "post":
            body, media_type = {"prompt": "hi", "provider": "anthropic",
                                "model": "claude-sonnet-4-5"}, "application/json"
        elif "import" in operation.path:
            body, media_type = import_document_with("x"), "application/json"
        for param, text in zip(itertools.cycle(string_params or [None]), strings, strict=False):
            query = dict(base_query)
            if param is not None:
                query[param["name"]] = text
            case = operation.Case(query=query, path_parameters=path_parameters, body=body,
                                  media_type=media_type)
            case.call_and_validate(headers=headers, checks=CHECKS)
            calls += 1
    for text in strings[:24]:
        for operation in operations(schema):
            if operation.path == "/api/v1/conversations/import":
                case = operation.Case(body=import_document_with(text),
                                      media_type="application/json")
            elif operation.path == "/api/v1/conversations/ingest":
                case = operation.Case(query={"provider": "anthropic", "title": text},
                                      body=anthropic_stream_with(text),
                                      media_type="application/x-ndjson")
            else:
                continue
            response = case.call_and_validate(headers=headers, checks=CHECKS)
            assert response.status_code in (201, 400), (text, response.text)
            calls += 1
    assert calls > 300
