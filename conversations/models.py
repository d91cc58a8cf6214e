"""The event store: conversations, turns, and the append-only event log.

Events, attributions and provider payloads are append-only: the model layer refuses to update or
delete them (instances and querysets alike), and foreign keys to them PROTECT. A state change is
a new event. Turns and conversations carry mutable bookkeeping (status, title, next seq).
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

import orjson
from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from conversations import provenance
from conversations.ids import uuid7
from streams import bodies
from streams.registries import END_REASONS, EVENT_KINDS


class AppendOnlyError(RuntimeError):
    """Something tried to change or remove a record of the append-only event log."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only: update refused")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only: delete refused")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only: update refused")

    def update_or_create(self, *args: Any, **kwargs: Any) -> Any:
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only: update refused")


class AppendOnlyModel(models.Model):
    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only: update refused")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise AppendOnlyError(f"{type(self).__name__} rows are append-only: delete refused")


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


class ConversationQuerySet(models.QuerySet):
    def visible_to(self, user: Any) -> ConversationQuerySet:
        """Owners see their conversations; staff see all; anonymous users see none."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if user.is_staff:
            return self
        return self.filter(owner=user)


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No single-column indexes on owner and updated_at: the list orders' indexes below lead
    # with them, and every append rewrites updated_at (one index less to keep in step).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="conversations", db_index=False,
    )
    title = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_at_turn = models.IntegerField(null=True, blank=True)
    # The next event seq to hand out; allocated under a row lock (see store.append_events).
    next_seq = models.PositiveBigIntegerField(default=1)
    # SQLite: the conversation's number in the search index (``conversations.search``: FTS
    # rowids carry it), given by the writer's INSERT, unique, never changed. Not SQLite's own
    # rowid: VACUUM may renumber that. NULL on PostgreSQL, whose search needs none.
    search_key = models.BigIntegerField(null=True, blank=True, editable=False)
    # What a list row shows of the log, kept by the writer as it appends (``conversations.search``
    # keeps them; ``search.rebuild`` recomputes them): a row costs the same for a conversation
    # of one turn as of five thousand. Searches are distinct web_search activity ids.
    turn_count = models.PositiveIntegerField(default=0, editable=False)
    citation_count = models.PositiveIntegerField(default=0, editable=False)
    search_count = models.PositiveIntegerField(default=0, editable=False)
    # Where an import took it from (``conversations.sources``): an export's conversation id, or
    # a recording's content hash. One per owner (the constraints below), so a second import of
    # the same source, a re-run after a crash or a race, is "already imported", never a copy.
    # Empty for what was not imported, and for a copy imported on purpose.
    source = models.CharField(max_length=200, blank=True, default="", editable=False)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        # The list pages' keyset orders: (-updated_at, -id) for the pages, (-created_at, -id)
        # for the API; per owner, and for staff (everyone's). The search key last: a search
        # walks the order testing each conversation's key from the index alone.
        indexes = [
            models.Index(fields=["owner", "updated_at", "id", "search_key"],
                         name="conversation_owner_updated"),
            models.Index(fields=["updated_at", "id", "search_key"], name="conversation_updated"),
            models.Index(fields=["owner", "created_at", "id", "search_key"],
                         name="conversation_owner_created"),
            models.Index(fields=["created_at", "id", "search_key"], name="conversation_created"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["owner", "source"],
                                    condition=~models.Q(source=""),
                                    name="conversation_owner_source"),
            # NULLs are distinct in a unique index: conversations of no owner need their own.
            models.UniqueConstraint(fields=["source"],
                                    condition=models.Q(owner__isnull=True) & ~models.Q(source=""),
                                    name="conversation_ownerless_source"),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)


class Turn(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        AGENT = "agent"
        SYSTEM = "system"

    class Status(models.TextChoices):
        STREAMING = "streaming"
        COMPLETE = "complete"
        INTERRUPTED = "interrupted"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="turns")
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    end_reason = models.CharField(max_length=32, blank=True)
    agent_id = models.CharField(max_length=128, blank=True)
    # Provenance: the provider and the served model that produced this turn. Set once.
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # Who a live call asked ("provider · model"), as sent: not provenance (no response named
    # it). The page shows it on a turn that ended before a response named the served model.
    asked = models.CharField(max_length=300, blank=True, default="")
    # Native bookkeeping of the provider responses that made up this turn
    # ([{"trigger", "response_id", "model", "end_reason"}]); appended to, never rewritten.
    responses = models.TextField(default="[]")
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["conversation", "index"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "index"], name="turn_index_unique"),
        ]
        indexes = [
            models.Index(fields=["created_at"], name="turn_created"),  # the admin's order
            # A list row's live flag: the few streaming turns (nothing to write for the rest).
            models.Index(fields=["conversation"], condition=models.Q(status="streaming"),
                         name="turn_streaming"),
        ]

    def __str__(self) -> str:
        return f"turn {self.index} ({self.role})"

    @staticmethod
    def default_agent_id(provider: str, model: str) -> str:
        """The agent id a turn gets when none is given: who served it, within the column."""
        return f"{provider}:{model}"[:128] if model else ""

    @property
    def responses_list(self) -> list[dict[str, str]]:
        return orjson.loads(self.responses)

    @property
    def citations_not_sent(self) -> bool:
        """Whether the turn was rebuilt from what an instrumentation described (an OTLP span
        without the provider's response), which never carries citations: "none cited" cannot
        be told from "none sent"."""
        return '"citations":"not_sent"' in self.responses

    @property
    def model_provenance(self) -> dict[str, str] | None:
        return provenance.agent_model(self.provider, self.model)

    def clean_fields(self, exclude: Any = None) -> None:
        super().clean_fields(exclude)
        self.validate_invariants()

    def validate_invariants(self) -> None:
        provenance.validate(self.role, self.provider, self.model)
        if self.end_reason:
            END_REASONS.check(self.end_reason)

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.validate_invariants()
        update_fields = kwargs.get("update_fields")
        touches_provenance = update_fields is None or {"provider", "model"} & set(update_fields)
        if not self._state.adding and touches_provenance:
            stored = (
                Turn.objects.filter(pk=self.pk).values_list("provider", "model").first()
            )
            if stored and stored[0] and stored != (self.provider, self.model):
                raise provenance.ProvenanceError("provenance is recorded once and never changed")
        super().save(*args, **kwargs)


class ProviderPayload(AppendOnlyModel):
    """A native provider artifact, kept verbatim (as JSON text) for exact replay. Untrusted."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    provider = models.CharField(max_length=64)
    format = models.CharField(max_length=100)
    version = models.CharField(max_length=200)
    value = models.TextField()
    size = models.PositiveIntegerField(default=0)
    sha256 = models.CharField(max_length=64, db_index=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # The admin's list: its order, and its order within each filter (whose choices are
        # read by skip-scan of these indexes' leading column).
        indexes = [
            models.Index(fields=["created_at"], name="payload_created"),
            models.Index(fields=["provider", "created_at"], name="payload_provider_created"),
            models.Index(fields=["format", "created_at"], name="payload_format_created"),
            models.Index(fields=["version", "created_at"], name="payload_version_created"),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.format} ({self.size} bytes)"

    @classmethod
    def build(cls, provider: str, format: str, version: str, value_json: str) -> ProviderPayload:
        """An unsaved payload row with its size and digest filled (bulk_create skips save)."""
        raw = value_json.encode()
        return cls(
            provider=provider, format=format, version=version, value=value_json,
            size=len(raw), sha256=hashlib.sha256(raw).hexdigest(),
        )

    def save(self, *args: Any, **kwargs: Any) -> None:
        raw = self.value.encode()
        self.size = len(raw)
        self.sha256 = hashlib.sha256(raw).hexdigest()
        super().save(*args, **kwargs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "format": self.format,
            "version": self.version,
            "value": orjson.Fragment(self.value),
        }


class Event(AppendOnlyModel):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No single-column indexes on these two: (conversation, seq) and (turn, seq) cover them,
    # and every index is one more B-tree each appended event writes.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="events", db_index=False
    )
    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="events",
                             db_index=False)
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=32)
    text = models.TextField(blank=True)
    incomplete = models.BooleanField(default=False)
    # The kind's portable fields as JSON text: its typed body (``streams.bodies``).
    body = models.TextField(default="{}")
    # Derived from the body by the store (conversations.store), for queries: the hosted
    # activity's correlation key (the provider's id) and its name; empty for other kinds.
    activity_id = models.CharField(max_length=200, blank=True, db_index=True)
    activity_name = models.CharField(max_length=100, blank=True)
    payload = models.ForeignKey(
        ProviderPayload, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="event_seq_unique"),
        ]
        indexes = [
            models.Index(fields=["turn", "seq"]),
            # The admin's event log filtered by kind, in its order; and the few incomplete
            # events (a partial index: nothing to write for a complete event).
            models.Index(fields=["kind", "conversation", "seq"], name="event_kind_order"),
            models.Index(fields=["conversation", "seq"], condition=models.Q(incomplete=True),
                         name="event_incomplete"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        EVENT_KINDS.check(self.kind)
        super().save(*args, **kwargs)

    @cached_property
    def typed_body(self) -> bodies.Body:
        """The kind's typed body (``streams.bodies``), read from the stored JSON."""
        return bodies.load(self.kind, self.body)


class Attribution(AppendOnlyModel):
    # No single-column index: (event, ordinal) below leads with it.
    event = models.ForeignKey(Event, on_delete=models.PROTECT, related_name="attributions",
                              db_index=False)
    ordinal = models.PositiveIntegerField()
    url = models.TextField(blank=True)
    # Lower-cased host of ``url`` without "www.", for filtering by cited domain (indexed with
    # the list's order below).
    domain = models.CharField(max_length=255, blank=True)
    title = models.TextField(blank=True)
    excerpt = models.TextField(blank=True)
    # Code-point range into the event's final text; both null means the whole event.
    range_start = models.PositiveIntegerField(null=True, blank=True)
    range_end = models.PositiveIntegerField(null=True, blank=True)
    incomplete = models.BooleanField(default=False)
    replay = models.ForeignKey(
        ProviderPayload, null=True, blank=True, on_delete=models.PROTECT,
        related_name="attributions",
    )
    # What ingest did with the provider's range (``streams.builder.INTEGRITY``): "exact",
    # "repaired" (found again by the provider's segment text), "dropped" (could not be placed:
    # the whole event), "no_source" (the marker names no source); "" when there was nothing to
    # check. The provider's own offsets stay in the native payload.
    integrity = models.CharField(max_length=16, blank=True, default="")
    # The pages of the source document the cited passage is on, 1-based and inclusive (a PDF
    # cited by page); both null when the provider located it otherwise or not at all.
    page_first = models.PositiveIntegerField(null=True, blank=True)
    page_last = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["event", "ordinal"]
        indexes = [
            # The admin's order, ties broken by id: one index walk, no sort, on both databases.
            models.Index(fields=["event", "ordinal", "id"], name="attribution_event_order"),
            models.Index(fields=["event", "ordinal", "id"], condition=models.Q(incomplete=True),
                         name="attribution_incomplete"),
            # The admin's domain: search, in the list's order; and the distinct hosts, by
            # skip-scan of its leading column.
            models.Index(fields=["domain", "event", "ordinal", "id"],
                         name="attribution_domain_order"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(range_start__isnull=True, range_end__isnull=True)
                    | models.Q(range_start__isnull=False, range_end__isnull=False,
                               range_start__lt=models.F("range_end"))
                ),
                name="attribution_range_valid",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(page_first__isnull=True, page_last__isnull=True)
                    | models.Q(page_first__gte=1, page_last__gte=models.F("page_first"))
                ),
                name="attribution_pages_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.url or self.title

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.domain = url_domain(self.url)
        super().save(*args, **kwargs)


def url_domain(url: str) -> str:
    """The host a URL points at, lower-cased, without a leading "www."; "" if none."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix("www.")[:255]


class RenderedHTML(models.Model):
    """Cache of a complete event's rendered HTML, keyed by (event, renderer version).

    Events are immutable, so an entry never goes stale; a new renderer version simply misses.
    """

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    renderer_version = models.CharField(max_length=32)
    html = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["event", "renderer_version"], name="rendered_html_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} @ {self.renderer_version}"


class TurnFragment(models.Model):
    """Cache of a finished turn's rendered page fragment (``conversations/_turn.html``).

    ``key`` names everything the fragment depends on (renderer and template versions, the turn's
    status, end reason and last event seq); a fragment whose key differs is re-rendered.
    """

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    html = models.TextField()

    def __str__(self) -> str:
        return f"turn {self.turn_id} @ {self.key}"


class PendingRender(models.Model):
    """A finished turn whose renderings (message HTML, page fragment, Markdown and HTML export
    chunks) are not made yet: the background renderer's queue (``conversations.warming``).

    Written in the transaction that records or finishes the turn and removed once its caches
    are written, so a restart loses nothing: the next drain takes what is left.
    """

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, primary_key=True,
                                related_name="+")
    queued_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["queued_at"], name="pending_render_queued")]

    def __str__(self) -> str:
        return f"render turn {self.turn_id}"


class StreamingTail(models.Model):
    """A streaming turn's tail while the cache cannot hold it (Redis down): the fallback
    ``conversations.streaming`` reads when the cache errs or misses. The runner writes it only
    while the cache fails and removes it once the cache takes the tail again."""

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, primary_key=True,
                                related_name="+")
    tail = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"tail of turn {self.turn_id}"


class TurnExport(models.Model):
    """Cache of a finished turn's chunk of an export (``projections.export_stream``): its
    Markdown, its HTML ``<section>`` or its JSON object (per projection), so exporting a
    finished conversation again renders nothing.

    ``key`` names what the chunk depends on (renderer version, the turn's status, end reason,
    last event seq and responses); a chunk whose key differs is made again.
    """

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    format = models.CharField(max_length=32)  # "markdown", "html", "json-portable", "json-native"
    key = models.CharField(max_length=200)
    text = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "format"], name="turn_export_unique"),
        ]

    def __str__(self) -> str:
        return f"turn {self.turn_id} {self.format} @ {self.key}"


class SearchDoc(models.Model):
    """One searchable text of a conversation (its title, a message, a cited source's title and
    URL), indexed for substring search (``conversations.search``). Derived: written by the
    store, recomputed by ``search.rebuild``."""

    class Source(models.TextChoices):
        TITLE = "title"
        MESSAGE = "message"
        SOURCE = "source"

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=8, choices=Source.choices)
    body = models.TextField()

    def __str__(self) -> str:
        return f"{self.source} of {self.conversation_id}"


class ConversationFacet(models.Model):
    """A value the conversation list filters by: a cited host (``domain``), a host or parent
    domain it matches (``site``), a provider or model of its turns. Derived, like SearchDoc."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+",
                                     db_index=False)  # the unique index leads with it
    kind = models.CharField(max_length=8)
    value = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "kind", "value"],
                                    name="facet_unique"),
        ]
        indexes = [models.Index(fields=["kind", "value", "conversation"], name="facet_lookup")]

    def __str__(self) -> str:
        return f"{self.kind}={self.value}"


class FacetCount(models.Model):
    """How many conversations of an owner (``owner_key``: the user id, 0 for none; not a
    foreign key, so removing a user leaves the counts of the conversations it owned) have a
    facet: the filter choices, kept as the facets change."""

    owner_key = models.IntegerField()
    kind = models.CharField(max_length=8)
    value = models.CharField(max_length=255)
    conversations = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner_key", "kind", "value"],
                                    name="facet_count_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}={self.value}: {self.conversations}"


class Share(models.Model):
    """A read-only link to a snapshot of a conversation (``conversations.sharing``).

    The snapshot is a horizon, not a copy: the turns before ``turn_count`` with their events up
    to ``last_seq``, so deleting the conversation takes its shares with it (nothing of it is
    kept) and the page reads the same caches as the owner's. The token itself is not stored:
    ``token_hash`` (its SHA-256) finds the share, ``sealed_token`` (the token XOR a pad derived
    from SECRET_KEY and the share's id) lets the owner's list show the link again, so a read of
    the database alone (a dump, a replica) opens no share.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE,
                                     related_name="shares")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="shares")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    sealed_token = models.CharField(max_length=64, editable=False)
    turn_count = models.PositiveIntegerField()
    last_seq = models.PositiveBigIntegerField()
    include_reasoning = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    snapshot_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    views = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "created_at"], name="share_owner_created")]

    def __str__(self) -> str:
        return f"share of {self.conversation_id}"

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()



# The Sources pages' rows and the turns ingested into a conversation by their source live in
# modules of their own (this one is long enough); imported here so that Django registers them.
from conversations.ingested import IngestedTurn  # noqa: E402, F401
from conversations.source_models import (  # noqa: E402, F401
    SearchUse,
    SourceSpread,
    SourceTally,
    SourceTallyDelta,
    SourceUse,
)
