"""Long-conversation benchmark: a 5,000-turn conversation's page and exports.

    uv run python -m bench.long [--turns 5000] [--repeat 3] [--json]

Builds (through the store's writer, ``store.record_turns``) one conversation of ``--turns``
turns, alternating a user question and an agent answer with a completed web search and cited
markdown, on a throwaway SQLite database (or ``DATABASE_URL``), then measures against the login
page as the floor, in the same run:

* page cold  — the conversation page (its first window of turns) with no cached fragments;
* page warm  — the same page again (fragments and message HTML cached);
* exports    — JSON (portable), Markdown and HTML, streamed to nowhere: MB/s (and MB per
  CPU-second: the machine may be shared) and the peak memory the export itself allocated
  (tracemalloc), cold from nothing (no export chunk and no message HTML cached, code warm: the
  best of ``--repeat``, as for the page) and cached;
* after recording — every turn queued as the store queues it, the background renderer's drain
  (``conversations.warming``: its CPU time, a server's idle work), then a first Markdown and
  HTML export;
* server RSS — the process's resident set after all of it.

Targets: page cold <= 300 ms, RSS <= 250 MB, exports >= 10 MB/s with flat memory. ``measure()``
is what ``bench/scale.py`` calls (with a conversation it built itself, or none).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

_TEXT = (
    "the survey found that rainfall in the basin rose sharply over the last decade while "
    "average temperatures kept climbing according to several independent station records and "
    "officials expect further revisions as new measurements arrive from the northern network"
)
_PROSE = _TEXT.split()


def _sentence(rng: random.Random, count: int) -> str:
    words = [rng.choice(_PROSE) for _ in range(count)]
    roll = rng.random()
    if roll < 0.25:
        words[0] = f"**{words[0]}**"
    elif roll < 0.4:
        i = rng.randrange(count)
        words[i] = f"`{words[i]}()`"
    elif roll < 0.55:
        i = rng.randrange(count)
        words[i] = f"[{words[i]}](https://notes.example.org/{words[i]})"
    return " ".join(words).capitalize() + "."


def _answer(rng: random.Random) -> str:
    paragraphs = [" ".join(_sentence(rng, rng.randrange(10, 20)) for _ in range(3))
                  for _ in range(2)]
    items = "\n".join(f"- {_sentence(rng, 8)}" for _ in range(3))
    return "\n\n".join([paragraphs[0], items, paragraphs[1]])


def long_turns(count: int, seed: int = 5000) -> Iterator[Any]:
    """``count`` turns (``store.NewTurn``) of a long conversation: a user question, then an
    agent answer with a completed web search and a cited message, and so on."""
    from conversations.store import NewTurn, user_turn
    from streams.bodies import ActivityBody
    from streams.builder import AttributionRecord, EventRecord

    rng = random.Random(seed)
    for index in range(count):
        if index % 2 == 0:
            yield user_turn(f"Question {index // 2 + 1}: " + _sentence(rng, 12))
            continue
        urls = [f"https://site{k}.example.com/report/{index}-{k}" for k in range(4)]
        search = ActivityBody(
            id=f"srvtoolu_{index}", name="web_search", state="completed",
            input={"query": " ".join(rng.choice(_PROSE) for _ in range(4))},
            summary="4 results",
            sources=tuple({"url": u, "title": f"Report {k}"} for k, u in enumerate(urls)),
        )
        text = _answer(rng)
        cites = []
        for k in range(3):
            start = rng.randrange(0, len(text) // 2)
            end = min(len(text), start + rng.randrange(20, 120))
            cites.append(AttributionRecord(urls[k], f"Report {k}", "…the basin rose sharply…",
                                           start, end))
        yield NewTurn(
            "agent",
            [EventRecord("hosted_activity", body=search),
             EventRecord("message", text=text, attributions=cites)],
            end_reason="end_turn", provider="anthropic", model="claude-sonnet-4-5",
            finished=True,
        )


def build_long_conversation(turns: int = 5000, *, owner: Any = None, title: str = "",
                            batch: int = 500) -> Any:
    """A conversation of ``turns`` generated turns, written through the store's writer in
    batches of ``batch`` turns (one transaction each)."""
    from conversations import store

    made = long_turns(turns)
    first = [t for _, t in zip(range(batch), made, strict=False)]
    conversation, _ = store.record_turns(first, store.NewConversation(
        title=title or f"A {turns:,}-turn conversation", owner=owner))
    while chunk := [t for _, t in zip(range(batch), made, strict=False)]:
        store.record_turns(chunk, conversation)
    conversation.refresh_from_db()
    return conversation


LONG_OWNER = "bench-long"


def long_owner() -> Any:
    """The user who owns the long conversation (made on first use)."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    return User.objects.filter(username=LONG_OWNER).first() or User.objects.create_user(
        LONG_OWNER, password="bench-long-pw")


# -- measuring ------------------------------------------------------------------------------


def _rss_mb() -> tuple[float, float]:
    """(resident now, peak resident) of this process, in MB."""
    from pathlib import Path

    status = Path("/proc/self/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def _timed(fn: Any) -> tuple[float, float, Any]:
    """(wall seconds, this process's CPU seconds, result) of ``fn()``."""
    import time

    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _body(response: Any) -> bytes:
    return (b"".join(response.streaming_content) if response.streaming
            else response.content)


def measure(conversation: Any = None, *, turns: int = 5000, repeat: int = 3,
            log: Any = None) -> dict[str, Any]:
    """The long-conversation figures, in this process (Django set up, database migrated): the
    login page (the floor), the conversation page's first window cold and warm, and each
    export cold (rendered) and cached, through the app's own views (the test client, so the
    times are the server's); ``conversation``: a long conversation to use, else one of
    ``turns`` turns is built. Returns the figures (times in ms, sizes in MB)."""
    import gc
    import tracemalloc

    from django.test import Client

    from conversations.models import RenderedHTML, TurnExport, TurnFragment

    say = log or (lambda *_: None)
    owner = long_owner()
    if conversation is None:
        say(f"building a {turns:,}-turn conversation through the store")
        build, _, conversation = _timed(lambda: build_long_conversation(turns, owner=owner))
        say(f"  built in {build:.1f} s")
    elif conversation.owner_id != owner.pk:
        owner = conversation.owner or owner
        if conversation.owner_id is None:
            owner.is_staff = True  # staff see conversations without an owner
            owner.save(update_fields=["is_staff"])
    client = Client(SERVER_NAME="localhost")
    client.force_login(owner)
    page = f"/c/{conversation.pk}/"
    out: dict[str, Any] = {"turns": conversation.turns.count()}

    def best(url: str, params: dict[str, str] | None = None, reset: Any = None
             ) -> tuple[float, float, int]:
        runs = []
        for _ in range(repeat):
            if reset is not None:
                reset()
            wall, cpu, response = _timed(lambda: _body(client.get(url, params or {})))
            runs.append((wall, cpu, len(response)))
        wall, cpu, size = min(runs)
        return wall * 1000, cpu * 1000, size

    Client(SERVER_NAME="localhost").get("/accounts/login/")  # imports and templates, once
    out["floor_ms"], out["floor_cpu_ms"], _ = best("/accounts/login/")

    def cold_page() -> None:
        TurnFragment.objects.filter(turn__conversation=conversation).delete()
        RenderedHTML.objects.filter(event__conversation=conversation).delete()

    client.get(page)  # the page's code paths warmed on this conversation, then dropped
    out["page_cold_ms"], out["page_cold_cpu_ms"], out["page_kb"] = best(page, reset=cold_page)
    out["page_kb"] /= 1024
    out["page_warm_ms"], out["page_warm_cpu_ms"], _ = best(page)
    say(f"  page: cold {out['page_cold_ms']:.0f} ms, warm {out['page_warm_ms']:.0f} ms")

    def from_nothing() -> None:
        TurnExport.objects.filter(turn__conversation=conversation).delete()
        cold_page()

    export = f"/api/v1/conversations/{conversation.pk}/export"
    for fmt in ("markdown", "html", "json"):
        def cold() -> None:
            from_nothing()  # no export chunk, no page's message HTML: cold from nothing

        # Cold as the page's is: the export's code paths warmed once, then its cache dropped
        # before each of ``repeat`` runs (the first request of a process also pays for
        # imports and the database's page cache: 1.3 s -> 2.3 s for the JSON).
        cold()
        _body(client.get(export, {"format": fmt}))
        wall_ms, cpu_ms, nbytes = best(export, {"format": fmt}, reset=cold)
        wall, cpu, size = wall_ms / 1000, cpu_ms / 1000, nbytes / 2**20
        cached_ms, cached_cpu_ms, _ = best(export, {"format": fmt})
        gc.collect()
        tracemalloc.start()
        streamed = sum(len(chunk) for chunk in
                       client.get(export, {"format": fmt}).streaming_content)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        assert streamed == nbytes
        out[fmt] = {"mb": size, "cold_s": wall, "cold_cpu_s": cpu,
                    "cold_mb_s": size / wall, "cold_cpu_mb_s": size / cpu,
                    "cached_ms": cached_ms,
                    "cached_cpu_ms": cached_cpu_ms, "cached_mb_s": size / (cached_ms / 1000),
                    "peak_mb": peak}
        say(f"  {fmt}: {size:.1f} MB, cold {wall:.1f} s, cached {cached_ms:.0f} ms, "
            f"peak {peak:.1f} MB")
    out["warmed"] = _after_recording(conversation, client, export, best, from_nothing, say)
    gc.collect()
    out["rss_mb"], out["rss_peak_mb"] = _rss_mb()
    return out


def _after_recording(conversation: Any, client: Any, export: str, best: Any,
                     from_nothing: Any, say: Any) -> dict[str, Any]:
    """A first export of a conversation as recording leaves it: every turn queued, then
    rendered once by the background renderer (``conversations.warming``, what a server's loop
    runs), its CPU time reported apart (a server's idle time, not a request's)."""
    from conversations import warming
    from conversations.models import PendingRender, TurnExport

    from_nothing()
    turns = list(conversation.turns.values_list("pk", flat=True))
    PendingRender.objects.all().delete()
    warming.queue(turns)  # as the store queued them when it recorded the turns
    drain_s, drain_cpu_s, taken = _timed(warming.drain_all)
    assert taken == len(turns) and not warming.pending()
    out: dict[str, Any] = {"turns": taken, "drain_s": drain_s, "drain_cpu_s": drain_cpu_s}
    for fmt in ("markdown", "html"):
        # The first request after the drain; not best-of (a second one reads the same rows).
        wall, cpu, body = _timed(lambda f=fmt: _body(client.get(export, {"format": f})))
        out[fmt] = {"first_ms": wall * 1000, "first_cpu_ms": cpu * 1000,
                    "first_mb_s": len(body) / 2**20 / wall}
    # The HTML export made again with only the message HTML cached (as after a page was read):
    # what is left of a cold HTML export once nothing is rendered twice.
    TurnExport.objects.filter(turn__conversation=conversation, format="html").delete()
    wall, cpu, body = _timed(lambda: _body(client.get(export, {"format": "html"})))
    out["html_from_messages"] = {"ms": wall * 1000, "cpu_ms": cpu * 1000,
                                 "mb_s": len(body) / 2**20 / wall}
    say(f"  background render of {taken} turns: {drain_cpu_s:.1f} s CPU; first exports after "
        + ", ".join(f"{fmt} {out[fmt]['first_ms']:.0f} ms" for fmt in ("markdown", "html")))
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(figures: dict[str, Any]) -> str:
    """The figures as the lines ``main`` prints (``bench/scale.py`` may print them too)."""
    floor = figures["floor_ms"]
    lines = [
        f"a {figures['turns']:,}-turn conversation (one process, the test client: server time)",
        f"  login page (floor)     {floor:7.1f} ms",
        f"  page, first window     cold {figures['page_cold_ms']:7.1f} ms "
        f"({figures['page_cold_ms'] / floor:.0f}x floor; target <= 300 ms: "
        f"{_met(figures['page_cold_ms'] <= 300)}), "
        f"warm {figures['page_warm_ms']:6.1f} ms ({figures['page_warm_ms'] / floor:.0f}x), "
        f"{figures['page_kb']:.0f} KB",
        f"    CPU: floor {figures['floor_cpu_ms']:.1f} ms, cold {figures['page_cold_cpu_ms']:.1f}"
        f" ms, warm {figures['page_warm_cpu_ms']:.1f} ms (wall above CPU: the machine's load)",
    ]
    for fmt in ("markdown", "html", "json"):
        f = figures[fmt]
        lines.append(
            f"  export {fmt:<9} {f['mb']:6.1f} MB: cold {f['cold_s']:6.1f} s "
            f"({f['cold_mb_s']:5.1f} MB/s, {f['cold_cpu_mb_s']:5.1f} MB per CPU-s; "
            f"{_met(f['cold_mb_s'] >= 10)}), cached "
            f"{f['cached_ms']:7.0f} ms ({f['cached_mb_s']:6.1f} MB/s; target >= 10 MB/s: "
            f"{_met(f['cached_mb_s'] >= 10)}), peak {f['peak_mb']:.1f} MB "
            f"allocated while streaming; CPU cold {f['cold_cpu_s']:.1f} s, cached "
            f"{f['cached_cpu_ms']:.0f} ms")
    warmed = figures["warmed"]
    lines.append(f"  after recording: the background renderer took {warmed['turns']:,} turns in "
                 f"{warmed['drain_s']:.1f} s ({warmed['drain_cpu_s']:.1f} s CPU, off any "
                 "request); then a first export:")
    for fmt in ("markdown", "html"):
        f = warmed[fmt]
        mb = figures[fmt]["mb"]
        lines.append(f"    {fmt:<9} {f['first_ms']:7.0f} ms ({f['first_mb_s']:6.1f} MB/s; target "
                     f">= 10 MB/s: {_met(f['first_mb_s'] >= 10)}), CPU {f['first_cpu_ms']:.0f} ms "
                     f"({mb / (f['first_cpu_ms'] / 1000):.1f} MB per CPU-s)")
    f = warmed["html_from_messages"]
    lines.append(f"    html made again from the cached message HTML alone {f['ms']:7.0f} ms "
                 f"({f['mb_s']:6.1f} MB/s), CPU {f['cpu_ms']:.0f} ms "
                 f"({figures['html']['mb'] / (f['cpu_ms'] / 1000):.1f} MB per CPU-s)")
    lines.append(f"  server RSS {figures['rss_mb']:.0f} MB after, peak {figures['rss_peak_mb']:.0f}"
                 f" MB (target <= 250 MB: {_met(figures['rss_peak_mb'] <= 250)};"
                 " the peak includes building the conversation in this process)")
    return "\n".join(lines)


def main() -> None:
    import argparse
    import json
    import os
    import sys
    import tempfile
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        tmp = tempfile.mkdtemp(prefix="turnscope-bench-long-")
        os.environ["SQLITE_PATH"] = str(Path(tmp) / "bench.sqlite3")
        os.environ.setdefault("TURNSCOPE_VAR_DIR", tmp)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    figures = measure(turns=args.turns, repeat=args.repeat,
                      log=lambda line: print(line, file=sys.stderr, flush=True))
    print(report(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
