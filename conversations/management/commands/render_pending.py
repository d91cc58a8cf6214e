"""Render the turns waiting in the background renderer's queue now (``conversations.warming``):
what a server does in its rounds, for a store no server runs on (an ingest from the command
line), or, with ``--all``, every finished turn again (after an upgrade changed the renderer,
whose older renderings are never served: the first reads would render them)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from conversations import warming


class Command(BaseCommand):
    help = ("Render the turns queued for background rendering (page fragment, message HTML, "
            "Markdown and HTML export chunks); --all queues every finished turn first.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true",
                            help="queue every finished turn first (after a renderer change)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["all"]:
            queued = warming.queue_all_finished()
            self.stdout.write(f"queued {queued} finished turns")
        taken = warming.drain_all()
        self.stdout.write(f"rendered {taken} turns; {warming.pending()} queued")
