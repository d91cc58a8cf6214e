"""``python manage.py capture_recorder --parent PID``: a recorder process (``proxy.recorders``).

``serve`` starts these itself (``TURNSCOPE_RECORDERS``); run by hand, it records this host's
capture log beside the server whose process id it is given, and stops when that process is gone.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from proxy import recorders


class Command(BaseCommand):
    help = "Record the capture log beside a server (serve starts these itself)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent", type=int, required=True,
                            help="the server's process id: the recorder stops when it is gone")

    def handle(self, *args: Any, **options: Any) -> None:
        if reason := recorders.why_not_shared():
            raise CommandError(f"a recorder cannot run beside the server here: {reason}")
        recorders.run(options["parent"])
