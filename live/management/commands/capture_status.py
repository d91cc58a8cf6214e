"""``python manage.py capture_status``: how far behind recording is — the exchanges this host's
capture log (``live.capture``) holds that are not recorded yet: how many, how many bytes, how old
the oldest is, how each ended — and the server instances that own them."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from live import capture, instances


class Command(BaseCommand):
    help = "How far behind recording is: the capture log's exchanges not recorded yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--list", type=int, default=0, metavar="N",
                            help="also list the N oldest exchanges waiting")

    def handle(self, *args: Any, **options: Any) -> None:
        log = capture.get_log()
        lag = log.lag()
        self.stdout.write(f"capture log  {log.path}")
        if not lag.count:
            self.stdout.write("recording is up to date: no exchange waits to be recorded")
            return
        states = ", ".join(f"{n} {state}" for state, n in sorted(lag.by_state.items()))
        self.stdout.write(f"waiting      {lag.count} exchange(s), {lag.bytes} bytes ({states})")
        self.stdout.write(f"oldest       {lag.seconds:.1f} s ago")
        owners = set(log.instances_pending())
        gone = instances.gone(owners)
        for owner in sorted(owners):
            state = "gone: the next server to start records them" if owner in gone else "alive"
            self.stdout.write(f"instance     {owner} ({state})")
        takers = {t: n for t, n in lag.by_taker.items() if t is not None}
        gone_takers = instances.gone(set(takers))
        for taker, count in sorted(takers.items()):
            state = ("gone: a server's next round frees them" if taker in gone_takers
                     else "alive")
            self.stdout.write(f"recording    {count} taken by {taker} ({state})")
        if untaken := lag.by_taker.get(None, 0):
            self.stdout.write(f"untaken      {untaken} (not being recorded yet)")
        for x in log.pending(limit=options["list"]) if options["list"] else []:
            self.stdout.write(f"  {x.id}  {x.meta.get('provider', '')} {x.meta.get('path', '')}"
                              f"  {x.state}  {x.bytes} bytes  {time.time() - x.opened:.1f} s"
                              f"{'  turn ' + x.turn if x.turn else ''}")
