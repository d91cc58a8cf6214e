"""Who may see and change what. Owners see their conversations; staff see all of them.

Conversations a user may not see do not exist for that user (404, never 403), so ids cannot be
probed. Appending to a conversation (ingesting a turn) is for its owner only.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.permissions import IsAuthenticated

from conversations.models import Conversation


def visible_conversations(user: Any) -> QuerySet[Conversation]:
    queryset = Conversation.objects.all()
    if not (user and user.is_authenticated):
        return queryset.none()
    return queryset if user.is_staff else queryset.filter(owner=user)


def can_read_native(user: Any, conversation: Conversation) -> bool:
    """The native projection (provider payloads) is for the owner and staff only."""
    return bool(user and user.is_authenticated) and (
        user.is_staff or conversation.owner_id == user.pk
    )


class CanSeeConversation(IsAuthenticated):
    """Authenticated, and the conversation is the user's own (or the user is staff)."""

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        conversation = getattr(obj, "conversation", obj)
        return request.user.is_staff or conversation.owner_id == request.user.pk


class OwnsConversation(IsAuthenticated):
    """Authenticated, and the conversation is the user's own: staff may read, not append."""

    message = "Only the owner of a conversation can add turns to it."

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        conversation = getattr(obj, "conversation", obj)
        return conversation.owner_id == request.user.pk
