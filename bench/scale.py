"""A big store stays fast: the list, search, filters, API list and admin changelists at N
conversations, against the login page as the floor measured in the same run.

    uv run python -m bench.scale [--conversations 100000] [--repeat 15] [--json]

Builds the store once per size and database — every recorded provider response under
``../shared/fixtures`` (both sets), cycled, each one conversation, through the bulk path
(``conversations.ingest.ingest_each``, as ``manage.py ingest --each`` does) — and caches it
(SQLite: ``var/bench-scale/scale-N.sqlite3``; PostgreSQL, when ``DATABASE_URL`` is set: that
database). An interrupted build goes on where it stopped (it commits 500 files at a time); a
store that is not a bench store of at most N is flushed first, so give PostgreSQL a database
of its own (it is vacuumed and analysed before measuring, as autovacuum leaves a deployed
database). Then, in a fresh process per database (so the resident set is the
server's, not the generator's), it measures with Django's test client (in process: server time,
no network), the median of ``--repeat`` interleaved rounds after one warm-up round (each
round requests every page below in turn, the floor included, and a page's ratio is taken to the
floor of its own round):

* login page (the floor), list page 1, the last page (keyset ``?page=last``), staff's list
  page 1 (everyone's conversations: the 5,000-turn one is on it),
* text search with a hit and with none, the cited-domain filter (the most cited domain),
* the API list, the admin changelists (conversations, turns, events, attributions, payloads),
  and the admin's filters and searches (event kind and incomplete, payload provider, a cited
  domain, a word of the sources' titles, a word said in conversations, a key),
* the Sources pages and API, filtered and not (``bench.sources``),
* the process's peak RSS,

each as wall and CPU time (the server's own time: on a loaded machine wall time is mostly the
wait for a core) and the time spent waiting for the database's answers (PostgreSQL's own work
is in its process, not in the server's CPU time), the ratio to the floor and the targets on
CPU time,

and, when ``bench/long.py`` is in the tree (``bench.long.measure``), the 5,000-turn
conversation's page and exports. Targets at 100k conversations: each page <= 150 ms and <= 15x
the floor, on both databases; bulk ingest >= 200 conversations/s on SQLite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("TURNSCOPE_BENCH_CACHE", REPO / "var" / "bench-scale"))
OWNER, STAFF = "bench", "bench-staff"
TARGET_MS, TARGET_RATIO, INGEST_TARGET = 150.0, 15.0, 200.0


def _setup(backend: str, size: int) -> None:
    """Settings for one database, before Django is imported."""
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"  # bench.long: localhost
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # not a line per ingested file
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    os.environ.setdefault("TURNSCOPE_VAR_DIR", str(CACHE))
    if backend == "sqlite":
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(_sqlite_path(size))
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def _sqlite_path(size: int) -> Path:
    return CACHE / f"scale-{size}.sqlite3"


# -- generation ----------------------------------------------------------------------------------


def _responses() -> list[tuple[str, Any]]:
    """Every recorded provider response of both fixture sets, as (provider, ResponseFile)."""
    from bench.ingest import load_responses
    from tests.support import FIXTURE_SETS

    return [(provider, response) for provider, response, _ in
            load_responses(sets=FIXTURE_SETS)]


def generate(size: int, backend: str, batch: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from conversations.ingest import ResponseFile, ingest_each
    from conversations.models import Conversation

    call_command("migrate", verbosity=0)
    User = get_user_model()
    owner = User.objects.filter(username=OWNER).first()
    have = Conversation.objects.filter(owner=owner).count() if owner is not None else 0
    if have == size:
        return {"generated": False}
    if owner is None or have > size:
        call_command("flush", interactive=False, verbosity=0)
        have = 0
        owner = User.objects.create_user(OWNER, password="bench-pw-123")
        User.objects.create_user(STAFF, password="bench-pw-123", is_staff=True,
                                 is_superuser=True)
    # else: an interrupted build (batches are committed whole) goes on where it stopped.
    responses = _responses()
    if not responses:
        raise SystemExit("no provider fixtures under ../shared/fixtures: nothing to build from")
    by_provider: dict[str, list[Any]] = {}
    for n in range(size):
        provider, response = responses[n % len(responses)]
        by_provider.setdefault(provider, []).append(
            ResponseFile(f"{response.name}@{n}", response.raw, response.context))
    started, cpu, made, failed = time.perf_counter(), time.process_time(), 0, 0
    shown = started
    skip = have
    for provider, files in by_provider.items():
        files, skip = files[skip:], max(0, skip - len(files))
        # copy=True: the files repeat (the recordings, cycled), and a second import of the
        # same bytes is otherwise "already imported", not a conversation.
        for result in ingest_each(provider, files, owner=owner, batch=batch, copy=True):
            made += result.conversation is not None
            failed += result.conversation is None
            now = time.perf_counter()
            if sys.stderr.isatty() and now - shown > 0.5:
                shown = now
                sys.stderr.write(f"\r{made + failed}/{size} conversations, "
                                 f"{made / (now - started):.0f}/s")
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    # A response the store refuses (a recording of a failed request) still makes up the count.
    missing = size - Conversation.objects.filter(owner=owner).count()
    if missing:
        fill = [r for r in by_provider[next(iter(by_provider))][:1]]
        for _ in range(missing):
            list(ingest_each(next(iter(by_provider)), fill, owner=owner, copy=True))
    return {"generated": True, "conversations": made, "resumed_at": have, "refused": failed,
            "seconds": elapsed,
            "per_second": made / elapsed if elapsed else 0.0,
            "per_cpu_second": made / cpu if cpu else 0.0}


# -- measuring -----------------------------------------------------------------------------------


def _once(client: Any, url: str) -> tuple[float, float, float]:
    """One request: (wall, CPU, database) seconds."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        wall, cpu = time.perf_counter(), time.thread_time()
        response = client.get(url)
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
        cpu = time.thread_time() - cpu
        wall = time.perf_counter() - wall
    if response.status_code != 200:
        raise SystemExit(f"{url}: {response.status_code}")
    # The database's share as the server waited for it (PostgreSQL works in its own process:
    # its CPU is not in this thread's time).
    return wall, cpu, sum(float(q["time"]) for q in queries.captured_queries)


def timed_rounds(targets: dict[str, tuple[Any, str]], repeat: int,
                 floor: str) -> dict[str, dict[str, float]]:
    """Each target's median wall, CPU and database time over ``repeat`` rounds, after one
    warm-up round; every round requests every target in turn, ``floor`` included, and each
    target's ratio is the median of its CPU time over the floor's *in the same round*. This
    machine's speed swings within minutes (the floor ran 1.1-2.6 ms within one hour): a floor
    measured once, minutes before a page, moved a page's ratio by a third; measured beside it,
    the swing cancels out."""
    for client, url in targets.values():
        _once(client, url)
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in targets}
    for _ in range(repeat):
        for name, (client, url) in targets.items():
            runs[name].append(_once(client, url))
    out = {}
    floors = [cpu for _, cpu, _ in runs[floor]]
    for name, figures in runs.items():
        walls, cpus, dbs = zip(*figures, strict=True)
        out[name] = {
            "ms": statistics.median(walls) * 1000, "cpu_ms": statistics.median(cpus) * 1000,
            "db_ms": statistics.median(dbs) * 1000,
            "x_floor": statistics.median(c / f for c, f in zip(cpus, floors, strict=True) if f),
        }
    return out


def measure(size: int, repeat: int) -> dict[str, Any]:
    import resource
    from urllib.parse import urlencode

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from conversations import search
    from conversations.models import Conversation, FacetCount, SearchDoc

    if connection.vendor == "postgresql":
        # Planner statistics and the visibility map (what makes an index-only scan one), as
        # autovacuum leaves them; this machine's PostgreSQL runs without autovacuum.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    User = get_user_model()
    owner, staff = User.objects.get(username=OWNER), User.objects.get(username=STAFF)
    anonymous, user, admin = Client(), Client(), Client()
    user.force_login(owner)
    admin.force_login(staff)
    domain = (FacetCount.objects.filter(kind=search.DOMAIN).order_by("-conversations")
              .values_list("value", flat=True).first()) or "example.com"
    hit = _search_word()
    source_word = _search_word(SearchDoc.Source.SOURCE)
    long_conversation = _long_conversation()
    hits = Conversation.objects.filter(search.matching(hit)).count()
    cited = Conversation.objects.filter(pk__in=search.with_facet(search.SITE, domain)).count()
    targets = {
        "login page (floor)": (anonymous, "/accounts/login/"),
        "list page 1": (user, "/"),
        "list last page": (user, "/?page=last"),
        # Staff see every owner's: the 5,000-turn conversation is on their page 1.
        "staff list page 1": (admin, "/"),
        f"search hit ({hits} match)": (user, "/?" + urlencode({"q": hit})),
        "search no hit": (user, "/?q=zqxjv-nothing"),
        f"domain filter ({cited} match)": (user, "/?" + urlencode({"domain": domain})),
        "API list": (user, "/api/v1/conversations"),
        "API search hit": (user, "/api/v1/conversations?" + urlencode({"q": hit})),
    }
    for model in ("conversation", "turn", "event", "attribution", "providerpayload"):
        targets[f"admin {model}s"] = (admin, f"/admin/conversations/{model}/")
    # The admin's filters and searches, each through its index: a common kind (counted to its
    # limit), a rare flag, a provider, a cited domain, a key.
    some = Conversation.objects.filter(owner=owner).order_by("-updated_at").values_list(
        "pk", flat=True).first()
    admin_pages = "/admin/conversations"
    targets.update({
        "admin events, kind filter": (admin, f"{admin_pages}/event/?kind=message"),
        "admin events, incomplete filter": (admin,
                                            f"{admin_pages}/event/?incomplete__exact=1"),
        "admin events, key search": (admin, f"{admin_pages}/event/?" + urlencode({"q": some})),
        "admin conversations, text search": (admin, f"{admin_pages}/conversation/?"
                                             + urlencode({"q": hit})),
        "admin conversations, no hit": (admin, f"{admin_pages}/conversation/?q=zqxjv-nothing"),
        "admin payloads, provider filter": (admin,
                                            f"{admin_pages}/providerpayload/?provider=google"),
        "admin attributions, domain search": (admin, f"{admin_pages}/attribution/?"
                                              + urlencode({"q": f"domain:{domain}"})),
        "admin attributions, text search": (admin, f"{admin_pages}/attribution/?"
                                            + urlencode({"q": source_word})),
    })
    # The Sources pages and API (bench.sources: also measured alone there).
    from bench.sources import targets as source_targets

    targets.update(source_targets(user, admin, owner))
    # Ratios on CPU time: on a loaded machine wall time is mostly waiting for a core.
    results = timed_rounds(targets, repeat, floor="login page (floor)")
    out: dict[str, Any] = {
        "database": connection.vendor, "conversations": Conversation.objects.count(),
        "search_docs": SearchDoc.objects.count(), "query": hit, "domain": domain,
        "source_query": source_word,
        "requests": results,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    out["long"] = _long(long_conversation)
    return out


def _search_word(source: str = "message") -> str:
    """A word of at least seven letters from a doc of ``source`` (a message; a cited source's
    title and URL) in the middle of the store: a query that some conversations match, and
    most do not."""
    import re

    from conversations.models import SearchDoc

    count = SearchDoc.objects.count()
    for offset in range(count // 2, count, max(count // 50, 1)):
        body = (SearchDoc.objects.filter(source=source, id__gte=offset)
                .order_by("id").values_list("body", flat=True).first())
        if source == SearchDoc.Source.SOURCE:
            body = (body or "").split("\n")[0]  # the title (a source doc is title, then URL)
        words = re.findall(r"[A-Za-z]{7,}", body or "")
        if words:
            return max(words, key=len)
    return "weather"


def _long_conversation() -> Any:
    """The 5,000-turn conversation ``bench.long`` measures: built once into the store (the
    newest, so on staff's list page 1) and used again by the next runs; None without
    ``bench/long.py``."""
    try:
        from bench import long as long_bench
    except ImportError:
        return None
    from conversations.models import Conversation

    kept = (Conversation.objects.filter(owner__username=long_bench.LONG_OWNER,
                                        next_seq__gt=5000).order_by("created_at").first())
    return kept or long_bench.build_long_conversation(owner=long_bench.long_owner())


def _long(conversation: Any) -> Any:
    """``bench.long.measure()`` on ``conversation``, when that module is here."""
    try:
        from bench import long as long_bench
    except ImportError:
        return "bench/long.py is not in this tree: skipped"
    run = getattr(long_bench, "measure", None)
    if run is None:
        return "bench.long has no measure(): skipped"
    try:
        return run(conversation)
    except Exception as exc:  # its own failure is reported, the store's figures are kept
        return f"bench.long.measure() failed: {exc!r}"


# -- the command ---------------------------------------------------------------------------------


def _child(role: str, backend: str, size: int, extra: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    if backend == "sqlite":
        env.pop("DATABASE_URL", None)
    command = [sys.executable, "-m", "bench.scale", "--role", role, "--backend", backend,
               "--conversations", str(size), *extra]
    done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, check=False)
    if done.returncode:
        raise SystemExit(f"{role} on {backend} failed ({done.returncode})")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def report(size: int, backend: str, built: dict[str, Any], figures: dict[str, Any]) -> None:
    print(f"\n== {figures['database']}: {figures['conversations']:,} conversations, "
          f"{figures['search_docs']:,} search docs ==")
    if built.get("generated"):
        rate = built["per_second"]
        cpu_rate = built["per_cpu_second"]
        print(f"bulk ingest: {built['conversations']:,} conversations in {built['seconds']:.0f} s"
              f" = {rate:.0f}/s wall, {cpu_rate:.0f} per CPU second (target >= "
              f"{INGEST_TARGET:.0f}/s on SQLite)"
              f"{'' if backend != 'sqlite' or rate >= INGEST_TARGET else '  (wall: missed)'}")
    else:
        print("store: cached (built earlier)")
    print(f"search query {figures['query']!r}, domain {figures['domain']!r}, "
          f"source search {figures['source_query']!r}")
    print(f"{'request':34} {'wall ms':>8} {'cpu ms':>8} {'db ms':>8} {'x floor':>8}"
          f"  (targets: <= {TARGET_MS:.0f} ms wall and CPU, "
          f"<= {TARGET_RATIO:.0f}x the floor's CPU)")
    for name, row in figures["requests"].items():
        floor = name.startswith("login")
        # A page's server time is its wall time where the database works in its own process
        # (PostgreSQL: what a user waits for); its ratio is on CPU time.
        miss = not floor and (max(row["cpu_ms"], row["ms"]) > TARGET_MS
                              or row["x_floor"] > TARGET_RATIO)
        print(f"{name:34} {row['ms']:8.1f} {row['cpu_ms']:8.1f} {row.get('db_ms', 0):8.1f} "
              f"{row['x_floor']:8.1f}{'  over target' if miss else ''}")
    print(f"server RSS (peak): {figures['rss_mb']:.0f} MB")
    if isinstance(figures["long"], dict):
        from bench import long as long_bench

        print(long_bench.report(figures["long"]))
    else:
        print(f"5,000-turn conversation: {figures['long']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--batch", type=int, default=500, help="files per commit")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--role", choices=("generate", "measure"), help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    size = args.conversations
    if args.role:
        CACHE.mkdir(parents=True, exist_ok=True)
        _setup(args.backend, size)
        if args.role == "generate":
            out = generate(size, args.backend, args.batch)
        else:
            out = measure(size, args.repeat)
        print(json.dumps(out, default=str))
        return
    backends = ["sqlite"] + (["postgresql"] if os.environ.get("DATABASE_URL") else [])
    everything = {}
    for backend in backends:
        built = _child("generate", backend, size, ["--batch", str(args.batch)])
        figures = _child("measure", backend, size, ["--repeat", str(args.repeat)])
        everything[backend] = {"built": built, **figures}
        if not args.json:
            report(size, backend, built, figures)
    if args.json:
        print(json.dumps(everything, default=str, indent=2))


if __name__ == "__main__":
    main()
