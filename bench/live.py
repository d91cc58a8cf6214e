"""Live fan-out: M concurrent replays at 20x with N websocket viewers each, on ONE process.

    uv run python -m bench.live [--replays 20] [--viewers 10] [--speed 20] [--seconds 30]
    uv run python -m bench.live --knee [--steps 50,100,200,400]    # where p99 crosses 80 ms
    uv run python -m bench.live --source http [--pace 0.01]        # turns over real HTTP

Phase 1 (live): a daphne process (SQLite, in-memory channel layer) replays the bundled samples
into M conversations at once, over and over for at least ``--seconds``, each watched by N
websocket clients. Measured: the latency a viewer sees, from when a delta's (oldest) text
reached the runner (its ``rx`` stamp) to client receipt, and beside it the latency from
publish (``ts``, after the coalescing window), p50/p99/max, and how long text was held in the
runner (``rx`` to ``ts``: the window, and whatever a flush waited for); characters
lost or duplicated (every block's deltas must spell the stored event's text exactly); server
CPU per streamed KB. Targets (viewer-seen): p50 <= 30 ms, p99 <= 80 ms at 200 viewers.

``--source http``: the turns come from the fake upstream (``upstream.recorded``, a
``RecordedUpstream`` in its own process, on a real socket, one chunk every ``--pace`` seconds)
through ``upstream.client`` and the provider's stream parser, as the recording proxy consumes
a provider, instead of from a recording in memory.

``--knee``: phase 1 alone at each total number of viewers in ``--steps`` (M replays, viewers
spread over them), one after the other; reports each step's figures and the first step whose
viewer-seen p99 is over the target.

Phase 2 (floor), in the same run: a bare websocket server (``websockets``, no Django, no
Channels) that echoes each publisher message to its group's N subscribers, fed the same message
sizes and timings as phase 1 recorded. Same latency and CPU figures; the report gives the
ratios. Target: live p99 <= 50 ms. The server's event-loop lag is reported too: when it is
high the loop was starved (the GIL held by the thread doing the DB work, or the CPU taken by
the clients and anything else on the machine), not busy with the live path itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from bench.live_servers import (
    REPO,
    cpu_seconds,
    percentile,
    serve_floor,
    serve_live,
    serve_upstream,
)


@contextlib.contextmanager
def collector_paused() -> Any:
    """No garbage collection in the bench's own process while it measures: its clients keep
    every frame they receive, and a full collection of them (80-90 ms, seen mid-run) stalls
    every client at once, which would read as server latency. Both phases run under it."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


async def _spawn(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.live", *args, cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, limit=2**26,
    )


async def _line(proc: asyncio.subprocess.Process, timeout: float = 120) -> dict[str, Any]:
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), timeout)
        if not raw:
            raise RuntimeError("server process ended early")
        try:
            return json.loads(raw)
        except ValueError:
            continue


async def _wait_port(port: int) -> None:
    for _ in range(300):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Viewer:
    """One websocket client of a conversation: keeps every delta and when it arrived."""

    def __init__(self) -> None:
        self.latencies: list[float] = []  # publish -> receipt
        self.seen: list[float] = []  # text reached the runner -> receipt: what a viewer waits
        self.held: list[float] = []  # text reached the runner -> publish: the runner's part
        self.deltas: list[dict[str, Any]] = []
        self.bytes = 0
        self.wire_bytes = 0  # every frame's payload, whatever it carries
        self.frames = 0
        self.timeline: list[tuple[float, int]] = []  # (publish ts, frame size) per frame

    async def watch(self, url: str, headers: dict[str, str], ready: asyncio.Event,
                    stop: asyncio.Event) -> None:
        from websockets.asyncio.client import connect

        async with connect(url, additional_headers=headers, compression=None,
                           max_size=2**22) as ws:
            ready.set()
            # Read until told to stop, then close: no timer per frame (a wait_for per receive
            # cost the clients, which share the machine with the server, a third of their CPU).
            closer = asyncio.ensure_future(self._close_on(stop, ws))
            try:
                async for raw in ws:
                    now = time.time() * 1000
                    self.frames += 1
                    self.wire_bytes += len(raw)
                    message = orjson.loads(raw)
                    batch = message["messages"] if message.get("type") == "batch" else [message]
                    self.timeline.append((batch[0].get("ts", now), len(raw)))
                    for m in batch:
                        if m.get("type") == "delta":
                            self.latencies.append(now - m["ts"])
                            self.seen.append(now - m.get("rx", m["ts"]))
                            self.held.append(m["ts"] - m.get("rx", m["ts"]))
                            self.deltas.append(m)
                            self.bytes += len(m["text"].encode())
            finally:
                closer.cancel()

    @staticmethod
    async def _close_on(stop: asyncio.Event, ws: Any) -> None:
        await stop.wait()
        await ws.close()


def check_text(viewer: Viewer, stored: list[str]) -> tuple[int, int]:
    """(lost, duplicated) characters: a viewer's deltas, put back into blocks by their seqs,
    against the stored texts of the blocks."""
    seen: dict[tuple[str, int], int] = defaultdict(int)
    blocks: dict[tuple[str, int], list[str]] = defaultdict(list)
    duplicated = 0
    for m in viewer.deltas:
        key = (m["turn"], m["delta_seq"])
        seen[key] += 1
        if seen[key] > 1:
            duplicated += len(m["text"])
            continue
        blocks[(m["turn"], m["block_seq"])].append(m["text"])
    received = ["".join(parts) for _, parts in sorted(blocks.items(), key=lambda kv: kv[0])]
    lost = max(0, sum(len(t) for t in stored) - sum(len(t) for t in received))
    if sorted(received) != sorted(stored):
        lost = max(lost, 1)
    return lost, duplicated


async def live_phase(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    port = _free_port()
    upstream_proc = None
    upstream = ""
    if args.source == "http":
        upstream_port = _free_port()
        upstream_proc = await _spawn("--serve-upstream", str(upstream_port), str(args.pace),
                                     env=env)
        await _line(upstream_proc)
        await _wait_port(upstream_port)
        upstream = f"http://127.0.0.1:{upstream_port}"
    proc = await _spawn("--serve-live", str(port), str(args.replays), str(args.viewers),
                        str(args.speed), str(args.seconds), upstream or "-", env=env)
    try:
        info = await _line(proc)
        await _wait_port(port)
        headers = {"Cookie": f"sessionid={info['session']}", "Origin": f"http://127.0.0.1:{port}"}
        stop = asyncio.Event()
        viewers: dict[str, list[Viewer]] = {}
        tasks = []
        # Paused before the last viewer connects: the server starts the replays right then.
        with collector_paused():
            for conversation in info["conversations"]:
                viewers[conversation] = []
                for _ in range(args.viewers):
                    viewer, ready = Viewer(), asyncio.Event()
                    viewers[conversation].append(viewer)
                    url = f"ws://127.0.0.1:{port}/ws/conversations/{conversation}/"
                    tasks.append(asyncio.create_task(viewer.watch(url, headers, ready, stop)))
                    await ready.wait()
            start = await _line(proc)
            cpu0, client0 = cpu_seconds(proc.pid), cpu_seconds(os.getpid())
            done = await _line(proc, timeout=600 + 2 * args.seconds)
            cpu1, client1 = cpu_seconds(proc.pid), cpu_seconds(os.getpid())
            await asyncio.sleep(0.5)  # the last deltas in flight
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        proc.terminate()
        await proc.wait()
        if upstream_proc is not None:
            upstream_proc.terminate()
            await upstream_proc.wait()
    everyone = [v for vs in viewers.values() for v in vs]
    lost = duplicated = 0
    for conversation, vs in viewers.items():
        for v in vs:
            lo, du = check_text(v, done["texts"][conversation])
            lost, duplicated = lost + lo, duplicated + du
    streamed_kb = sum(len(t.encode()) for ts in done["texts"].values() for t in ts) / 1024
    delivered_kb = sum(v.bytes for v in everyone) / 1024
    # the frame timeline of one viewer per conversation, for the floor to replay
    timeline = {c: vs[0].timeline for c, vs in viewers.items()}
    first = min((m["ts"] for v in everyone for m in v.deltas), default=0)
    by_second: dict[int, list[float]] = defaultdict(list)
    for v in everyone:
        for m, latency in zip(v.deltas, v.seen, strict=True):
            by_second[int((m["ts"] - first) // 1000)].append(latency)
    return {
        "by_second": {k: by_second[k] for k in sorted(by_second)},
        "latencies": [x for v in everyone for x in v.latencies],
        "seen": [x for v in everyone for x in v.seen],
        "held": [x for v in everyone for x in v.held],
        "messages": sum(len(v.deltas) for v in everyone),
        "frames": sum(v.frames for v in everyone),
        "lost": lost, "duplicated": duplicated,
        "seconds": done["done"] - start["start"], "loop_lag": done["loop_lag"],
        "cpu": cpu1 - cpu0, "streamed_kb": streamed_kb, "delivered_kb": delivered_kb,
        "wire_kb": sum(v.wire_bytes for v in everyone) / 1024,
        "loop_cpu": done["loop_cpu"], "client_cpu": client1 - client0, "timeline": timeline,
    }


async def floor_phase(args: argparse.Namespace, env: dict[str, str],
                      timeline: dict[str, list[tuple[float, int]]]) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    port = _free_port()
    proc = await _spawn("--serve-floor", str(port), env=env)
    try:
        await _line(proc)
        stop = asyncio.Event()
        viewers: list[Viewer] = []
        tasks = []
        for group in timeline:
            for _ in range(args.viewers):
                viewer, ready = Viewer(), asyncio.Event()
                viewers.append(viewer)
                tasks.append(asyncio.create_task(viewer.watch(
                    f"ws://127.0.0.1:{port}/sub/{group}", {}, ready, stop)))
                await ready.wait()
        t0 = 0.0

        async def publish(group: str, steps: list[tuple[float, int]]) -> None:
            if not steps:
                return
            first = steps[0][0]
            async with connect(f"ws://127.0.0.1:{port}/pub/{group}", compression=None) as ws:
                for n, (ts, size) in enumerate(steps, start=1):
                    delay = (t0 + ts - first) - time.time() * 1000
                    if delay > 0:
                        await asyncio.sleep(delay / 1000)
                    await ws.send(json.dumps({"type": "delta", "turn": group, "delta_seq": n,
                                              "block_seq": n, "ts": time.time() * 1000,
                                              "text": "x" * max(0, size - 100)}))

        with collector_paused():
            cpu0 = cpu_seconds(proc.pid)
            t0 = time.time() * 1000
            await asyncio.gather(*(publish(g, s) for g, s in timeline.items()))
            cpu1 = cpu_seconds(proc.pid)
            await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        proc.terminate()
        await proc.wait()
    sent = sum(len(s) for s in timeline.values()) * args.viewers
    received = sum(len(v.deltas) for v in viewers)
    delivered_kb = sum(v.bytes for v in viewers) / 1024
    return {"latencies": [x for v in viewers for x in v.latencies], "messages": received,
            "missing_messages": sent - received, "cpu": cpu1 - cpu0,
            "delivered_kb": delivered_kb, "wire_kb": sum(v.wire_bytes for v in viewers) / 1024}


TARGET_P50, TARGET_P99 = 30.0, 80.0  # ms, viewer-seen, at 200 viewers on one process


def report(args: argparse.Namespace, live: dict[str, Any], floor: dict[str, Any]) -> None:
    lp50, lp99 = percentile(live["latencies"], 0.5), percentile(live["latencies"], 0.99)
    sp50, sp99 = percentile(live["seen"], 0.5), percentile(live["seen"], 0.99)
    fp50, fp99 = percentile(floor["latencies"], 0.5), percentile(floor["latencies"], 0.99)
    live_cpu_kb = 1000 * live["cpu"] / max(live["delivered_kb"], 1e-9)
    floor_cpu_kb = 1000 * floor["cpu"] / max(floor["delivered_kb"], 1e-9)
    source = (f"from the fake upstream over HTTP (a chunk every {args.pace * 1000:.0f} ms)"
              if args.source == "http" else f"recordings in memory at {args.speed}x")
    print(f"live fan-out: {args.replays} replays x {args.viewers} viewers, {source}, "
          f"one daphne process (SQLite, {args.layer or 'the configured layer'})")
    print(f"  run {live['seconds']:.1f} s, {live['frames']} frames with {live['messages']} "
          f"deltas received, "
          f"{live['streamed_kb']:.1f} KB streamed, {live['delivered_kb']:.1f} KB delivered")
    met = sp50 <= TARGET_P50 and sp99 <= TARGET_P99
    print(f"  latency viewer-seen (text reached the runner -> receipt)  p50 {sp50:6.1f} ms  "
          f"p99 {sp99:6.1f} ms  max {max(live['seen'] or [0]):6.1f} ms   (target p50 <= "
          f"{TARGET_P50:.0f}, p99 <= {TARGET_P99:.0f} ms: {'met' if met else 'MISSED'})")
    print(f"  latency publish->receipt  p50 {lp50:6.1f} ms  p99 {lp99:6.1f} ms  "
          f"max {max(live['latencies'] or [0]):6.1f} ms")
    held = live["held"]
    print(f"  held in the runner (text reached the runner -> publish)  p50 "
          f"{percentile(held, 0.5):6.1f} ms  p90 {percentile(held, 0.9):6.1f} ms  "
          f"p99 {percentile(held, 0.99):6.1f} ms")
    print("  viewer-seen p99 per second of the run: " + ", ".join(
        f"{percentile(v, 0.99):.0f}" for v in live["by_second"].values()) + " ms")
    print("  server event-loop lag (a 10 ms sleeper woken late) p50 {:.1f} ms, p99 {:.1f} ms, "
          "max {:.1f} ms".format(*live["loop_lag"]))
    print(f"  lost characters {live['lost']}, duplicated characters {live['duplicated']}")
    print(f"  server CPU {live['cpu']:.2f} s = {1000 * live['cpu'] / live['streamed_kb']:.1f} "
          f"ms per streamed KB, {live_cpu_kb:.2f} ms per delivered KB")
    print(f"    of which the event loop {live['loop_cpu']:.2f} s, the database and other threads "
          f"{live['cpu'] - live['loop_cpu']:.2f} s; the bench's clients used "
          f"{live['client_cpu']:.2f} s (the machine has {os.cpu_count()} cores)")
    print(f"floor: bare websocket group echo, same frame sizes and timings "
          f"({floor['messages']} received, {floor['missing_messages']} missing)")
    print(f"  latency send->receipt     p50 {fp50:6.1f} ms  p99 {fp99:6.1f} ms  "
          f"max {max(floor['latencies'] or [0]):6.1f} ms")
    print(f"  server CPU {floor['cpu']:.2f} s = {floor_cpu_kb:.2f} ms per delivered KB")
    # The same frames went out of both servers; a delivered KB is the deltas' text for the live
    # server but the whole frame for the floor's (its text stands in for everything a live
    # frame carries: seqs, ids, rendered blocks, events), so per frame KB is the like-for-like
    # ratio; the text one is kept beside it, as the figure earlier runs reported.
    live_wire, floor_wire = (1000 * f["cpu"] / max(f["wire_kb"], 1e-9) for f in (live, floor))
    print(f"  frames on the wire: live {live['wire_kb']:.0f} KB, floor {floor['wire_kb']:.0f} KB;"
          f" server CPU per wire KB: live {live_wire:.3f} ms, floor {floor_wire:.3f} ms")
    print(f"ratio live/floor: p50 {lp50 / max(fp50, 1e-9):.1f}x, "
          f"p99 {lp99 / max(fp99, 1e-9):.1f}x, "
          f"CPU per wire KB (the same frames) {live_wire / max(floor_wire, 1e-9):.1f}x; "
          f"CPU per delivered KB {live_cpu_kb / max(floor_cpu_kb, 1e-9):.1f}x (live: text KB, "
          "floor: frame KB)")


async def knee(args: argparse.Namespace, env: dict[str, str]) -> None:
    """Phase 1 at each step of total viewers; the first step over the target is the knee."""
    rows = []
    crossed = None
    for total in args.steps:
        args.viewers = max(1, round(total / args.replays))
        live = await live_phase(args, env)
        row = {"viewers": args.replays * args.viewers,
               "seen_p50": percentile(live["seen"], 0.5),
               "seen_p99": percentile(live["seen"], 0.99),
               "publish_p50": percentile(live["latencies"], 0.5),
               "publish_p99": percentile(live["latencies"], 0.99),
               "lost": live["lost"], "duplicated": live["duplicated"],
               "seconds": live["seconds"], "loop_lag_p99": live["loop_lag"][1]}
        rows.append(row)
        print("  {viewers:5d} viewers: viewer-seen p50 {seen_p50:6.1f} ms p99 {seen_p99:6.1f} ms"
              " | publish p50 {publish_p50:6.1f} p99 {publish_p99:6.1f} ms | lost {lost} dup "
              "{duplicated} | {seconds:.0f} s, loop lag p99 {loop_lag_p99:.0f} ms".format(**row),
              flush=True)
        if crossed is None and row["seen_p99"] > TARGET_P99:
            crossed = row["viewers"]
    print(f"knee ({args.replays} replays, {args.source} source): "
          + (f"viewer-seen p99 crosses {TARGET_P99:.0f} ms at {crossed} viewers"
             if crossed else f"p99 stays under {TARGET_P99:.0f} ms up to {rows[-1]['viewers']}"
             " viewers"))
    if args.json:
        Path(args.json).write_text(json.dumps({"knee": crossed, "steps": rows}, indent=2))


def _environment(args: argparse.Namespace) -> dict[str, str]:
    tmp = tempfile.mkdtemp(prefix="turnscope-bench-live-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"SQLITE_PATH": str(Path(tmp) / "bench.sqlite3"), "TURNSCOPE_VAR_DIR": tmp,
                "PYTHONPATH": str(REPO), "DJANGO_SETTINGS_MODULE": "turnscope.settings",
                "LOG_LEVEL": "ERROR"})
    if args.layer:
        env["BENCH_LIVE_LAYER"] = args.layer
    return env


async def bench(args: argparse.Namespace) -> None:
    env = _environment(args)
    if args.knee:
        await knee(args, env)
        return
    live = await live_phase(args, env)
    floor = await floor_phase(args, env, live["timeline"])
    report(args, live, floor)
    if args.json:
        Path(args.json).write_text(json.dumps({
            k: v for k, v in {**{f"live_{k}": v for k, v in live.items()},
                              **{f"floor_{k}": v for k, v in floor.items()}}.items()
            if "latencies" not in k and "timeline" not in k and "by_second" not in k
            and k != "live_seen"},
            indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--viewers", type=int, default=10)
    parser.add_argument("--speed", type=float, default=20.0)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    parser.add_argument("--layer", default="",
                        help="channel layer backend for the live server (default: settings)")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="replay the samples round after round for at least this long")
    parser.add_argument("--source", choices=("memory", "http"), default="memory",
                        help="recordings in memory, or the fake upstream over HTTP")
    parser.add_argument("--pace", type=float, default=0.01,
                        help="with --source http: seconds between the upstream's chunks")
    parser.add_argument("--knee", action="store_true",
                        help="phase 1 at each of --steps total viewers; report the knee")
    parser.add_argument("--steps", type=lambda v: [int(x) for x in v.split(",")],
                        default=[50, 100, 200, 400])
    parser.add_argument("--serve-live", nargs=6,
                        metavar=("PORT", "M", "N", "SPEED", "SECONDS", "UPSTREAM"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--serve-upstream", nargs=2, metavar=("PORT", "PACE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_live:
        port, m, n, speed, seconds, upstream = args.serve_live
        serve_live(int(port), int(m), int(n), float(speed), float(seconds),
                   "" if upstream == "-" else upstream)
    elif args.serve_upstream:
        serve_upstream(int(args.serve_upstream[0]), float(args.serve_upstream[1]))
    elif args.serve_floor:
        serve_floor(int(args.serve_floor))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
