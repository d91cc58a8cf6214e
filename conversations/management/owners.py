"""Who owns what a command writes: ``--owner USER``, else the only superuser."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

OWNER_HELP = ("username that owns the new conversations (default: the only superuser, if "
              "there is exactly one)")


def resolve_owner(username: str) -> Any:
    """The user named ``username``; without one, the only active superuser. Otherwise refuse:
    a conversation nobody owns is seen by staff only."""
    User = get_user_model()
    if username:
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
    superusers = list(User.objects.filter(is_superuser=True, is_active=True)[:2])
    if len(superusers) == 1:
        return superusers[0]
    why = "there is no superuser" if not superusers else "there is more than one superuser"
    raise CommandError(f"say who owns the conversations with --owner USER ({why})")
