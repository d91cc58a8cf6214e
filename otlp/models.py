"""The spans already received, per owner: an exporter retries (and may send a batch twice),
and one span is one turn however often it arrives. They also thread: a span of a trace, or of
a session, already received continues that one's conversation."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ReceivedSpan(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="+")
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    # session.id (OpenInference) or gen_ai.conversation.id: the app's own conversation key
    session = models.CharField(max_length=255, blank=True)
    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+")
    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "trace_id", "span_id"],
                                    name="received_span_unique"),
        ]
        indexes = [
            models.Index(fields=["owner", "session", "received_at"], name="received_session"),
        ]

    def __str__(self) -> str:
        return f"span {self.trace_id}/{self.span_id}"
