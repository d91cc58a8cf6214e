"""``python manage.py capture_recorder --parent PID --server ID``: a recorder process
(``proxy.recorders``), as ``serve`` starts it (``TURNSCOPE_RECORDERS``): it records what the
server it was started by captured, and stops once that server is gone. Not for running by hand:
beside a server that records its log itself, two would record the same exchanges.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from proxy import recorders


class Command(BaseCommand):
    help = "Record the capture log beside a server (serve starts these itself)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent", type=int, required=True,
                            help="the server's process id: the recorder stops when it is gone")
        parser.add_argument("--server", required=True, help="the server's instance id")

    def handle(self, *args: Any, **options: Any) -> None:
        if os.getppid() != options["parent"]:
            raise CommandError("serve starts its recorders itself (TURNSCOPE_RECORDERS)")
        if reason := recorders.why_not_shared():
            raise CommandError(f"a recorder cannot run beside the server here: {reason}")
        recorders.run(options["parent"], options["server"])
