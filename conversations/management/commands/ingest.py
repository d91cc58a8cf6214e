from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

import providers
from conversations.actions.create import announce_created
from conversations.ingest import (
    BULK_BATCH,
    AlreadyImported,
    BulkResult,
    ResponseFile,
    ingest,
    ingest_each,
)
from conversations.management.owners import OWNER_HELP, resolve_owner
from conversations.management.refusals import refused_input


class Command(BaseCommand):
    help = (
        "Ingest recorded provider responses (raw SSE, JSON lines or a JSON body) as one agent "
        "turn. Files after the first are continuations of the same turn (e.g. after pause_turn). "
        "The last line printed is the conversation id. With --each, every FILE (or every file "
        "under a directory) is its own conversation, all in one process: one line per "
        "conversation (id, title, file), problems on stderr, a progress bar on a terminal. "
        "Files the same owner ingested or imported before are not stored again: they are "
        "reported as already imported (a fourth column with --each), unless --copy."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", required=True, choices=sorted(providers.ADAPTERS))
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument("--each", action="store_true",
                            help="one conversation per file (directories: every file in them)")
        parser.add_argument("--batch", type=int, default=BULK_BATCH,
                            help=f"with --each: files per commit (default {BULK_BATCH})")
        parser.add_argument("--title", default="", help="conversation title")
        parser.add_argument("--prompt", default="", help="the user message that asked for it")
        parser.add_argument("--owner", default="", help=OWNER_HELP)
        parser.add_argument("--copy", action="store_true",
                            help="store a copy of what was ingested before, instead of "
                            "reporting it as already imported")
        parser.add_argument("--api-version", default=None,
                            help="API version header in force (e.g. anthropic-version)")

    def handle(self, *args: Any, **options: Any) -> None:
        self.verbosity = options["verbosity"]
        owner = resolve_owner(options["owner"])
        context = providers.WireContext(api_version=options["api_version"])
        if options["each"]:
            if options["title"] or options["prompt"]:
                raise CommandError("--title and --prompt name one conversation: not with --each")
            self.each(options["provider"], options["files"], owner, context,
                      max(1, options["batch"]), options["copy"])
            return
        files = []
        for path in options["files"]:
            try:
                files.append(ResponseFile(str(path), path.read_bytes(), context))
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror}") from None
        try:
            with refused_input():  # MalformedInput names the file and line itself
                summary = ingest(
                    options["provider"], files, owner=owner, title=options["title"],
                    prompt=options["prompt"], remember=not options["copy"],
                )
        except AlreadyImported as already:
            conversation = already.conversation
            self.stdout.write(f"already imported: {conversation.title} (--copy stores a copy)")
            self.stdout.write(str(conversation.pk))
            return
        announce_created(summary.conversation)
        for line in summary.lines():
            self.stdout.write(line)
        self.stdout.write(str(summary.conversation.pk))

    def each(self, provider: str, paths: list[Path], owner: Any,
             context: providers.WireContext, batch: int, copy: bool) -> None:
        names = list(_expand(paths))
        unreadable: list[str] = []

        def read() -> Iterator[ResponseFile]:
            for path in names:
                try:
                    yield ResponseFile(str(path), path.read_bytes(), context)
                except OSError as exc:
                    unreadable.append(f"{path}: {exc.strerror}")
                    bar.step(failed=True)

        if self.verbosity < 2:  # one line per conversation on stdout already; no log line each
            logging.getLogger("turnscope.ingest").setLevel(logging.WARNING)
        bar = Progress(len(names), sys.stderr)
        failed = 0
        for result in ingest_each(provider, read(), owner=owner, batch=batch, copy=copy,
                                  done=lambda r: bar.step(failed=bool(r.error))):
            failed += self.report(result)
        bar.close()
        for problem in unreadable:
            self.stderr.write(problem)
        failed += len(unreadable)
        if failed:
            raise CommandError(f"{failed} of {len(names)} files could not be ingested "
                               "(listed above); the others were")

    def report(self, result: BulkResult) -> int:
        if result.conversation is None:
            self.stderr.write(result.error if result.name in result.error
                              else f"{result.name}: {result.error}")
            return 1
        conversation = result.conversation
        if not result.already:
            announce_created(conversation)
        already = "\talready imported" if result.already else ""
        self.stdout.write(f"{conversation.pk}\t{conversation.title}\t{result.name}{already}")
        return 0


def _expand(paths: list[Path]) -> Iterator[Path]:
    """The files named, a directory's files (recursively, in name order, hidden ones left)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file()
                              and not any(part.startswith(".") for part in
                                          p.relative_to(path).parts))
        else:
            yield path


class Progress:
    """A one-line progress bar on ``stream`` when it is a terminal (nothing otherwise, so logs
    and pipes stay clean)."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.stream = total, stream
        self.done = self.failed = 0
        self.start = self.shown = time.monotonic()
        self.live = bool(getattr(stream, "isatty", lambda: False)())

    def step(self, *, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        now = time.monotonic()
        if self.live and (now - self.shown >= 0.1 or self.done == self.total):
            self.shown = now
            self.stream.write("\r" + self.line(now))
            self.stream.flush()

    def line(self, now: float) -> str:
        share = self.done / self.total if self.total else 1.0
        filled = int(share * self.WIDTH)
        rate = self.done / max(now - self.start, 1e-9)
        problems = f", {self.failed} failed" if self.failed else ""
        return (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
                f"files, {rate:.0f}/s{problems}")

    def close(self) -> None:
        if self.live and self.done:
            self.stream.write("\n")
            self.stream.flush()
