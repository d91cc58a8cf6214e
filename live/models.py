"""What the live app keeps besides the event log: the wire recording behind a turn.

A turn ingested from a recording (the bundled samples, a live replay) keeps its provider
responses verbatim here, so a live replay feeds the same bytes through the adapter again. Turns
without one (imported documents, the ingest command) are played from their stored events
instead.
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
    # the server process (``Instance``) that runs it; "" for a process that has none (a command)
    instance = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"runner of {self.turn_id} on {self.host}:{self.pid} at {self.beat_at}"


class Instance(models.Model):
    """A server process (``serve``, ``demo``), with its lease: it renews ``beat_at`` every
    ``live.instances.BEAT_EVERY`` seconds and deletes its row when it stops cleanly. The turns
    and captured exchanges of an instance whose lease ran out (or whose process is gone from
    this host) are finished by the others at once."""

    id = models.CharField(max_length=64, primary_key=True)
    host = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    beat_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"instance {self.id} on {self.host}:{self.pid}"


class RecordedExchange(models.Model):
    """A captured exchange (``live.capture``) and the turn it records into: made in the same
    transaction as the turn is opened (or resumed), ``done`` in the one that keeps its
    recording. Recording an exchange again finds this row: never a second turn.

    ``base_seq``: the conversation's last seq before the response's events (every event of the
    turn after it came from this response); ``prime_seq``: for a resumed turn, its last seq
    before the events that came ahead of this response (what rebuilds the turn so far)."""

    id = models.UUIDField(primary_key=True)
    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE,
                             related_name="+")
    base_seq = models.BigIntegerField(default=0)
    prime_seq = models.BigIntegerField(null=True, blank=True)
    done = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"exchange {self.id} -> turn {self.turn_id}"
