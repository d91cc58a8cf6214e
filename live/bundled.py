"""The bundled sample conversations (``live/samples/``): recorded wire text written for this
project in each provider's real format, listed in ``manifest.json``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from django.db import transaction

from conversations.ingest import ResponseFile, ingest
from conversations.models import Conversation
from live.models import Recording
from live.sources import WireResponse, redacted

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"


@dataclass(frozen=True)
class Sample:
    slug: str
    title: str
    prompt: str
    provider: str
    responses: tuple[WireResponse, ...]


def samples() -> list[Sample]:
    manifest = orjson.loads((SAMPLES_DIR / "manifest.json").read_bytes())
    out = []
    for entry in manifest["samples"]:
        request = {"tools": entry.get("tools", [])}
        responses = tuple(
            WireResponse(name=name, raw=(SAMPLES_DIR / name).read_text(),
                         api_version=entry.get("api_version"), endpoint=entry.get("endpoint"),
                         request=request)
            for name in entry["files"]
        )
        out.append(Sample(entry["slug"], entry["title"], entry["prompt"], entry["provider"],
                          responses))
    return out


def sample(slug: str) -> Sample:
    for s in samples():
        if s.slug == slug:
            return s
    raise KeyError(f"no bundled sample {slug!r}")


def load(owner: Any, only: list[str] | None = None) -> list[tuple[Sample, Conversation, bool]]:
    """Ingest each sample as a conversation owned by ``owner``, once: (sample, conversation,
    created). A sample already loaded for that owner is found by its recording."""
    out = []
    for s in samples():
        if only and s.slug not in only:
            continue
        existing = (
            Recording.objects.filter(sample=s.slug, turn__conversation__owner=owner)
            .select_related("turn__conversation").first()
        )
        if existing:
            out.append((s, existing.turn.conversation, False))
            continue
        with transaction.atomic():
            summary = ingest(
                s.provider,
                [ResponseFile(r.name, r.raw.encode(), r.context()) for r in s.responses],
                owner=owner, title=s.title, prompt=s.prompt,
            )
            Recording.objects.create(
                turn=summary.turn, provider=s.provider, sample=s.slug,
                responses=orjson.dumps([r.as_dict() for r in redacted(list(s.responses))])
                .decode(),
            )
        out.append((s, summary.conversation, True))
    return out
