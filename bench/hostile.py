"""Hostile responses through the recording proxy: does the server stay responsive and small?

    uv run python -m bench.hostile [--line-mb 100] [--bomb-mb 256]

A daphne process (SQLite, in-memory layer) proxies to a fake upstream in this process, which
answers two hostile responses in turn: one SSE line of ``--line-mb`` MB (plain), and a gzip body
of a few hundred kB that decodes to ``--bomb-mb`` MB. While each streams through the proxy (and
the recorder decodes its copy), the login page is fetched again and again. Reported per case:
the login page's p50 and worst time against its time before (target: worst under 1 s), how
long the app took to receive the stream, whether it got every byte, and the server's peak RSS
growth (``VmHWM``).
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.live import e2e
from tests.servers import served
from upstream.recorded import RecordedUpstream, Reply

MB = 1024 * 1024
BODY = (b'{"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": true, '
        b'"messages": [{"role": "user", "content": "Hi"}]}')


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def login_times(url: str, stop: threading.Event) -> list[float]:
    times = []
    with httpx.Client(timeout=60) as http:
        while not stop.is_set():
            start = time.perf_counter()
            http.get(url + "/accounts/login/").raise_for_status()
            times.append(time.perf_counter() - start)
    return times


def case(server: e2e.Daphne, token: str, expected: bytes) -> dict[str, object]:
    before = peak_rss(server.proc.pid)
    stop = threading.Event()
    results: list[list[float]] = []
    poller = threading.Thread(target=lambda: results.append(login_times(server.url, stop)))
    poller.start()
    start = time.perf_counter()
    received = bytearray()
    with httpx.Client(timeout=600) as http, http.stream(
        "POST", f"{server.url}/proxy/anthropic/v1/messages", content=BODY,
        headers={"x-api-key": "sk-ant-api03-bench000000000000", "x-turnscope-token": token,
                 "content-type": "application/json", "anthropic-version": "2023-06-01",
                 "accept-encoding": "gzip"},
    ) as response:
        for chunk in response.iter_raw():
            received += chunk
    streamed = time.perf_counter() - start
    time.sleep(2)  # the recorder finishes its copy meanwhile; the page is still polled
    stop.set()
    poller.join()
    times = sorted(results[0])
    return {"stream_s": round(streamed, 2), "intact": bytes(received) == expected,
            "login_p50_ms": round(times[len(times) // 2] * 1000, 1),
            "login_worst_ms": round(times[-1] * 1000, 1), "login_fetches": len(times),
            "rss_growth_mb": round((peak_rss(server.proc.pid) - before) / MB, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--line-mb", type=int, default=100)
    parser.add_argument("--bomb-mb", type=int, default=256)
    args = parser.parse_args()
    line = b"data: " + b"x" * (args.line_mb * MB) + b"\n\n"
    bomb = gzip.compress(b"data: " + b" " * (args.bomb_mb * MB) + b"\n\n", compresslevel=9)
    pieces = tuple(line[i:i + 64 * 1024] for i in range(0, len(line), 64 * 1024))
    upstream = RecordedUpstream([
        Reply(chunks=pieces),
        Reply(chunks=tuple(bomb[i:i + 16 * 1024] for i in range(0, len(bomb), 16 * 1024)),
              headers=(("content-encoding", "gzip"),)),
    ])
    with tempfile.TemporaryDirectory() as tmp, served(upstream) as fake:
        env = e2e.base_env(Path(tmp), TURNSCOPE_UPSTREAM_ANTHROPIC=fake.url)
        setup = e2e.prepare(env)
        server = e2e.Daphne(env, Path(tmp) / "daphne.log")
        try:
            with httpx.Client() as http:  # warm up, and the floor
                floor = []
                for _ in range(20):
                    start = time.perf_counter()
                    http.get(server.url + "/accounts/login/").raise_for_status()
                    floor.append(time.perf_counter() - start)
            print(f"login page alone: p50 {sorted(floor)[10] * 1000:.1f} ms")
            print(f"{args.line_mb} MB SSE line:", case(server, setup["token"], line))
            print(f"{len(bomb) // 1024} kB gzip decoding to {args.bomb_mb} MB:",
                  case(server, setup["token"], bomb))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
