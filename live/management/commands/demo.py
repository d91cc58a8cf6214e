"""``python manage.py demo``: everything a newcomer needs to watch a turn stream.

Migrates, loads the bundled samples (owned by a local user ``demo``, idempotent), sets a fresh
password for that user and prints the login, then serves with daphne on 127.0.0.1:8000 and
replays the samples live into a new conversation as soon as someone opens it.

It also serves the built-in recorded provider (``live.recorded_provider``) at ``/recorded``:
live calls to a provider whose key is not set go there, so a newcomer with no key can type a
prompt, press Send and watch an answer with a search and citations stream in.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from conversations import store
from live import bundled, calls, demo_hooks, recorded_provider, recovery, runner


class Command(BaseCommand):
    help = "Load the sample conversations, print a login, serve, and stream a live replay."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--speed", type=float, default=1.0,
                            help="pace multiplier of the live replay and of the recorded "
                            "provider's answers (1 = recorded pace, 0.5 = half as fast)")
        parser.add_argument("--wait", type=float, default=600.0,
                            help="seconds to wait for a viewer before streaming anyway")
        parser.add_argument("--rounds", type=int, default=3,
                            help="how many times to stream the samples")
        parser.add_argument("--no-serve", action="store_true",
                            help="prepare and print the login, but do not serve")
        parser.add_argument("--no-recorded", action="store_true",
                            help="do not serve the recorded provider (live calls then need "
                            "a provider key)")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        user, password = self._user()
        loaded = bundled.load(user)
        recovery.reap_orphans(force=True)  # turns a previous server left streaming
        live = store.create_conversation(
            title="Live demo: the sample conversations, streamed", owner=user
        )
        base = f"http://{options['host']}:{options['port']}"
        self.stdout.write(self.style.SUCCESS("Turnscope demo"))
        for sample, conversation, created in loaded:
            state = "loaded" if created else "already there"
            self.stdout.write(f"  sample {sample.slug}: /c/{conversation.pk}/ ({state})")
        self.stdout.write("")
        self.stdout.write(f"  open      {base}/accounts/login/?next=/c/{live.pk}/")
        self.stdout.write(f"  username  {user.get_username()}")
        self.stdout.write(f"  password  {password}   (new on every run)")
        self.stdout.write("")
        self.stdout.write("  The samples start streaming into that conversation as soon as it is "
                          "opened. Ctrl-C stops the server.")
        mounts = {} if options["no_serve"] else self._recorded(options)
        self.stdout.write("")
        self.stdout.write(f"  talk      {base}/ → New conversation, type a prompt, Send")
        for option in calls.provider_options():
            state = ("recorded provider (the bundled samples)" if option.recorded
                     else "live, with your key" if option.enabled else option.reason)
            self.stdout.write(f"            {option.provider:<10} {state}")
        if options["no_serve"]:
            return
        from live import serve

        plan = [(s, c) for s, c, _ in loaded]

        async def stream() -> None:
            joined = demo_hooks.watch(live.pk)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(joined.wait(), timeout=options["wait"])
            await asyncio.sleep(0.5)  # let the page settle after its first hello
            for _ in range(max(1, options["rounds"])):
                for sample, _conversation in plan:
                    await runner.run_recording(live, sample.provider, list(sample.responses),
                                               prompt=sample.prompt, speed=options["speed"])
                    await asyncio.sleep(2.0)

        serve.serve(options["host"], options["port"], on_ready=stream, mounts=mounts)

    def _recorded(self, options: dict[str, Any]) -> dict[str, Any]:
        """The recorded provider, mounted in this server, for the providers without a key
        (unless another one is configured, or ``--no-recorded``)."""
        if options["no_recorded"] or settings.TURNSCOPE_RECORDED_UPSTREAM:
            return {}
        host = options["host"] if options["host"] not in ("0.0.0.0", "::") else "127.0.0.1"
        settings.TURNSCOPE_RECORDED_UPSTREAM = (
            f"http://{host}:{options['port']}{recorded_provider.PREFIX}")
        speed = options["speed"] if options["speed"] > 0 else 1.0
        return {recorded_provider.PREFIX: recorded_provider.app(
            pace=recorded_provider.PACE / speed)}

    def _user(self) -> tuple[Any, str]:
        User = get_user_model()
        user, _ = User.objects.get_or_create(username="demo")
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.save()
        return user, password
