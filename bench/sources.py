"""The Sources pages and API on bench.scale's store, against the login page as the floor
measured in the same rounds.

    uv run python -m bench.sources [--conversations 100000] [--repeat 15] [--json]
    uv run python -m bench.sources --ingest [--files 2000] [--runs 3]

``bench.scale`` measures these pages with the rest (``targets`` below); this command measures
only them, on the store ``bench.scale`` built and cached (it builds it first when it is
missing, as ``bench.scale`` does; PostgreSQL when ``DATABASE_URL`` is set, after SQLite).
Each page and API call, unfiltered and filtered (a provider, a model, a date range, the list's
search, a domain's hosts and citing turns, a URL's citing turns), for the owner and for staff
(everyone's); target <= 150 ms each, on both databases.

``--ingest``: what keeping the Sources rows costs bulk ingest (``ingest_each``, as ``manage.py
ingest --each`` and bench.scale's build do), on a fresh SQLite store: the same files ingested
with the rows kept and with their writing switched off (``source_index``'s gathering and
write made no-ops), alternately, best of ``--runs`` each. Target: at most 10 % slower.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any
from urllib.parse import urlencode


def targets(user: Any, admin: Any, owner: Any) -> dict[str, tuple[Any, str]]:
    """The Sources requests to time: (client, URL) by name."""
    from conversations.source_models import SourceUse

    rows = SourceUse.objects.filter(conversation__owner=owner)
    site = (rows.exclude(site="").values_list("site", flat=True).order_by("-id").first()
            or "example.com")
    url = rows.exclude(key="").values_list("key", flat=True).order_by("-id").first() or "x"
    served = (rows.exclude(model="").values_list("provider", "model").order_by("-id").first()
              or ("anthropic", "x"))
    day = rows.order_by("created_at").values_list("created_at", flat=True).first()
    since = day.date().isoformat() if day else "2026-01-01"
    provider, model = served
    return {
        "sources: domains": (user, "/sources/"),
        "sources: domains, staff": (admin, "/sources/"),
        "sources: domains by provider": (user, "/sources/?" + urlencode({"provider": provider})),
        "sources: domains by model+dates": (user, "/sources/?" + urlencode(
            {"model": model, "since": since, "until": since})),
        "sources: domains, search": (user, "/sources/?q=weather"),
        "sources: domains, sorted by name": (user, "/sources/?sort=name&order=asc"),
        "sources: URLs": (user, "/sources/urls/"),
        "sources: URLs, sorted by last seen": (user, "/sources/urls/?sort=last_seen"),
        "sources: a domain's hosts+turns": (user, "/sources/hosts/?" + urlencode(
            {"domain": site})),
        "sources: a URL's turns": (user, "/sources/turns/?" + urlencode({"url": url})),
        "sources: models": (user, "/sources/models/"),
        "sources: models by provider": (user, "/sources/models/?" + urlencode(
            {"provider": provider})),
        "sources: CSV of domains": (user, "/sources/?format=csv"),
        "API sources": (user, "/api/v1/sources"),
        "API sources by url, model": (user, "/api/v1/sources?" + urlencode(
            {"group": "url", "model": model})),
        "API sources, staff": (admin, "/api/v1/sources"),
        "API sources/models": (user, "/api/v1/sources/models"),
        "API sources/models, dates": (user, "/api/v1/sources/models?" + urlencode(
            {"since": since})),
    }


def measure(size: int, repeat: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from bench.scale import OWNER, STAFF, timed_rounds
    from conversations.models import Conversation
    from conversations.source_models import SearchUse, SourceUse

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    User = get_user_model()
    owner, staff = User.objects.get(username=OWNER), User.objects.get(username=STAFF)
    anonymous, user, admin = Client(), Client(), Client()
    user.force_login(owner)
    admin.force_login(staff)
    wanted = {"login page (floor)": (anonymous, "/accounts/login/"),
              **targets(user, admin, owner)}
    return {"database": connection.vendor, "conversations": Conversation.objects.count(),
            "source_rows": SourceUse.objects.count(), "search_rows": SearchUse.objects.count(),
            "requests": timed_rounds(wanted, repeat, floor="login page (floor)")}


def ingest_cost(files: int, runs: int) -> dict[str, float]:
    """Seconds per ``files`` conversations, with and without the Sources rows (best of
    ``runs``, alternated so that the machine's swings fall on both)."""
    import tempfile
    import time
    from pathlib import Path

    os.environ.pop("DATABASE_URL", None)
    os.environ["SQLITE_PATH"] = str(Path(tempfile.mkdtemp(prefix="bench-sources-")) / "s.db")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from bench.scale import _responses
    from conversations import source_index
    from conversations.ingest import ResponseFile, ingest_each

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench-ingest")
    responses = _responses()
    by_provider: dict[str, list[Any]] = {}
    for n in range(files):
        provider, response = responses[n % len(responses)]
        by_provider.setdefault(provider, []).append(
            ResponseFile(f"{response.name}@{n}", response.raw, response.context))
    kept = (source_index.Pending.event, source_index.Pending.attribution, source_index.write)

    def switch(on: bool) -> None:
        if on:
            source_index.Pending.event, source_index.Pending.attribution = kept[0], kept[1]
            source_index.write = kept[2]
        else:
            source_index.Pending.event = lambda self, *a: None  # type: ignore[method-assign]
            source_index.Pending.attribution = lambda self, *a: None  # type: ignore[method-assign]
            source_index.write = lambda *a: None

    # CPU time (SQLite works in this process): on a shared machine wall time is mostly the
    # wait for a core, and swung the ratio from 1.03 to 1.46 between runs.
    best = {"with": float("inf"), "without": float("inf")}
    wall = {"with": float("inf"), "without": float("inf")}
    for _ in range(runs):
        for name in ("without", "with"):
            switch(name == "with")
            started, cpu = time.perf_counter(), time.process_time()
            for provider, batch in by_provider.items():
                for _result in ingest_each(provider, batch, owner=owner, copy=True):
                    pass
            best[name] = min(best[name], time.process_time() - cpu)
            wall[name] = min(wall[name], time.perf_counter() - started)
    switch(True)
    return {**best, "ratio": best["with"] / best["without"], "files": files,
            "wall_with": wall["with"], "wall_without": wall["without"]}


def main() -> None:
    from bench import scale

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ingest", action="store_true", help="measure the ingest cost")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--role", choices=("measure",), help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ingest:
        cost = ingest_cost(args.files, args.runs)
        print(json.dumps(cost) if args.json else
              f"bulk ingest of {cost['files']} conversations, CPU: {cost['without']:.2f} s "
              f"without the Sources rows, {cost['with']:.2f} s with them: "
              f"x{cost['ratio']:.3f} (target <= x1.10); wall {cost['wall_without']:.2f} / "
              f"{cost['wall_with']:.2f} s")
        return
    if args.role:
        scale.CACHE.mkdir(parents=True, exist_ok=True)
        scale._setup(args.backend, args.conversations)
        print(json.dumps(measure(args.conversations, args.repeat), default=str))
        return
    import subprocess

    backends = ["sqlite"] + (["postgresql"] if os.environ.get("DATABASE_URL") else [])
    out = {}
    for backend in backends:
        scale._child("generate", backend, args.conversations, [])
        env = dict(os.environ)
        if backend == "sqlite":
            env.pop("DATABASE_URL", None)
        done = subprocess.run(
            [sys.executable, "-m", "bench.sources", "--role", "measure", "--backend", backend,
             "--conversations", str(args.conversations), "--repeat", str(args.repeat)],
            cwd=scale.REPO, env=env, stdout=subprocess.PIPE, check=True)
        figures = json.loads(done.stdout.decode().strip().splitlines()[-1])
        out[backend] = figures
        if not args.json:
            print(f"\n== {figures['database']}: {figures['conversations']:,} conversations, "
                  f"{figures['source_rows']:,} source rows, {figures['search_rows']:,} "
                  f"search rows ==")
            print(f"{'request':36} {'wall ms':>8} {'cpu ms':>8} {'db ms':>8} {'x floor':>8}"
                  f"  (target: <= {scale.TARGET_MS:.0f} ms)")
            for name, row in figures["requests"].items():
                miss = (not name.startswith("login")
                        and max(row["ms"], row["cpu_ms"]) > scale.TARGET_MS)
                print(f"{name:36} {row['ms']:8.1f} {row['cpu_ms']:8.1f} {row['db_ms']:8.1f} "
                      f"{row['x_floor']:8.1f}{'  over target' if miss else ''}")
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
