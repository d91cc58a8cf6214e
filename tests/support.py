"""Shared test helpers: where the shared fixtures live, and how to read the recordings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TURNSCOPE_SHARED", REPO.parent / "shared"))
PROVIDER_FIXTURES = SHARED / "fixtures" / "providers"
MORE_FIXTURES = SHARED / "fixtures" / "providers-more"  # the second set: server tools, MCP, ...
FRESH_FIXTURES = SHARED / "fixtures" / "providers-fresh"  # the third: xAI, Groq, DeepSeek, ...
FIXTURE_SETS = ("providers", "providers-more")
SECURITY_FIXTURES = SHARED / "fixtures" / "security"
OPENWOP_FIXTURES = SHARED / "fixtures" / "openwop"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test with the reason when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (tests read ../shared in place)")
    return path


def provider_fixture(provider: str, name: str, fixture_set: str = "providers") -> Path:
    return shared_path("fixtures", fixture_set, provider, name)


@dataclass(frozen=True)
class Recorded:
    """One recorded provider response: the raw bytes as an ingest would receive them."""

    raw: bytes
    request: dict[str, Any] | None = None
    api_version: str | None = None
    url: str = ""

    @property
    def context(self) -> Any:
        """What the recording knows besides the response, as an adapter takes it."""
        import providers

        return providers.WireContext(self.api_version, self.request, self.url or None)


def part_payloads(parts: list[Any]) -> list[Any]:
    """Every native payload the stream parts carry (block payloads and citation replays)."""
    found = []
    for part in parts:
        for name in ("payload", "replay"):
            value = getattr(part, name, None)
            if value is not None:
                found.append(value)
    return found


def cassette_responses(path: Path) -> list[Recorded]:
    """The responses of a VCR cassette, as raw wire bytes (SSE text or a JSON body)."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    out = []
    for interaction in doc["interactions"]:
        request = interaction.get("request", {})
        response = interaction["response"]
        body = response.get("body", {})
        if isinstance(body, dict) and "string" in body and body["string"]:
            raw = body["string"]
            raw = raw.encode() if isinstance(raw, str) else raw
        else:
            raw = orjson.dumps(response["parsed_body"])
        headers = {k.lower(): v for k, v in (request.get("headers") or {}).items()}
        version = headers.get("anthropic-version")
        if isinstance(version, list):
            version = version[0]
        out.append(
            Recorded(
                raw=raw,
                request=request.get("parsed_body"),
                api_version=version,
                url=request.get("uri", ""),
            )
        )
    return out


def recorded(provider: str, name: str, fixture_set: str = "providers") -> list[Recorded]:
    """Every response a fixture file holds (cassettes may hold several); ``fixture_set`` is
    the folder under ../shared/fixtures ("providers" or "providers-more")."""
    path = provider_fixture(provider, name, fixture_set)
    if path.suffix == ".yaml":
        return cassette_responses(path)
    return [Recorded(raw=path.read_bytes())]


def add_turn(conversation: Any, role: str, *records: Any, **fields: Any) -> Any:
    """A turn of ``role`` holding ``records``, appended through the store's real action
    (``record_turns``); ``fields`` are ``NewTurn``'s (status, provider, model, …)."""
    from conversations import store

    return store.record_turns([store.NewTurn(role, list(records), **fields)], conversation)[1][0]


def add_user_turn(conversation: Any, text: str) -> Any:
    """A user turn holding one message, as the live runner writes it (``store.user_turn``)."""
    from conversations import store

    return store.record_turns([store.user_turn(text)], conversation)[1][0]


def source_fingerprint(obj: Any) -> str:
    """A short hash of a function's source: a canary test pins the upstream code a patch of
    ours was written against, and fails when an upgrade changes it."""
    import hashlib
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(obj))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def sqlite_plan(connection: Any, sql: str) -> str:
    """SQLite's query plan of ``sql`` (a captured query, its parameters written in), as text:
    which index it reads."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql)
        return " ".join(str(row[-1]) for row in cursor.fetchall())
