from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.models import Conversation
from conversations.projections import EXPORT_FORMATS, PROJECTIONS, export_stream


class Command(BaseCommand):
    help = "Write a conversation export to stdout (JSON contract, or markdown / html)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("conversation_id")
        parser.add_argument("--projection", choices=PROJECTIONS, default="portable")
        parser.add_argument("--format", choices=EXPORT_FORMATS, default="json")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conversation = Conversation.objects.get(pk=options["conversation_id"])
        except (Conversation.DoesNotExist, ValidationError):
            raise CommandError(f"no conversation {options['conversation_id']!r}") from None
        last = b""
        for chunk in export_stream(conversation, options["format"], options["projection"]):
            self.stdout.write(chunk.decode(), ending="")  # a chunk ends between characters
            last = chunk
        if not last.endswith(b"\n"):
            self.stdout.write("")
