"""Recording under sustained load: M concurrent streaming clients through ``manage.py serve``
for T seconds, then how long recording takes to catch up.

    uv run python -m bench.capture [--clients 10] [--seconds 20] [--pace 0.005] [--postgres URL]
                                   [--redis URL] [--recorders N]

A recorded upstream (``bench.proxy``'s: the bundled Anthropic sample as SSE, one event every
``--pace`` seconds) runs in its own process; ``manage.py serve`` (SQLite by default, or the
PostgreSQL database ``--postgres`` names, created fresh; there it starts a recorder process
beside itself unless ``--recorders 0``) in another. Each client sends one
streaming request after another through the proxy for ``--seconds``; then the bench waits for
every exchange to be recorded (the capture log's lag back to zero and no turn streaming).

Reported: requests sent, errors, agent turns recorded complete, the largest lag seen (count,
bytes, age of the oldest exchange waiting, sampled every second from the capture log), the time
to drain after the load stops, and the RSS of the server and of its recorders at start, once
warm (a tenth of the load in, 20 s at most: a recorder starts with the server and is still
importing at start), at the peak and at the end. The issue's targets
(``--clients 50 --seconds 180`` on PostgreSQL): everything recorded within 60 s of the load
stopping, RSS growth <= 50 MB, no turn left streaming.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.proxy import BODY, COUNT, REPO, SETUP, free_port, wait_listening

STREAMING = """
import django, json
django.setup()
from conversations.models import Turn
print(json.dumps(Turn.objects.filter(status="streaming").count()))
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (its recorders)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def recorders_rss_mb(pid: int) -> float:
    return sum(rss_mb(child) for child in children(pid))


def lag(path: Path) -> tuple[int, int, float]:
    """(exchanges waiting, their bytes, seconds since the oldest began) from the log."""
    if not path.exists():
        return 0, 0, 0.0
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        count, size, oldest = con.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0), MIN(opened) FROM exchanges "
            "WHERE recorded IS NULL").fetchone()
    except sqlite3.OperationalError:
        return 0, 0, 0.0
    finally:
        con.close()
    return count, size, (time.time() - oldest) if oldest else 0.0


async def client(http, url: str, headers: dict[str, str], until: float,
                 counts: dict[str, int]) -> None:
    while time.monotonic() < until:
        try:
            async with http.stream("POST", url, content=BODY, headers=headers) as response:
                async for _ in response.aiter_raw():
                    pass
            counts["requests"] += 1
        except Exception:
            counts["errors"] += 1


async def load(args: argparse.Namespace, url: str, token: str, pid: int, log: Path
               ) -> dict[str, object]:
    import httpx

    headers = {"x-api-key": "bench", "anthropic-version": "2023-06-01",
               "content-type": "application/json", "x-turnscope-token": token}
    counts = {"requests": 0, "errors": 0}
    rss = {"start": rss_mb(pid), "peak": rss_mb(pid)}
    recorders = {"processes": len(children(pid)), "start": recorders_rss_mb(pid)}
    recorders["peak"] = recorders["start"]
    worst = {"count": 0, "bytes": 0, "oldest_s": 0.0}
    until = time.monotonic() + args.seconds

    warm_at = time.monotonic() + min(20.0, args.seconds / 10)

    async def sample() -> None:
        while True:
            rss["peak"] = max(rss["peak"], rss_mb(pid))
            recorders["peak"] = max(recorders["peak"], recorders_rss_mb(pid))
            if "warm" not in rss and time.monotonic() >= warm_at:  # imports done, caches full
                rss["warm"], recorders["warm"] = rss_mb(pid), recorders_rss_mb(pid)
            count, size, oldest = await asyncio.to_thread(lag, log)
            worst["count"] = max(worst["count"], count)
            worst["bytes"] = max(worst["bytes"], size)
            worst["oldest_s"] = max(worst["oldest_s"], round(oldest, 1))
            await asyncio.sleep(1.0)

    sampler = asyncio.ensure_future(sample())
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        await asyncio.gather(*[client(http, url, headers, until, counts)
                               for _ in range(args.clients)])
    stopped = time.monotonic()
    while True:  # drain: the log's lag back to zero
        count, _, _ = await asyncio.to_thread(lag, log)
        if count == 0 or time.monotonic() - stopped > args.drain_limit:
            break
        await asyncio.sleep(0.2)
    drain = time.monotonic() - stopped
    sampler.cancel()
    rss["peak"] = max(rss["peak"], rss_mb(pid))
    rss["end"] = rss_mb(pid)
    recorders["end"] = recorders_rss_mb(pid)
    return {"clients": args.clients, "seconds": args.seconds, "pace_s": args.pace, **counts,
            "max_lag": worst, "drain_s": round(drain, 2),
            "drained": count == 0,
            "rss_mb": {k: round(v, 1) for k, v in rss.items()},
            "recorders_rss_mb": {k: round(v, 1) for k, v in recorders.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--pace", type=float, default=0.005, help="seconds between SSE events")
    parser.add_argument("--drain-limit", type=float, default=120,
                        help="seconds to wait for recording to catch up")
    parser.add_argument("--postgres", metavar="URL",
                        help="serve from this PostgreSQL database (dropped and created)")
    parser.add_argument("--redis", metavar="URL",
                        help="the channel layer and cache on this Redis")
    parser.add_argument("--recorders", metavar="N",
                        help="TURNSCOPE_RECORDERS for the server (default: its own, auto)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        up_port, app_port = free_port(), free_port()
        env.update({"DJANGO_SETTINGS_MODULE": "turnscope.settings", "TURNSCOPE_VAR_DIR": tmp,
                    "SQLITE_PATH": str(Path(tmp) / "bench.sqlite3"), "LOG_LEVEL": "ERROR",
                    "TURNSCOPE_UPSTREAM_ANTHROPIC": f"http://127.0.0.1:{up_port}",
                    "ALLOWED_HOSTS": "127.0.0.1", "PYTHONPATH": str(REPO)})
        if args.postgres:
            env["DATABASE_URL"] = args.postgres
            _fresh_postgres(args.postgres)
        if args.redis:
            env["REDIS_URL"] = args.redis
        if args.recorders is not None:
            env["TURNSCOPE_RECORDERS"] = args.recorders
        setup = subprocess.run([sys.executable, "-c", SETUP], cwd=REPO, env=env, check=True,
                               capture_output=True, text=True)
        token = json.loads(setup.stdout.strip().splitlines()[-1])["token"]
        upstream = subprocess.Popen([sys.executable, "-m", "bench.proxy", "--upstream-only",
                                     str(up_port), "--pace", str(args.pace)], cwd=REPO, env=env)
        server = subprocess.Popen([sys.executable, "manage.py", "serve", "--port",
                                   str(app_port)], cwd=REPO, env=env,
                                  stdout=subprocess.DEVNULL)
        try:
            wait_listening(up_port, upstream, "the recorded upstream")
            wait_listening(app_port, server, "manage.py serve")
            time.sleep(1.0)
            report = asyncio.run(load(
                args, f"http://127.0.0.1:{app_port}/proxy/anthropic/v1/messages", token,
                server.pid, Path(tmp) / "capture.sqlite3"))
            done = subprocess.run([sys.executable, "-c", COUNT], cwd=REPO, env=env,
                                  check=True, capture_output=True, text=True)
            counts = json.loads(done.stdout.strip().splitlines()[-1])
            streaming = subprocess.run([sys.executable, "-c", STREAMING], cwd=REPO, env=env,
                                       check=True, capture_output=True, text=True)
            report["recorded_complete"] = counts["complete"]
            report["agent_turns"] = counts["all"]
            report["left_streaming"] = json.loads(streaming.stdout.strip().splitlines()[-1])
            report["database"] = "postgresql" if args.postgres else "sqlite"
            report["layer"] = "redis" if args.redis else "in-memory"
        finally:
            for proc in (server, upstream):
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    print(json.dumps(report, indent=2))


def _fresh_postgres(url: str) -> None:
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(base + "/postgres", autocommit=True) as con:
        con.execute(f'DROP DATABASE IF EXISTS "{name}"')
        con.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
