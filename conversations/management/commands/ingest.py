from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

import providers
from conversations.ingest import ResponseFile, ingest
from conversations.management.owners import OWNER_HELP, resolve_owner
from conversations.management.refusals import refused_input


class Command(BaseCommand):
    help = (
        "Ingest recorded provider responses (raw SSE, JSON lines or a JSON body) as one agent "
        "turn. Files after the first are continuations of the same turn (e.g. after pause_turn). "
        "The last line printed is the conversation id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", required=True, choices=sorted(providers.ADAPTERS))
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument("--title", default="", help="conversation title")
        parser.add_argument("--prompt", default="", help="the user message that asked for it")
        parser.add_argument("--owner", default="", help=OWNER_HELP)
        parser.add_argument("--api-version", default=None,
                            help="API version header in force (e.g. anthropic-version)")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = resolve_owner(options["owner"])
        context = providers.WireContext(api_version=options["api_version"])
        files = []
        for path in options["files"]:
            try:
                files.append(ResponseFile(str(path), path.read_bytes(), context))
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror}") from None
        with refused_input():  # MalformedInput names the file and line itself
            summary = ingest(
                options["provider"], files, owner=owner, title=options["title"],
                prompt=options["prompt"],
            )
        for line in summary.lines():
            self.stdout.write(line)
        self.stdout.write(str(summary.conversation.pk))
