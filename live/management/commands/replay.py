"""``python manage.py replay ID [--speed N]``: replay a conversation live into a new one."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.models import Conversation
from live import live_replay


class Command(BaseCommand):
    help = (
        "Replay a conversation live into a new conversation at the recorded pace (or N times "
        "faster), publishing to its viewers as it goes. Turns with a recording are fed through "
        "their provider's adapter again; others are rebuilt from their stored events."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("conversation_id", help="the conversation to replay")
        parser.add_argument("--speed", type=float, default=1.0,
                            help="pace multiplier (1 = recorded pace, 0 = as fast as possible)")
        parser.add_argument("--owner", default="",
                            help="username owning the new conversation (default: the source's)")

    def handle(self, *args: Any, **options: Any) -> None:
        source = Conversation.objects.filter(pk=_uuid(options["conversation_id"])).first()
        if source is None:
            raise CommandError(f"no conversation {options['conversation_id']}")
        owner = source.owner
        if options["owner"]:
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"no user {options['owner']!r}")
        if options["speed"] < 0:
            raise CommandError("--speed must be >= 0")
        target = live_replay.create_live_replay_target(source, owner)
        self.stdout.write(f"replaying {source.pk} into {target.pk} (/c/{target.pk}/)")
        if not getattr(settings, "REDIS_URL", ""):
            self.stdout.write(
                "note: without REDIS_URL this process has its own channel layer; viewers on a "
                "running server see the turn through their periodic resync only"
            )
        asyncio.run(live_replay.live_replay(source, target, speed=options["speed"]))
        for turn in target.turns.order_by("index"):
            model = f" {turn.provider} · {turn.model}" if turn.model else ""
            self.stdout.write(
                f"turn {turn.index} {turn.role}: {turn.status}"
                f"{' (' + turn.end_reason + ')' if turn.end_reason else ''}{model}, "
                f"{turn.events.count()} events"
            )


def _uuid(value: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise CommandError(f"{value!r} is not a conversation id") from None
