"""``manage.py import FILE...``: every format the upload page takes, detected by content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations import uploads
from conversations.actions.create import import_files
from conversations.management.owners import OWNER_HELP, resolve_owner


class Command(BaseCommand):
    help = (
        "Import conversations: Turnscope export documents, provider recordings (raw SSE, JSON "
        "lines or JSON bodies; the recordings of one provider among FILEs are one turn with its "
        "continuations), VCR cassettes, ChatGPT and Claude.ai data exports (the .zip or its "
        "conversations.json). Prints one line per conversation imported: id, title, turns, "
        "source (tab-separated); a conversation imported before (by the same owner) is not "
        "imported again: its line says 'already imported' in place of the turns. Problems go "
        "to stderr and make the exit status non-zero."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument("--owner", default="", help=OWNER_HELP)
        parser.add_argument("--format", default="auto", choices=sorted(uploads.FORMATS),
                            help="read every FILE as this format (default: detect)")
        parser.add_argument("--copy", action="store_true",
                            help="import a copy of what was imported before, instead of "
                            "reporting it as already imported")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = resolve_owner(options["owner"])
        files = []
        for path in options["files"]:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
            files.append(uploads.Upload(str(path), (lambda p=path: p.open("rb")),
                                        path.stat().st_size))
        problems = []
        for result in import_files(files, owner=owner, format=options["format"],
                                   copy=options["copy"]):
            if isinstance(result, uploads.Already):
                conversation = result.conversation
                self.stdout.write(f"{conversation.pk}\t{conversation.title}\talready imported"
                                  f"\t{result.source}")
            elif isinstance(result, uploads.Failed):
                problems.append(str(result))
                self.stderr.write(str(result))
            elif isinstance(result, uploads.Imported):
                self._imported(result)
        if problems:
            raise CommandError(f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: "
                               + "; ".join(problems[:5]))

    def _imported(self, result: uploads.Imported) -> None:
        conversation = result.conversation
        forks = f", {len(result.forks)} branches as forks" if result.forks else ""
        self.stdout.write(f"{conversation.pk}\t{conversation.title}\t{result.turns} turns"
                          f"{forks}\t{result.source}")
        for fork in result.forks:
            self.stdout.write(f"{fork.pk}\t{fork.title}\tfork at turn {fork.forked_at_turn}"
                              f"\t{result.source}")
        for note in result.notes:
            self.stderr.write(f"{result.source}: {note}")
