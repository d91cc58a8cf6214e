"""Fingerprint what every recorded fixture becomes: its native export, ids and times masked.

A refactoring that must not change behaviour keeps every fingerprint:

    uv run python scripts/fixture_exports.py --write var/fixture-exports.json   # before
    uv run python scripts/fixture_exports.py --check var/fixture-exports.json   # after

Each fixture file (and each interaction of a cassette) is ingested as one agent turn into a
throwaway SQLite database and exported with the native projection; ids and timestamps (which
differ on every run by design) are replaced by their order of appearance before hashing.

``--rendered`` adds what the renderer makes of them, for a change to ``conversations/rendering``:
for every fixture and every bundled sample (``live/samples``), the page fragment of each turn,
``render_turn``'s whole result, and the Markdown and HTML exports; and for the security corpora
(``../shared/fixtures/security``) plus seeded random markdown, ``render_markdown`` without
citations, with a whole-text one and with random ranges, and both exports of documents built
from those texts. Each is its own key, so a difference names what changed.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TURNSCOPE_SHARED", REPO.parent / "shared")) / "fixtures"
SETS = ("providers", "providers-more")

_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(rb'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"')
# Rendered text shows times unquoted ("created 2025-01-01T00:00:00Z").
_BARE_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_UUID_TEXT = re.compile(_UUID.pattern.decode())
_BARE_TIME_TEXT = re.compile(_BARE_TIME.pattern.decode())
RANDOM_DOCUMENTS = 3000  # seeded random markdown texts in the render corpus


def _setup() -> None:
    tmp = tempfile.mkdtemp(prefix="turnscope-fingerprint-")
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/db.sqlite3"
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    sys.path.insert(0, str(REPO))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    logging.disable(logging.INFO)  # one line per ingested turn would drown the result


def _masked(data: bytes) -> bytes:
    seen: dict[bytes, bytes] = {}

    def mask(match: re.Match[bytes]) -> bytes:
        return seen.setdefault(match.group(0), b"id-%d" % len(seen))

    return _TIME.sub(b'"time"', _UUID.sub(mask, data))


def _masked_rendered(data: bytes) -> bytes:
    seen: dict[bytes, bytes] = {}

    def mask(match: re.Match[bytes]) -> bytes:
        return seen.setdefault(match.group(0), b"id-%d" % len(seen))

    return _BARE_TIME.sub(b"time", _UUID.sub(mask, data))


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(b"%d:" % len(part))
        digest.update(part)
    return digest.hexdigest()


def _stable(value: object) -> bytes:
    """A dataclass tree as JSON with ids and times masked in order of appearance. Sets are
    sorted after masking (their order varies by process); dicts keep their order."""
    import dataclasses

    import orjson

    seen: dict[str, str] = {}

    def mask(text: str) -> str:
        text = _UUID_TEXT.sub(lambda m: seen.setdefault(m.group(0), f"id-{len(seen)}"), text)
        return _BARE_TIME_TEXT.sub("time", text)

    def plain(v: object) -> object:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, dict):
            return {mask(str(k)): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, (set, frozenset)):
            return sorted(orjson.dumps(plain(x)).decode() for x in v)
        if isinstance(v, str):
            return mask(str(v))
        return v

    return orjson.dumps(plain(value))


def _rendered(conversation: object, key: str, out: dict[str, str]) -> None:
    """The page fragment, ``render_turn`` result and both exports of one conversation."""
    from conversations.projections import conversation_dict, export_document
    from conversations.reading import turn_views
    from conversations.rendering import render_turn

    doc = conversation_dict(conversation, "portable")  # type: ignore[arg-type]
    pages = [view.html.encode() for view in turn_views(conversation)]  # type: ignore[arg-type]
    turns = [_stable(render_turn(turn)) for turn in doc["turns"]]  # masked already
    out[f"{key}/page"] = _digest(*(_masked_rendered(p) for p in pages))
    out[f"{key}/render_turn"] = _digest(*turns)
    for fmt in ("markdown", "html"):
        text = export_document(conversation, fmt)  # type: ignore[arg-type]
        out[f"{key}/{fmt}"] = _digest(_masked_rendered(text))


def _groups(directory: Path) -> list[tuple[str, list[Path]]]:
    """Fixture files, with a pause_turn interaction and its continuation as one group."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    groups: list[tuple[str, list[Path]]] = []
    for path in files:
        if ".interaction1.continuation" in path.name:
            continue
        group = [path]
        if ".interaction0.pause_turn" in path.name:
            twin = path.name.replace(".interaction0.pause_turn", ".interaction1.continuation")
            if (directory / twin).exists():
                group.append(directory / twin)
        groups.append((path.name, group))
    return groups


def fingerprints(rendered: bool = False) -> dict[str, str]:
    _setup()
    from conversations.ingest import ResponseFile, ingest
    from conversations.projections import export_json
    from tests.support import cassette_responses

    out: dict[str, str] = {}
    for fixture_set in SETS:
        for provider_dir in sorted((SHARED / fixture_set).iterdir()):
            if not provider_dir.is_dir() or provider_dir.name == "LICENSES":
                continue
            provider = provider_dir.name
            for name, paths in _groups(provider_dir):
                key = f"{fixture_set}/{provider}/{name}"
                if paths[0].suffix == ".yaml":
                    responses = [
                        [ResponseFile(f"{name}#{i}", r.raw, r.context)]
                        for i, r in enumerate(cassette_responses(paths[0]))
                    ]
                else:
                    responses = [[ResponseFile(p.name, p.read_bytes()) for p in paths]]
                digest = hashlib.sha256()
                for i, files in enumerate(responses):
                    try:
                        summary = ingest(provider, files)
                    except Exception as exc:  # a refusal is part of the fingerprint too
                        digest.update(f"refused: {type(exc).__name__}: {exc}".encode())
                        continue
                    digest.update(_masked(export_json(summary.conversation, "native")))
                    if rendered:
                        _rendered(summary.conversation, f"rendered/{key}#{i}", out)
                out[key] = digest.hexdigest()
    if rendered:
        _samples(out)
        _corpus(out)
    return out


def _samples(out: dict[str, str]) -> None:
    from conversations.ingest import ResponseFile, ingest
    from live.bundled import samples

    for sample in samples():
        summary = ingest(
            sample.provider,
            [ResponseFile(r.name, r.raw.encode(), r.context()) for r in sample.responses],
            title=sample.title,
            prompt=sample.prompt,
        )
        _rendered(summary.conversation, f"rendered/samples/{sample.slug}", out)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _corpus_texts() -> dict[str, list[str]]:
    """Texts to render: every string of the security corpora (the pathological inputs are
    recipes, built and timed by their own test), whole files, and seeded random markdown."""
    import random

    import orjson

    from tests.rendering.test_properties import MARKDOWN_PIECES

    security = SHARED / "security"
    sets: dict[str, list[str]] = {}
    for path in sorted(security.rglob("*")):
        if not path.is_file() or "LICENSES" in path.parts or path.name == "README.md":
            continue
        if path.name == "markdown_pathological_inputs.json":
            continue
        name = str(path.relative_to(security))
        text = path.read_text(errors="replace")
        if path.suffix == ".json":
            sets[name] = _strings(orjson.loads(text))
        elif path.suffix == ".md":
            sets[name] = [text, *text.split("\n.\n")]
        else:
            sets[name] = [text, *text.splitlines()]
    rng = random.Random(20240610)
    words = ["alpha", "beta", "gamma", "42", "é", "👍🏽", " ", "\n", "\n\n"]
    for batch in range(RANDOM_DOCUMENTS // 100):
        sets[f"random/{batch}"] = [
            "".join(rng.choice(MARKDOWN_PIECES if rng.random() < 0.6 else words)
                    for _ in range(rng.randrange(1, 80)))
            for _ in range(100)
        ]
    return sets


def _corpus(out: dict[str, str]) -> None:
    import random

    from conversations.rendering import Cite, render_export, render_markdown

    for name, texts in _corpus_texts().items():
        rng = random.Random(name)
        plain, whole, ranged = [], [], []
        events = []
        for i, text in enumerate(texts):
            length = len(text)
            spans = []
            for n in range(rng.randrange(0, 6)):
                a, b = rng.randrange(length + 1), rng.randrange(length + 1)
                spans.append((n % 4 + 1, min(a, b), max(a, b), rng.random() < 0.2))
            cites = [Cite(n, a, b, inc, f"Title {n}" if n % 2 else "") for n, a, b, inc in spans]
            plain.append(render_markdown(text).encode())
            whole.append(render_markdown(text, [Cite(1, title="T")], anchor_prefix="w-").encode())
            ranged.append(render_markdown(text, cites, anchor_prefix="src-x-").encode())
            attributions = [
                {"source": {"url": f"https://s{n}.example/{n}", "title": f"Title {n}"},
                 "excerpt": f"quoted {n}", "range": {"start": a, "end": b}, "incomplete": inc}
                for n, a, b, inc in spans
            ]
            events.append({"id": f"e{i}", "seq": i, "kind": "message", "text": text,
                           "incomplete": False, "attributions": attributions})
        out[f"render/{name}/plain"] = _digest(*plain)
        out[f"render/{name}/whole"] = _digest(*whole)
        out[f"render/{name}/ranges"] = _digest(*ranged)
        # Texts in turns of 10 consecutive message events (so runs merge), one document.
        turns = [
            {"id": f"turn-{k}", "index": k, "role": "agent", "status": "complete",
             "end_reason": "end_turn", "events": events[k * 10:(k + 1) * 10]}
            for k in range((len(events) + 9) // 10)
        ]
        doc = {"format": "turnscope.conversation", "version": 1, "projection": "portable",
               "conversation": {"id": "c", "title": name, "created_at": None,
                                "forked_from": None},
               "turns": turns}
        out[f"render/{name}/markdown"] = _digest(render_export(doc, "markdown").encode())
        out[f"render/{name}/html"] = _digest(render_export(doc, "html").encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="write the fingerprints to this file")
    mode.add_argument("--check", type=Path, help="compare with the fingerprints in this file")
    parser.add_argument("--rendered", action="store_true",
                        help="also fingerprint the rendered pages and exports (see above)")
    args = parser.parse_args()
    if not SHARED.exists():
        print(f"{SHARED} is absent: nothing to fingerprint", file=sys.stderr)
        return 2
    import orjson

    found = fingerprints(args.rendered)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_bytes(orjson.dumps(found, option=orjson.OPT_INDENT_2 |
                                            orjson.OPT_SORT_KEYS))
        print(f"{len(found)} fixtures fingerprinted into {args.write}")
        return 0
    expected = orjson.loads(args.check.read_bytes())
    changed = sorted(k for k in expected.keys() | found.keys()
                     if expected.get(k) != found.get(k))
    for key in changed:
        print(f"changed: {key}")
    print(f"{len(found)} fixtures, {len(changed)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
