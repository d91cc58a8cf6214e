"""The Sources pages' rows, derived from the event log as the store writes
(``conversations.source_index``), read by ``conversations.source_report``."""

from __future__ import annotations

from django.db import models

INTEGRITIES = ("exact", "repaired", "dropped", "no_source")  # how a citation was placed


class SourceUse(models.Model):
    """A source a turn consulted or cited: one row per (turn, source), the unit the Sources
    pages count by (``conversations.source_index`` keeps them as the store writes, and
    rebuilds them). Derived, like SearchDoc; deleted with its turn. ``key`` is the URL, or the
    title of a source that has none (a document); ``host`` is where it points (a Gemini
    grounding redirect: the site its title names) and ``site`` that host's registrable
    domain. ``provider``, ``model`` and ``created_at`` are the turn's, copied for the filters."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+", db_index=False)
    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE, related_name="+",
                             db_index=False)  # the unique index leads with it
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    key = models.TextField()
    key_hash = models.CharField(max_length=64)
    title = models.TextField(blank=True)
    host = models.CharField(max_length=255, blank=True)
    site = models.CharField(max_length=255, blank=True)
    # Attributions of the turn naming it (each once), and how they were placed.
    cited = models.PositiveIntegerField(default=0)
    exact = models.PositiveIntegerField(default=0)
    repaired = models.PositiveIntegerField(default=0)
    dropped = models.PositiveIntegerField(default=0)
    no_source = models.PositiveIntegerField(default=0)
    # How many of the turn's hosted activities listed it among what they consulted.
    consulted = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "key_hash"], name="source_use_unique"),
        ]
        indexes = [
            # A conversation's rows (its delete, the list's search as a filter), a domain's and
            # a URL's (their citing turns). No index for the provider, model and date
            # filters: the tables aggregate every row of what a user sees either way, and each
            # index is one more B-tree for every source a write adds (bench.sources --ingest).
            models.Index(fields=["conversation"], name="source_use_conversation"),
            # A domain's rows in time order (its citing turns), and carrying every column the
            # tables (URLs by their hash), the timeline and the citation profiles read, so
            # that they read this index alone, never the table's wide rows (URL, title: 33 s
            # for the unfiltered domains at 39k conversations, mostly reading them). It
            # replaces the (site, created_at) index: one B-tree per source written, as before.
            models.Index(fields=["site", "created_at", "host", "provider", "model",
                                 "conversation", "turn", "key_hash", "cited", "consulted",
                                 *INTEGRITIES],
                         name="source_use_covering"),
            models.Index(fields=["key_hash", "created_at"], name="source_use_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} in turn {self.turn_id}"


class SearchUse(models.Model):
    """A web search a turn ran (one row per turn and search activity id), for the Sources
    pages' citation profiles: kept and rebuilt with ``SourceUse``, the turn's provider, model
    and time copied the same way."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+", db_index=False)
    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE, related_name="+",
                             db_index=False)  # the unique index leads with it
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    activity_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "activity_id"], name="search_use_unique"),
        ]
        indexes = [
            models.Index(fields=["conversation"], name="search_use_conversation"),
        ]

    def __str__(self) -> str:
        return f"search {self.activity_id} in turn {self.turn_id}"
