"""Nothing persisted, logged or shown holds a credential.

Every fixture is ingested twice: as recorded, and with credential-shaped strings planted in its
texts, titles, queries and URLs. Then the whole database (every text column of every table) and
the log output are searched for the planted secrets and for key shapes. The searches use their
own patterns and the planted strings themselves, not the redaction module's rules.
"""

from __future__ import annotations

import itertools
import logging
import re
from urllib.parse import urlencode

import orjson
import pytest
from django.apps import apps
from django.db import connection

from conversations.ingest import ResponseFile, ingest
from guards import redaction
from guards.redaction import rules
from providers.wire import DONE, read
from streams.builder import AttributionRecord, EventRecord
from streams.parts import Payload
from tests.api.conftest import fixture_turns, response_files

pytestmark = pytest.mark.django_db

# Fake credentials of real shapes. Each carries the marker "Q7xK3" (AWS keys: "Q7XK3") to
# search for; the JWT's marker sits in its base64 payload ({"sub":"Q7xK3"}).
SECRETS = [
    "sk-ant-api03-Q7xK3AnthropicKeyZZZZZZZZZZZZZ-aa_bb",
    "sk-proj-Q7xK3OpenAIProjectKeyYYYYYYYYYYYYYYYYY",
    "AIzaQ7xK3GoogleKeyXXXXXXXXXXXXXXXXXXXXX",  # AIza + 35
    "Bearer Q7xK3BearerToken0123456789abcdef",
    "ghp_Q7xK3GithubTokenWWWWWWWWWWWWWWWWWWWWWWW",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJRN3hLMyJ9.Q7xK3JwtSignatureVVVV",
    "xoxb-Q7xK3SlackToken-1234567890",
    "AKIAQ7XK3AWSKEY00000",
]
URL_SECRET = "key=AIzaQ7xK3UrlKeyUUUUUUUUUUUUUUUUUUUUUUUU"
HEADER_LINE = "Authorization: Bearer Q7xK3HeaderToken0123456789abcdef"
MARKERS = ["Q7xK3", "Q7XK3", "eyJzdWIiOiJRN3hLMyJ9"]

# Key shapes, independent of guards.redaction's rules.
KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_-]{16,}|sk-proj-[A-Za-z0-9_-]{20,}|\bAIza[0-9A-Za-z_-]{35}\b|"
    r"\bghp_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b|"
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.|"
    r"(?i:bearer)\s+[A-Za-z0-9._~+/-]*[0-9][A-Za-z0-9._~+/-]{15,}"
)
assert len(SECRETS[2]) == 39


def assert_secret(value: str) -> None:
    assert redaction.looks_secret(value), value


def plant(raw: bytes) -> tuple[bytes, int]:
    """The same response with a secret appended to every text, title and query, and a key
    parameter added to every URL; re-encoded as JSON lines (or a JSON body). Also returns how
    many secrets were planted."""
    wire = read(raw)
    secrets = itertools.cycle([*SECRETS, HEADER_LINE])
    planted = 0

    def walk(value, key=None):
        nonlocal planted
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and value:
            if key in ("text", "delta", "thinking"):
                planted += 1
                return f"{value} {next(secrets)}\n"
            if key in ("title", "query", "cited_text"):
                planted += 1
                return f"{value} {next(secrets)}"
            if key in ("url", "uri") and value.startswith("http"):
                planted += 1
                return value + ("&" if "?" in value else "?") + URL_SECRET
        return value

    frames = [walk(f.data) for f in wire.frames if f.data is not DONE]
    if wire.kind == "body":
        return orjson.dumps(frames[0]), planted
    return b"".join(orjson.dumps(f) + b"\n" for f in frames), planted


def database_text() -> list[tuple[str, str, str]]:
    """(table, column, value) for every text-ish column of every table, except the auth tables,
    which hold credentials by design (password hashes, session data, API token keys)."""
    skip = {"auth_user", "django_session", "authtoken_token"}
    out = []
    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            table = model._meta.db_table
            if table in skip:
                continue
            columns = [f.column for f in model._meta.concrete_fields
                       if f.get_internal_type() in ("CharField", "TextField", "JSONField")]
            for column in columns:
                cursor.execute(f'SELECT "{column}" FROM "{table}"')
                out += [(table, column, str(v)) for (v,) in cursor.fetchall() if v]
    return out


def assert_clean(texts: list[tuple[str, str, str]]) -> None:
    leaks = []
    for table, column, value in texts:
        for tail in MARKERS:
            if tail in value:
                i = value.index(tail)
                leaks.append(f"{table}.{column}: …{value[max(0, i - 40):i + 40]}…")
        match = KEY_SHAPES.search(value)
        if match:
            leaks.append(f"{table}.{column}: key shape {match.group()!r}")
    assert not leaks, "\n".join(leaks[:20])


def test_planted_secrets_have_the_shapes_the_redactor_knows():
    for secret in [*SECRETS, URL_SECRET, HEADER_LINE]:
        assert_secret(secret)
        assert KEY_SHAPES.search(secret) or secret.startswith("key=")
        assert any(marker in secret for marker in MARKERS)


@pytest.mark.parametrize("provider, label, names", fixture_turns(),
                         ids=[label for _p, label, _n in fixture_turns()])
def test_every_fixture_as_recorded_and_with_planted_secrets(alice, caplog, provider, label,
                                                            names):
    caplog.set_level(logging.DEBUG)
    planted = 0
    for planting in (False, True):
        conversation = None
        for files in response_files(provider, names):
            if planting:
                changed = [(f, *plant(f.raw)) for f in files]
                files = [ResponseFile(f.name, raw, f.context) for f, raw, _n in changed]
                planted += sum(n for _f, _raw, n in changed)
            summary = ingest(provider, files, owner=alice, conversation=conversation)
            conversation = summary.conversation
            assert "\n".join(summary.lines())  # the command's summary: checked below too
            logging.getLogger("turnscope.test").info("\n".join(summary.lines()))
    texts = database_text()
    if planted:
        assert any("[REDACTED]" in v for _t, _c, v in texts), "planted, yet nothing redacted?"
    assert_clean(texts)
    assert_clean([("log", "", caplog.text)])


def test_api_ingest_and_error_messages_never_echo_a_secret(alice_api):
    good = b"\n".join(orjson.dumps(line) for line in [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                              "model": "claude-x", "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": f"use {SECRETS[1]} ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ])
    query = urlencode({"provider": "anthropic", "prompt": f"my key: {SECRETS[4]}",
                       "title": HEADER_LINE, "endpoint": f"https://x.example/v1?{URL_SECRET}"})
    response = alice_api.generic("POST", f"/api/v1/conversations/ingest?{query}", good,
                                 content_type="application/x-ndjson")
    assert response.status_code == 201
    conversation_id = response.json()["conversation"]
    detail = alice_api.get(f"/api/v1/conversations/{conversation_id}?projection=native")
    assert "Q7xK3" not in detail.content.decode()
    assert detail.json()["conversation"]["title"] == "Authorization: [REDACTED]"
    assert detail.json()["turns"][0]["events"][0]["text"] == "my key: [REDACTED]"
    for bad in (
        f'{{"type": "message_start", "message": "{SECRETS[0]}"}}\n{{broken {SECRETS[2]}\n',
        f"not json at all {SECRETS[3]}",
        f'{{"type": "{SECRETS[1]}"}}',
    ):
        response = alice_api.generic("POST", "/api/v1/conversations/ingest?provider=anthropic",
                                     bad.encode(), content_type="application/x-ndjson")
        assert response.status_code in (201, 400)  # an unknown event type is kept, not an error
        assert "Q7xK3" not in response.content.decode()
    assert_clean(database_text())


def test_import_redacts_and_keeps_ranges_on_the_same_words(alice_api):
    from tests.api.conftest import build_conversation

    doc = orjson.loads(__import__("conversations.projections", fromlist=["x"]).export_json(
        build_conversation(owner=None), "native"))
    doc["conversation"]["id"] = "00000000-0000-4000-8000-00000000abcd"
    for turn in doc["turns"]:
        turn["id"] = turn["id"][:-4] + "0a0a"
        for event in turn["events"]:
            event["id"] = event["id"][:-4] + "0b0b"
    message = doc["turns"][1]["events"][2]
    message["text"] = f"Key {SECRETS[0]} then: It is sunny in Paris today."
    shift = len(f"Key {SECRETS[0]} then: ")
    message["attributions"][0]["range"] = {"start": 6 + shift, "end": 11 + shift}
    message["attributions"][1]["source"]["url"] += "?" + URL_SECRET
    doc["conversation"]["title"] = HEADER_LINE
    response = alice_api.post("/api/v1/conversations/import", doc, format="json")
    assert response.status_code == 201, response.content
    stored = alice_api.get(f"/api/v1/conversations/{response.json()['imported'][0]['id']}"
                           ).json()
    text = stored["turns"][1]["events"][2]["text"]
    span = stored["turns"][1]["events"][2]["attributions"][0]["range"]
    assert text[span["start"]:span["end"]] == "sunny"
    assert text.startswith("Key [REDACTED] then:")
    assert_clean(database_text())


# -- the redactor, directly ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Bearer tokens are a kind of authentication.",  # prose
    "input_tokens: 123, output_tokens: 456",
    "the task-management-system-for-large-teams project",  # sk- inside a word
    "ZXlKaGJHY2lPaUpJVXpJMU5pSjkuZXlKemRXSWlPaUl4TWpNME5Ua2lmUSsk-proj-abcdefghijklmnopqrstuvw",
    "EqQBCkYIBxgCKkBsk-ant-api03-signature-like-blob-continues-here",  # inside a blob
    "https://example.com/search?q=keys&page=2",
    "AIzaTooShort",
])
def test_the_redactor_leaves_ordinary_text_and_opaque_blobs_alone(text):
    assert redaction.redact_text(text) == text
    assert redaction.redact_bytes(text.encode()) == text.encode()


def test_the_redactor_maps_ranges_across_redactions():
    text = f"A {SECRETS[0]} B {SECRETS[3]} C"
    redacted, remap = redaction.redact_with_map(text)
    assert redacted == "A [REDACTED] B Bearer [REDACTED] C"
    for word in ("A", "B", "C"):
        start = text.index(f" {word}") + 1 if word != "A" else 0
        assert redacted[remap(start, False):remap(start + 1, True)] == word
    inside = text.index("Q7xK3")
    assert redacted[remap(inside, False):remap(inside + 3, True)] == "[REDACTED]"


def test_records_keep_attribution_ranges_on_their_words():
    text = f"see {SECRETS[1]}: sunny"
    start = text.index("sunny")
    record = EventRecord("message", text=text, attributions=[
        AttributionRecord(f"https://x.example/?{URL_SECRET}", SECRETS[3], start=start,
                          end=start + 5, replay=Payload("p", "f", "v", {"k": SECRETS[2]}))],
        payload=Payload("p", "f", "v", {"text": text}))
    [out] = redaction.redact_records([record])
    a = out.attributions[0]
    assert out.text[a.start:a.end] == "sunny"
    assert "Q7xK3" not in orjson.dumps([out.text, a.url, a.title, a.replay.value,
                                      out.payload.value]).decode()


def test_payload_fragments_redact_escaped_keys_and_keep_clean_bytes():
    clean = orjson.Fragment(b'{"a": "b",  "sig": "EqQB/+x=="}')
    assert redaction.redact_fragment(clean) is clean
    escaped = orjson.Fragment(b'{"a": "\\u0073k-ant-api03-Q7xK3EscapedKeyZZZZZZZ"}')
    assert b"Q7xK3" not in orjson.dumps(redaction.redact_fragment(escaped))


def test_logging_filter():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key %s", (SECRETS[0],), None)
    redaction.RedactingFilter().filter(record)
    assert record.getMessage() == "key [REDACTED]"


def _careful_path_changes(value) -> bool:
    """What every rule would do with no prefilter in front of it."""
    compiled = rules.BYTES_RULES if isinstance(value, bytes) else rules.TEXT_RULES
    return any(rule.sub(value)[1] for rule in compiled)


@pytest.mark.parametrize("secret", [*SECRETS, URL_SECRET, HEADER_LINE])
@pytest.mark.parametrize("frame", [
    "{}", '"{}"', "({})", "text: {}.", '{{"a": "{}"}}', "line one\n{}\nline three",
    "\u00e9t\u00e9 {} \u4e2d", "authorization: {}",
])
def test_the_prefilter_never_hides_what_a_rule_would_redact(secret, frame):
    text = frame.format(secret)
    assert _careful_path_changes(text) and redaction.may_hold_secret(text)
    assert redaction.may_hold_secret(text.encode())
    assert redaction.redact_text(text) != text


def test_the_prefilter_agrees_with_the_rules_on_every_corpus_line():
    """Over the security corpora and every provider fixture, line by line: whenever a rule
    would change a line, the prefilter lets it through (it may let more through, never less)."""
    from tests.support import PROVIDER_FIXTURES, SECURITY_FIXTURES

    if not SECURITY_FIXTURES.exists() or not PROVIDER_FIXTURES.exists():
        pytest.skip(f"shared fixtures are absent ({SECURITY_FIXTURES.parent})")
    lines = 0
    for path in [*SECURITY_FIXTURES.rglob("*"), *PROVIDER_FIXTURES.rglob("*")]:
        if not path.is_file():
            continue
        for line in path.read_bytes().splitlines():
            lines += 1
            if _careful_path_changes(line):
                assert redaction.may_hold_secret(line), line[:200]
            text = line.decode("utf-8", "replace")
            if _careful_path_changes(text):
                assert redaction.may_hold_secret(text), text[:200]
    assert lines > 1000
