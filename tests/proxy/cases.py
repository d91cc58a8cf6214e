"""The recordings the proxy tests serve: every provider fixture in ``../shared/fixtures/providers``
that a provider SDK can ask for (Gemini's Interactions API is another endpoint: left out) and
the bundled samples, each with how an SDK asks for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from live import bundled
from tests.support import PROVIDER_FIXTURES, cassette_responses


@dataclass(frozen=True)
class Case:
    id: str
    provider: str
    raw: bytes
    stream: bool
    api: str = ""  # openai: "responses" or "chat"
    model: str = ""


def _is_stream(raw: bytes) -> bool:
    head = raw.lstrip()[:6]
    if head[:1] in (b"{", b"["):
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError:
            return True  # JSON lines
        return False
    return True


def _model(provider: str, raw: bytes, uri: str = "") -> str:
    if provider == "google" and "/models/" in uri:
        return uri.split("/models/")[1].split(":")[0]
    return {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5-mini",
            "google": "gemini-2.5-pro"}[provider]


def cases() -> list[Case]:
    found: list[Case] = []
    for provider in ("anthropic", "openai", "google"):
        folder = PROVIDER_FIXTURES / provider
        for path in sorted(folder.glob("*")) if folder.is_dir() else []:
            if "interactions-" in path.name:
                continue  # the Gemini Interactions API: not an endpoint the proxy records
            if path.suffix == ".yaml":
                for n, recorded in enumerate(cassette_responses(path)):
                    api = "chat" if "chat/completions" in recorded.url else "responses"
                    found.append(Case(f"{path.name}#{n}", provider, recorded.raw,
                                      _is_stream(recorded.raw), api,
                                      _model(provider, recorded.raw, recorded.url)))
            elif path.suffix in (".txt", ".json"):
                raw = path.read_bytes()
                found.append(Case(path.name, provider, raw, _is_stream(raw), "responses",
                                  _model(provider, raw)))
    for sample in bundled.samples():
        for response in sample.responses:
            raw = response.raw.encode()
            found.append(Case(f"sample:{response.name}", sample.provider, raw, _is_stream(raw),
                              "responses", _model(sample.provider, raw)))
    return found


def fixture(provider: str, name: str) -> Path:
    return PROVIDER_FIXTURES / provider / name
