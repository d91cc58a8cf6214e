"""Ingest throughput over every recorded provider fixture, against a JSON-parsing floor.

    uv run python -m bench.ingest [--repeat N] [--runs N] [--profile assemble|persist|per-turn]
                                  [--provider anthropic|openai|google] [--cpu]
                                  [--set providers|providers-more|both]

Prints stream parts per second for (1) adapters + assembler and (2) the same plus SQLite
persistence, each as a ratio to the floor: only JSON-parsing the same event lines, measured in
the same run. Targets: (1) <= 3x the floor, (2) <= 10x. Persistence is measured as recordings
are stored in bulk (``ingest_each``: many turns a commit, each its own conversation), and,
for comparison, a commit per turn (``ingest``, one file at a time). ``--set`` picks the
recordings under ``../shared/fixtures``: the first set, the second (server tools, MCP, ...),
or both (default); parts/s compares across sets, the ratios are per set.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
_tmp = tempfile.mkdtemp(prefix="turnscope-bench-")
os.environ["SQLITE_PATH"] = str(Path(_tmp) / "bench.sqlite3")
os.environ.setdefault("TURNSCOPE_VAR_DIR", _tmp)
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
from django.core.management import call_command  # noqa: E402

import providers  # noqa: E402
from conversations.ingest import ResponseFile, ingest, ingest_each  # noqa: E402
from providers.wire import read  # noqa: E402
from streams.builder import EventBuilder  # noqa: E402
from tests.support import FIXTURE_SETS, PROVIDER_FIXTURES, SHARED, recorded  # noqa: E402


def load_responses(
    only: str | None = None, sets: tuple[str, ...] = ("providers",)
) -> list[tuple[str, ResponseFile, list[bytes]]]:
    out = []
    for fixture_set in sets:
        root = SHARED / "fixtures" / fixture_set
        if root.exists():
            out += _responses(root, fixture_set, only)
    return out


def _responses(
    root: Path, fixture_set: str, only: str | None
) -> list[tuple[str, ResponseFile, list[bytes]]]:
    out = []
    for provider in (only,) if only else ("anthropic", "openai", "google"):
        for path in sorted((root / provider).glob("*")):
            for i, rec in enumerate(recorded(provider, path.name, fixture_set)):
                context = rec.context
                wire = read(rec.raw)
                # The floor parses each event's JSON text once (a body is one document).
                lines = [rec.raw] if wire.kind == "body" else [
                    orjson.dumps(f.data) for f in wire.frames if f.data is not providers.wire.DONE
                ]
                out.append((provider, ResponseFile(f"{path.name}#{i}", rec.raw, context), lines))
    return out


def best_of(
    runs: int, fns: dict[str, tuple[int, Callable[[], None]]], clock: Callable[[], float]
) -> dict[str, float]:
    """The best time of each function (``name -> (runs, fn)``), the functions taking turns,
    so a burst of load on the machine hits the floor and the measured paths alike instead of
    skewing their ratio."""
    best = dict.fromkeys(fns, float("inf"))
    for run in range(runs):
        for name, (times, fn) in fns.items():
            if run < times:
                start = clock()
                fn()
                best[name] = min(best[name], clock() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over all fixtures")
    parser.add_argument("--runs", type=int, default=3, help="best of this many timings")
    parser.add_argument(
        "--profile", choices=("assemble", "persist", "per-turn"),
        help="instead of timing, run one path under cProfile and print where its time goes",
    )
    parser.add_argument(
        "--provider", choices=sorted(providers.ADAPTERS),
        help="only this provider's fixtures (to time one adapter's path)",
    )
    parser.add_argument(
        "--cpu", action="store_true",
        help="time by this process's CPU time, not wall time (steadier on a busy machine)",
    )
    parser.add_argument(
        "--set", choices=(*FIXTURE_SETS, "both"), default="both", dest="fixture_set",
        help="which recordings under ../shared/fixtures (default: both sets)",
    )
    args = parser.parse_args()
    if not PROVIDER_FIXTURES.exists():
        sys.exit(f"{PROVIDER_FIXTURES} is absent: the benchmark reads ../shared in place")
    sets = FIXTURE_SETS if args.fixture_set == "both" else (args.fixture_set,)
    responses = load_responses(args.provider, sets)
    call_command("migrate", verbosity=0)

    def floor() -> None:
        for _ in range(args.repeat):
            for _provider, _response, lines in responses:
                for line in lines:
                    orjson.loads(line)

    parts_total = 0

    def assemble() -> None:
        nonlocal parts_total
        parts_total = 0
        for _ in range(args.repeat):
            for provider, response, _lines in responses:
                builder = EventBuilder()
                builder.begin_response("initial")
                for part in providers.parse(provider, response.raw, response.context):
                    parts_total += 1
                    builder.feed(part)
                builder.end_response()

    by_provider: dict[str, list[ResponseFile]] = {}
    for provider, response, _lines in responses:
        by_provider.setdefault(provider, []).append(response)

    def persist() -> None:
        # As a bulk ingest stores them: each its own conversation, many a commit (copies:
        # the same recordings are stored again each pass).
        for _ in range(max(1, args.repeat // 4)):
            for provider, files in by_provider.items():
                for result in ingest_each(provider, files, copy=True):
                    if result.error:
                        sys.exit(f"{result.name} was not stored: {result.error}")

    def per_turn() -> None:
        for _ in range(max(1, args.repeat // 4)):
            for provider, response, _lines in responses:
                ingest(provider, [response])

    if args.profile:
        import cProfile
        import pstats

        profiled = {"assemble": assemble, "persist": persist, "per-turn": per_turn}
        profiler = cProfile.Profile()
        profiler.runcall(profiled[args.profile])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
        return

    best = best_of(args.runs, {
        "floor": (args.runs, floor),
        "assemble": (args.runs, assemble),
        "persist": (max(1, args.runs - 1), persist),
        "per_turn": (max(1, args.runs - 1), per_turn),
    }, time.process_time if args.cpu else time.perf_counter)
    t_floor, t_assemble = best["floor"], best["assemble"]
    parts_per_pass = parts_total // args.repeat
    t_persist = best["persist"] * args.repeat / max(1, args.repeat // 4)
    t_per_turn = best["per_turn"] * args.repeat / max(1, args.repeat // 4)

    total_parts = parts_per_pass * args.repeat
    print(f"fixtures ({', '.join(sets)}): {len(responses)} responses, {parts_per_pass} stream "
          f"parts per pass, {args.repeat} passes")
    print(f"floor (JSON parse only):     {total_parts / t_floor:>12,.0f} parts/s")
    print(f"adapters + assembler:        {total_parts / t_assemble:>12,.0f} parts/s   "
          f"ratio {t_assemble / t_floor:5.2f}x floor (target <= 3x)")
    print(f"+ SQLite persistence:        {total_parts / t_persist:>12,.0f} parts/s   "
          f"ratio {t_persist / t_floor:5.2f}x floor (target <= 10x; in bulk, ingest_each)")
    print(f"  (a commit per turn:        {total_parts / t_per_turn:>12,.0f} parts/s   "
          f"ratio {t_per_turn / t_floor:5.2f}x floor; ingest, one file at a time)")


if __name__ == "__main__":
    main()
