"""Which turn an ingest into an existing conversation made, by the source identity of what was
ingested, so that the same ingest sent again (a client retrying after a lost response) is
reported as already ingested instead of appended twice (``conversations.ingest``; the identity
is ``conversations.sources``': the recording's bytes, wire context and prompt)."""

from __future__ import annotations

from django.db import models


class IngestedTurn(models.Model):
    """An agent turn ingested into a conversation that was there already, and its source: one
    per conversation and source (a constraint, so a retry racing the first cannot make two).
    Deleted with its turn; a copy ingested on purpose has none. A new conversation made by an
    ingest keeps its source on itself (``Conversation.source``)."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+", db_index=False)  # the unique index leads
    turn = models.OneToOneField("conversations.Turn", on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "source"],
                                    name="ingested_turn_source"),
        ]

    def __str__(self) -> str:
        return f"{self.source} in {self.conversation_id}"
