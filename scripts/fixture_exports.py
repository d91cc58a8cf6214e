"""Fingerprint what every recorded fixture becomes: its native export, ids and times masked.

A refactoring that must not change behaviour keeps every fingerprint:

    uv run python scripts/fixture_exports.py --write var/fixture-exports.json   # before
    uv run python scripts/fixture_exports.py --check var/fixture-exports.json   # after

Each fixture file (and each interaction of a cassette) is ingested as one agent turn into a
throwaway SQLite database and exported with the native projection; ids and timestamps (which
differ on every run by design) are replaced by their order of appearance before hashing.
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


def fingerprints() -> dict[str, str]:
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
                for files in responses:
                    try:
                        summary = ingest(provider, files)
                    except Exception as exc:  # a refusal is part of the fingerprint too
                        digest.update(f"refused: {type(exc).__name__}: {exc}".encode())
                        continue
                    digest.update(_masked(export_json(summary.conversation, "native")))
                out[key] = digest.hexdigest()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="write the fingerprints to this file")
    mode.add_argument("--check", type=Path, help="compare with the fingerprints in this file")
    args = parser.parse_args()
    if not SHARED.exists():
        print(f"{SHARED} is absent: nothing to fingerprint", file=sys.stderr)
        return 2
    import orjson

    found = fingerprints()
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
