"""The server processes of ``bench.live`` (each started as ``python -m bench.live --serve-…``):
the live server (daphne, the samples replayed live into conversations its viewers watch), the
fake upstream they can stream from over HTTP, and the floor (a bare websocket fan-out). And the
figures' helpers both sides use (CPU seconds of a process or thread, percentiles)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, stat: str = "") -> float:
    fields = Path(stat or f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def loop_thread_cpu() -> float:
    """CPU seconds of this process's main thread (daphne's event loop)."""
    return cpu_seconds(os.getpid(), f"/proc/self/task/{threading.get_native_id()}/stat")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def serve_upstream(port: int, pace: float) -> None:
    """The fake provider: every bundled sample's recorded responses over HTTP, chosen by the
    request's ``sample`` and ``n`` query parameters (so concurrent turns never mix them up)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    import django
    import uvicorn

    django.setup()
    from live import bundled
    from upstream.recorded import RecordedUpstream, Request, error_reply, reply

    catalog = {(s.slug, n): reply(s.provider, r.raw.encode())
               for s in bundled.samples() for n, r in enumerate(s.responses)}

    def respond(request: Request) -> Any:
        params = request.params
        key = (params.get("sample", [""])[0], int(params.get("n", ["0"])[0]))
        return catalog.get(key) or error_reply("anthropic", 404, "not_found", str(key))

    app = RecordedUpstream(respond=respond, pace=pace)
    app.requests = _Forgetful()  # a long run would keep every request otherwise
    app.sent = _Forgetful()
    print(json.dumps({"upstream": port}), flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                loop="asyncio", http="h11", ws="none", access_log=False)


class _Forgetful(list):  # type: ignore[type-arg]
    def append(self, item: Any) -> None:
        pass


_PATHS = {"anthropic": "/v1/messages", "openai": "/v1/responses",
          "google": "/v1beta/models/gemini:streamGenerateContent"}


def _over_http(upstream: str, sample: Any) -> list[Any]:
    """The sample's responses as the proxy reads a provider: requested over HTTP with
    ``upstream.client``, the body's bytes parsed as they arrive."""
    import providers
    from upstream import client

    async def response(n: int, wire: Any) -> Any:
        path = _PATHS[sample.provider]
        target = f"{upstream}{path}?alt=sse&sample={sample.slug}&n={n}"
        answer = await client.send("POST", target, content=b"{}",
                                   headers=[(b"content-type", b"application/json")])
        parser = providers.stream_parser(sample.provider, wire.context())
        try:
            async for chunk in answer.aiter_raw():
                for part in parser.feed(chunk):
                    yield part
            for part in parser.close():
                yield part
        finally:
            await answer.aclose()

    return [response(n, wire) for n, wire in enumerate(sample.responses)]


def serve_live(port: int, replays: int, viewers: int, speed: float, seconds: float = 0.0,
               upstream: str = "") -> None:
    """The live server: prepare, print the session and conversations, then serve; start the
    replays once every viewer is connected, and print the stored texts when they are done."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
    import django

    django.setup()
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from conversations import store
    from conversations.models import Conversation
    from live import bundled, demo_hooks, runner, serve

    if os.environ.get("BENCH_LIVE_LAYER"):
        from django.conf import settings

        settings.CHANNEL_LAYERS = {"default": {"BACKEND": os.environ["BENCH_LIVE_LAYER"]}}
    call_command("migrate", interactive=False, verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    conversations = [store.create_conversation(title=f"bench {i}", owner=user)
                     for i in range(replays)]
    samples = bundled.samples()
    joined = 0
    everyone = asyncio.Event()

    def viewer_joined(conversation_id: Any) -> None:
        nonlocal joined
        joined += 1
        if joined >= replays * viewers:
            everyone.set()

    demo_hooks.viewer_joined = viewer_joined

    lags: list[float] = []

    async def watch_loop() -> None:
        """How late the event loop wakes a 10 ms sleeper: time it is busy or starved."""
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.01)
            lags.append((loop.time() - t - 0.01) * 1000)

    async def run_all() -> None:
        await everyone.wait()
        loop_cpu = loop_thread_cpu()
        print(json.dumps({"start": time.time()}), flush=True)
        monitor = asyncio.ensure_future(watch_loop())

        began = time.monotonic()

        async def one(conversation: Conversation) -> None:
            # Round after round of the samples, until the run has lasted ``seconds``.
            while True:
                for sample in samples:
                    if upstream:
                        await runner.TurnRunner(conversation).run(
                            _over_http(upstream, sample), prompt=sample.prompt)
                    else:
                        await runner.run_recording(conversation, sample.provider,
                                                   list(sample.responses),
                                                   prompt=sample.prompt, speed=speed)
                if time.monotonic() - began >= seconds:
                    return

        profile = None
        if os.environ.get("BENCH_LIVE_PROFILE"):  # where the server's loop spends its time
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        await asyncio.gather(*(one(c) for c in conversations))
        if profile is not None:
            profile.disable()
            profile.dump_stats(os.environ["BENCH_LIVE_PROFILE"])
        texts = {}
        for c in conversations:
            texts[str(c.pk)] = await _texts(c)
        monitor.cancel()
        print(json.dumps({"done": time.time(), "texts": texts,
                          "loop_cpu": loop_thread_cpu() - loop_cpu,
                          "loop_lag": [percentile(lags, 0.5), percentile(lags, 0.99),
                                       max(lags or [0])]}), flush=True)

    print(json.dumps({"session": session.session_key,
                      "conversations": [str(c.pk) for c in conversations]}), flush=True)
    serve.serve("127.0.0.1", port, on_ready=run_all, static=False, verbosity=0)


async def _texts(conversation: Any) -> list[str]:
    from asgiref.sync import sync_to_async

    from conversations.models import Event

    return await sync_to_async(list)(
        Event.objects.filter(conversation=conversation, turn__role="agent",
                             kind__in=("message", "reasoning")).exclude(text="")
        .order_by("seq").values_list("text", flat=True)
    )


def serve_floor(port: int) -> None:
    """A bare websocket group echo: /pub/<g> messages go to every /sub/<g> client."""
    from websockets.asyncio.server import serve

    groups: dict[str, set[Any]] = defaultdict(set)

    async def handler(ws: Any) -> None:
        _, role, group = ws.request.path.split("/", 2)
        if role == "sub":
            groups[group].add(ws)
            try:
                await ws.wait_closed()
            finally:
                groups[group].discard(ws)
            return
        async for message in ws:
            for sub in list(groups[group]):
                try:
                    await sub.send(message)
                except Exception:
                    groups[group].discard(sub)

    async def main() -> None:
        async with serve(handler, "127.0.0.1", port, compression=None):
            print(json.dumps({"ready": True}), flush=True)
            await asyncio.Future()

    asyncio.run(main())
