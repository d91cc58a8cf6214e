"""The recording proxy's cost: M concurrent streaming requests through the proxy vs. the same
requests direct to the same recorded upstream, in one run.

    uv run python -m bench.proxy [--streams 20] [--rounds 5] [--pace 0.005] [--spread 0]

A recorded upstream (``upstream.recorded``, serving the bundled Anthropic sample as SSE, one
event every ``--pace`` seconds) runs in its own process; the app runs in a daphne process
(SQLite, in-memory channel layer: one process), with ``TURNSCOPE_UPSTREAM_ANTHROPIC`` pointed at
the upstream. Each round sends ``--streams`` requests, alternately direct and through the proxy
(recording included: every proxied stream becomes a stored, published turn): all at once (a
burst, the default) or starting over ``--spread`` seconds. The client is a lean keep-alive
HTTP/1.1 one (``Connection``): it shares the cores with both servers.

``--forward-only`` sends the proxied requests to a path the proxy forwards without recording
(``/v1/messages/bench``; the recorded upstream answers it the same), which splits the cost of
forwarding from the cost of recording.

Reported: added time to first byte p50/p99 (proxy minus direct, at the client), added total
time p50, streams/s both ways, the daphne process's CPU per streamed KB, whether any byte
differed, and how many proxied streams became complete recorded turns (all of them, or the
recording fell behind or failed). And where the first byte waits, on the servers' own clocks
(``bench.proxy_timing``): request in to first bytes out inside the proxy and inside the upstream
(for the proxy's requests and for the direct ones), and each server's event-loop lag.
Targets: added TTFB p50 <= 5 ms, p99 <= 20 ms at 20 concurrent streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
BODY = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 1024, "stream": True,
                   "messages": [{"role": "user", "content": "How do tides work?"}]}).encode()

COUNT = """
import django, json
django.setup()
from conversations.models import Turn
turns = Turn.objects.filter(role="agent")
print(json.dumps({"complete": turns.filter(status="complete").count(), "all": turns.count()}))
"""

SETUP = """
import django, json
django.setup()
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user, _ = get_user_model().objects.get_or_create(username="bench")
print(json.dumps({"token": Token.objects.get_or_create(user=user)[0].key}))
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def serve_upstream(port: int, pace: float) -> None:
    """The recorded upstream, forever (``--upstream-only``)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    django.setup()
    import uvicorn

    from live import bundled
    from upstream.recorded import RecordedUpstream, by_provider, reply

    sample = bundled.sample("anthropic-tides")
    from bench.proxy_timing import timed

    app = RecordedUpstream(respond=by_provider(
        {"anthropic": [reply("anthropic", sample.responses[0].raw.encode())]}), pace=pace)
    app.requests = _Forgetful()  # a bench sends thousands: keep none
    app.sent = _Forgetful()
    uvicorn.run(timed(app), host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                http="h11", server_header=False, date_header=False)


class _Forgetful(list):
    def append(self, item: object) -> None:
        pass


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, what: str) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


class Connection:
    """One keep-alive HTTP/1.1 connection, as lean as a client can be: the bench's client
    shares the machine's cores with the upstream and the proxy, and an SDK-grade client (httpx:
    its parsing, its pool) spent so much of them on 20 streams' chunks that its own queueing
    was most of the time to first byte it measured, both ways (direct p50 50-60 ms against an
    upstream that answers in 4)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.request = (f"POST {parts.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                        + f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def one(self, after: float = 0.0) -> tuple[float, float, bytes]:
        """(time to the body's first byte, total time, the body) of one request, sent
        ``after`` seconds from now."""
        if after:
            await asyncio.sleep(after)
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.reader, self.writer
        assert reader is not None
        started = time.perf_counter()
        writer.write(self.request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in
                  (line.partition(b":") for line in head.split(b"\r\n")[1:] if line)}
        first = None
        body = bytearray()
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                body += await reader.readexactly(size)
                first = first or time.perf_counter()
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")  # (no trailers are sent)
        else:
            body += await reader.readexactly(int(fields[b"content-length"]))
            first = time.perf_counter()
        if status != 200 or fields.get(b"connection", b"").lower() == b"close":
            writer.close()
            self.writer = None
        ended = time.perf_counter()
        return (first or ended) - started, ended - started, bytes(body)


async def measure(args: argparse.Namespace, upstream: str, proxy: str, token: str,
                  daphne_pid: int) -> dict[str, object]:
    direct_headers = {"x-api-key": "bench", "anthropic-version": "2023-06-01",
                      "content-type": "application/json", "x-bench-via": "direct"}
    proxy_headers = {**direct_headers, "x-turnscope-token": token, "x-bench-via": "proxy"}
    results: dict[str, list[tuple[float, float, bytes]]] = {"direct": [], "proxy": []}
    wall = {"direct": 0.0, "proxy": 0.0}
    cpu = 0.0
    clients = {"direct": [Connection(upstream, direct_headers) for _ in range(args.streams)],
               "proxy": [Connection(proxy, proxy_headers) for _ in range(args.streams)]}
    for kind in clients:  # warm up (the connections open)
        await asyncio.gather(*[c.one() for c in clients[kind]])
    await asyncio.sleep(1.0)  # the warm-up's recordings finish
    for server in (upstream, proxy):
        await timing(server)  # the servers' figures start over
    for _ in range(args.rounds):
        for kind in clients:
            before = cpu_seconds(daphne_pid)
            started = time.perf_counter()
            got = await asyncio.gather(*[c.one(i * args.spread / args.streams)
                                         for i, c in enumerate(clients[kind])])
            wall[kind] += time.perf_counter() - started
            if kind == "proxy":
                await asyncio.sleep(0.5)  # the recorders' last writes count too
                cpu += cpu_seconds(daphne_pid) - before
            results[kind].extend(got)
    inside = {"proxy": await timing(proxy), "upstream": await timing(upstream)}
    direct, proxied = results["direct"], results["proxy"]
    reference = direct[0][2]
    differing = sum(1 for r in direct + proxied if r[2] != reference)
    kb = sum(len(r[2]) for r in proxied) / 1024
    ttfb = {k: [r[0] * 1000 for r in v] for k, v in results.items()}
    total = {k: [r[1] * 1000 for r in v] for k, v in results.items()}
    return {
        "streams": args.streams, "rounds": args.rounds, "pace_s": args.pace,
        "spread_s": args.spread,
        "recording": not args.forward_only,
        "ttfb_ms": {k: {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99)}
                    for k, v in ttfb.items()},
        "added_ttfb_ms": {"p50": percentile(ttfb["proxy"], 0.5) - percentile(ttfb["direct"], 0.5),
                          "p99": percentile(ttfb["proxy"], 0.99)
                          - percentile(ttfb["direct"], 0.99)},
        "added_total_ms_p50": percentile(total["proxy"], 0.5) - percentile(total["direct"], 0.5),
        "streams_per_s": {k: len(results[k]) / wall[k] for k in results},
        "server_cpu_ms_per_kb": cpu * 1000 / kb if kb else None,
        "bytes_differing_streams": differing,
        # the servers' own clocks: request in -> the response's first bytes out
        "in_server_first_byte_ms": {
            "proxy": _spread(inside["proxy"]["first_byte_s"].get("proxy", [])),
            "upstream_for_the_proxy": _spread(inside["upstream"]["first_byte_s"].get("proxy", [])),
            "upstream_direct": _spread(inside["upstream"]["first_byte_s"].get("direct", []))},
        "event_loop_lag_ms": {name: _spread(found["loop_lag_s"], top=True)
                              for name, found in inside.items()},
        "targets": {"added_ttfb_p50_ms": 5, "added_ttfb_p99_ms": 20},
    }


async def timing(url: str) -> dict[str, Any]:
    """A server's figures so far (``bench.proxy_timing``), which it then forgets."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(f"GET /__bench_timing HTTP/1.1\r\nHost: {parts.hostname}\r\n"
                 "Connection: close\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    found: dict[str, Any] = json.loads(answer.split(b"\r\n\r\n", 1)[1])  # (Content-Length)
    return found


def _spread(seconds: list[float], top: bool = False) -> dict[str, float] | None:
    if not seconds:
        return None
    ms = [s * 1000 for s in seconds]
    found = {"p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99)}
    if top:
        found["max"] = max(ms)
    return found


def recorded(env: dict[str, str], expected: int) -> dict[str, int]:
    """The agent turns the proxied streams became (every one of them, complete, or the
    recording fell behind or failed): waited for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run([sys.executable, "-c", COUNT], cwd=REPO, env=env, check=True,
                              capture_output=True, text=True)
        counts = json.loads(done.stdout.strip().splitlines()[-1])
        if counts["complete"] >= expected or time.monotonic() > deadline:
            return {"expected": expected, **counts}
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.005, help="seconds between SSE events")
    parser.add_argument("--spread", type=float, default=0.0,
                        help="seconds over which a round's requests start (0: all at once)")
    parser.add_argument("--forward-only", action="store_true",
                        help="proxy through a path that is forwarded but not recorded")
    parser.add_argument("--upstream-only", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_only:
        serve_upstream(args.upstream_only, args.pace)
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        up_port, app_port = free_port(), free_port()
        env.update({"DJANGO_SETTINGS_MODULE": "turnscope.settings", "TURNSCOPE_VAR_DIR": tmp,
                    "SQLITE_PATH": str(Path(tmp) / "bench.sqlite3"), "LOG_LEVEL": "WARNING",
                    "TURNSCOPE_UPSTREAM_ANTHROPIC": f"http://127.0.0.1:{up_port}",
                    "PYTHONPATH": str(REPO) + ":/tmp"})
        setup = subprocess.run([sys.executable, "-c", SETUP], cwd=REPO, env=env, check=True,
                               capture_output=True, text=True)
        token = json.loads(setup.stdout.strip().splitlines()[-1])["token"]
        upstream = subprocess.Popen([sys.executable, "-m", "bench.proxy", "--upstream-only",
                                     str(up_port), "--pace", str(args.pace)], cwd=REPO, env=env)
        daphne = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                                   str(app_port), "instr_asgi:application"], cwd=REPO,
                                  env=env, stdout=subprocess.DEVNULL)
        try:
            wait_listening(up_port, upstream, "the recorded upstream")
            wait_listening(app_port, daphne, "daphne")
            report = asyncio.run(measure(
                args, f"http://127.0.0.1:{up_port}/v1/messages",
                f"http://127.0.0.1:{app_port}/proxy/anthropic/v1/messages"
                + ("/bench" if args.forward_only else ""), token, daphne.pid))
            report["recorded_turns"] = recorded(env, 0 if args.forward_only
                                                else args.streams * (args.rounds + 1))
        finally:
            for proc in (daphne, upstream):
                proc.terminate()
                proc.wait(10)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
