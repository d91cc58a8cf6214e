"""Issue an API token for a user (for scripts: ``Authorization: Token <key>``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = (
        "Print an API token for USER (creating it if needed). --reset replaces an existing "
        "token, which stops working at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--reset", action="store_true", help="replace the existing token")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: options["username"]})
        except User.DoesNotExist:
            raise CommandError(f"no user named {options['username']!r}") from None
        if not user.is_active:
            raise CommandError(f"user {options['username']!r} is inactive")
        if options["reset"]:
            Token.objects.filter(user=user).delete()
        token, _created = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
