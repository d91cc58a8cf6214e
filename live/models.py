"""What the live app keeps besides the event log: the wire recording behind a turn.

A turn ingested from a recording (the bundled samples, a replay) keeps its provider responses
verbatim here, so a replay feeds the same bytes through the adapter again. Turns without one
(imported documents, the ingest command) are replayed from their stored events instead.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db import models
from django.utils import timezone


class Recording(models.Model):
    turn = models.OneToOneField(
        "conversations.Turn", on_delete=models.CASCADE, related_name="recording"
    )
    provider = models.CharField(max_length=64)
    # [{"name", "raw" (the wire text), "api_version", "endpoint", "request"}], in order.
    responses = models.TextField()
    # The bundled sample this came from ("" otherwise): makes loading the samples idempotent.
    sample = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.provider} recording of {self.turn_id}"

    @property
    def response_list(self) -> list[dict[str, Any]]:
        return orjson.loads(self.responses)


class Heartbeat(models.Model):
    """A runner's sign of life for the turn it streams, in the database: every process sees it
    (a ``manage.py replay`` beside the server, several servers without a shared cache), so the
    reaper never takes a turn whose runner is alive elsewhere. Gone when the turn finishes."""

    turn = models.OneToOneField(
        "conversations.Turn", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    beat_at = models.DateTimeField()
    host = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"runner of {self.turn_id} on {self.host}:{self.pid} at {self.beat_at}"
