"""Where each proxied conversation's history stands, so the next request can find it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Thread(models.Model):
    """The key of a conversation's history (``proxy.messages.history_key`` of its turns) after
    the last proxied exchange: a request whose history has this key continues it."""

    conversation = models.OneToOneField(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="proxy_thread"
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="+")
    key = models.CharField(max_length=64)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["owner", "key"])]

    def __str__(self) -> str:
        return f"thread of {self.conversation_id}"
