from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.management.refusals import refused_input
from conversations.projections import import_document


class Command(BaseCommand):
    help = "Import a conversation export document; prints the new conversation id."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--owner", default="", help="username that owns the conversation")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["owner"]:
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"no user named {options['owner']!r}")
        path: Path = options["file"]
        try:
            doc = orjson.loads(path.read_bytes())
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        except orjson.JSONDecodeError as exc:
            raise CommandError(f"{path}: not JSON ({exc})") from None
        with refused_input(str(path)):
            conversation = import_document(doc, owner=owner)
        self.stdout.write(str(conversation.pk))
