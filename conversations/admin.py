"""Admin: conversations (turns inline), turns, the event log, attributions, and a provider
payload inspector.

Events, attributions and payloads are append-only: no add, change or delete here. Turns are
written by the store only (provenance is recorded once), so they are read-only too. List pages
stay fast on large tables: every list selects its related rows in the same query, never counts
the whole table twice, orders by an index, and loads no payload text it does not show.

Payloads are untrusted provider output: shown only as escaped, pretty-printed JSON text with
their size; above 1 MB only a preview, with a download (staff only, as an attachment).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Case, F, Q, QuerySet, TextField, Value, When
from django.db.models.functions import Substr
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html
from rest_framework.authtoken.models import TokenProxy

from conversations import admin_counts
from conversations.actions.delete import delete_conversation
from conversations.actions.owner import set_owner
from conversations.actions.rename import rename_conversation
from conversations.admin_counts import (
    CountAtLeast,
    EstimatedCountPaginator,
    distinct_values,
    indexed_choices,
)
from conversations.admin_list import LeanListAdmin, change_url, timestamp
from conversations.admin_search import KNOWN_COUNT, KeySearch, key_matches, search_words
from conversations.domains import DOMAIN
from conversations.models import (
    Attribution,
    Conversation,
    Event,
    FacetCount,
    ProviderPayload,
    Share,
    Turn,
)
from conversations.payload_text import decodes, human_size, pretty_json, pretty_json_prefix
from conversations.search import (
    PROVIDER,
    counted_matches,
    source_folded_matches,
    source_matches,
    text_matches,
)
from streams.registries import EVENT_KINDS

INLINE_LIMIT = 1_000_000  # bytes: above this a payload page shows a preview and a download
PREVIEW_CHARS = 64 * 1024
LIST_DECODE_LIMIT = 16 * 1024  # bytes: larger payloads are checked on their own page only
TEXT_PREVIEW = 80

# Tokens are credentials: DRF's token admin lists their keys. Tokens are issued with
# ``manage.py create_token USER`` and never shown again.
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


def _clip(text: str, limit: int = TEXT_PREVIEW) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ProvenanceProviderFilter(admin.SimpleListFilter):
    """Turns by provider: the choices are the maintained filter counts' providers (the turn
    table has no provider index to scan, and needs none for this)."""

    title = "provider"
    parameter_name = "provider"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = FacetCount.objects.filter(kind=PROVIDER, conversations__gt=0).values_list(
            "value", flat=True).distinct().order_by("value")
        return [(v, v) for v in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(provider=self.value()) if self.value() else queryset


class ReadOnlyAdmin(KeySearch, LeanListAdmin):
    """View only: the append-only log is never edited, added to or deleted from by hand (so
    its pages offer no History: nothing is ever changed here)."""

    change_form_template = "admin/conversations/readonly_change_form.html"
    show_full_result_count = False  # one COUNT per list page, not two
    show_facets = admin.ShowFacets.NEVER  # per-choice counts would scan the whole table
    list_per_page = 100
    paginator = EstimatedCountPaginator

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# -- conversations and turns -------------------------------------------------------------------


@admin.display(description="conversation", ordering="conversation")
def conversation_label(model_admin: Any, obj: Turn | Event) -> str:
    """A list column naming the row's conversation (``str(conversation)``), from the title the
    list annotates rather than a conversation object per row."""
    title = getattr(obj, "conversation_title", None)
    if title is None:
        return str(obj.conversation)
    return title or str(obj.conversation_id)


class TurnInline(admin.TabularInline):
    model = Turn
    fields = ("index", "role", "status", "end_reason", "provider", "model", "created_at",
              "completed_at")
    readonly_fields = fields
    ordering = ("index",)
    extra = 0
    show_change_link = True
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(KeySearch, LeanListAdmin):
    list_display = ("title_or_id", "owner", "created_at_when", "updated_at_when",
                    "forked_from_link")
    created_at_when, updated_at_when = timestamp("created_at"), timestamp("updated_at")
    list_select_related = ("owner", "forked_from")
    search_fields = ("title",)
    search_help_text = (
        "Each word (a quoted phrase as one) in a title, a message or a cited source, through "
        "the conversation list's index; a word of one or two letters, in titles only. Or an id."
    )
    key_search_fields = ("id",)
    list_filter = ("created_at",)
    ordering = ("-updated_at",)
    show_full_result_count = False
    list_per_page = 100
    paginator = EstimatedCountPaginator
    fields = ("id", "title", "owner", "created_at", "updated_at", "forked_from",
              "forked_at_turn", "next_seq", "events_link")
    readonly_fields = ("id", "created_at", "updated_at", "forked_from", "forked_at_turn",
                       "next_seq", "events_link")
    raw_id_fields = ("owner",)
    inlines = [TurnInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # conversations are created by ingest, import, fork and live turns

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        words = search_words(search_term.strip())
        if len(words) != 1 or key_matches(Conversation, self.key_search_fields, words[0]):
            return super().get_search_results(request, queryset, search_term)
        limit = admin_counts.COUNT_LIMIT
        counted = counted_matches(words[0], limit, queryset.db)
        if counted is None:
            return super().get_search_results(request, queryset, search_term)
        count, found = counted
        if not queryset.query.where:
            # The whole list searched for one word: the index has counted it already.
            setattr(request, KNOWN_COUNT, count if count <= limit else CountAtLeast(limit))
        return (queryset.filter(found) if count else queryset.none()), False

    def word_matches(self, word: str, using: str) -> Q:
        # As the conversation list searches (a LIKE over each title was 63 ms at 100k
        # conversations, and found nothing said in them).
        return text_matches(word, using)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A conversation is removed whole by the store (never its events one by one), by staff
        # who hold the delete permission.
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """What goes with each conversation. Django's collector would call its append-only
        turns and events protected; the store removes them together, so nothing is refused."""
        listed, turns, events = [], 0, 0
        for conversation in objs:
            n_turns = conversation.turns.count()
            n_events = Event.objects.filter(conversation=conversation).count()
            turns, events = turns + n_turns, events + n_events
            listed.append(f"{conversation}: {n_turns} turns, {n_events} events, their "
                          "attributions and recordings")
        counts = {"conversations": len(listed), "turns": turns, "events": events}
        return listed, counts, set(), []

    def save_model(self, request: HttpRequest, obj: Conversation, form: Any,
                   change: bool) -> None:
        # Title and owner are the editable fields: changed through the actions (the store keeps
        # the list's search index and filter counts in step; open pages are told).
        if "title" in form.changed_data:
            rename_conversation(obj, obj.title)
        if "owner" in form.changed_data:
            set_owner(obj, obj.owner)

    def delete_model(self, request: HttpRequest, obj: Conversation) -> None:
        delete_conversation(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for conversation in queryset:
            delete_conversation(conversation)

    @admin.display(description="conversation", ordering="title")
    def title_or_id(self, obj: Conversation) -> str:
        return obj.title or str(obj.pk)

    @admin.display(description="forked from")
    def forked_from_link(self, obj: Conversation) -> str:
        if not obj.forked_from_id:
            return "—"
        url = change_url(Conversation, obj.forked_from_id)
        return format_html('<a href="{}">{}</a> @ turn {}', url, obj.forked_from,
                           obj.forked_at_turn)

    @admin.display(description="event log")
    def events_link(self, obj: Conversation) -> str:
        url = reverse("admin:conversations_event_changelist")
        return format_html('<a href="{}?conversation__id__exact={}">events</a>', url, obj.pk)


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "conversation_label", "index", "role", "status", "end_reason",
                    "provider", "model", "created_at_when")
    created_at_when = timestamp("created_at")
    list_select_related = ()  # the row's conversation title is annotated (conversation_label)
    conversation_label = conversation_label
    list_filter = ("role", "status", ProvenanceProviderFilter)
    search_fields = ("model",)
    key_search_fields = ("conversation__id",)
    ordering = ("-created_at",)  # the turn_created index

    list_annotations = {"conversation_title": F("conversation__title")}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Turn]:
        return super().get_queryset(request).defer("responses")

    def lookup_allowed(self, lookup: str, value: str, request: Any = None) -> bool:
        return lookup in {"conversation__id__exact"} or super().lookup_allowed(
            lookup, value, request)


# -- the event log -----------------------------------------------------------------------------


class EventKindFilter(admin.SimpleListFilter):
    """Kinds from the registry: no DISTINCT scan over the event table to build the choices."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in EVENT_KINDS]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("seq", "kind", "conversation_label", "turn_index", "text_preview",
                    "incomplete", "activity_id", "payload_link", "created_at_when")
    created_at_when = timestamp("created_at")
    list_select_related = ()  # what a row shows of its conversation and turn is annotated
    conversation_label = conversation_label
    list_filter = (EventKindFilter, "incomplete")
    search_fields = ()
    key_search_fields = ("conversation__id", "activity_id", "id")
    # The (conversation, seq) unique index serves this ordering directly.
    ordering = ("conversation_id", "seq")
    fields = ("id", "conversation", "turn", "seq", "kind", "text", "incomplete", "body_view",
              "activity_id", "payload_link", "created_at")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Event]:
        # A list row shows the head of the text only; bodies and turn bookkeeping stay unread.
        return super().get_queryset(request).defer("body", "text")

    list_annotations = {"text_head": Substr("text", 1, TEXT_PREVIEW * 2),
                        "turn_number": F("turn__index"),
                        "conversation_title": F("conversation__title")}

    @admin.display(description="body")
    def body_view(self, obj: Event) -> str:
        return format_html('<pre class="json-value" tabindex="0">{}</pre>',
                           pretty_json(obj.body))

    def lookup_allowed(self, lookup: str, value: str, request: Any = None) -> bool:
        return lookup in {"conversation__id__exact", "turn__id__exact"} or super(
        ).lookup_allowed(lookup, value, request)

    @admin.display(description="turn", ordering="turn__index")
    def turn_index(self, obj: Event) -> int:
        number = getattr(obj, "turn_number", None)  # the list's annotation
        return obj.turn.index if number is None else number

    @admin.display(description="text")
    def text_preview(self, obj: Event) -> str:
        head = getattr(obj, "text_head", None)  # the list's annotation (text is deferred)
        return _clip(obj.text if head is None else head)

    @admin.display(description="payload")
    def payload_link(self, obj: Event) -> str:
        if not obj.payload_id:
            return "—"
        url = change_url(ProviderPayload, obj.payload_id)
        return format_html('<a href="{}">payload</a>', url)


DISTINCT_DOMAINS = 5_000  # read by skip-scan up to this many; past it, by a scan of the index


def cited_domains(domain: str, using: str = "default") -> list[str]:
    """The sources' hosts that are ``domain`` or one of its subdomains: read from the domain
    column's index, one probe per distinct host (a regex over every URL was a scan of the
    table), or with many hosts one pass over the index."""
    hosts = distinct_values(Attribution, "domain", using, limit=DISTINCT_DOMAINS + 1)
    if len(hosts) > DISTINCT_DOMAINS:
        hosts = list(Attribution.objects.using(using).filter(
            Q(domain=domain) | Q(domain__endswith="." + domain)).values_list(
            "domain", flat=True).distinct())
    return [host for host in hosts if host == domain or host.endswith("." + domain)]


@admin.register(Attribution)
class AttributionAdmin(ReadOnlyAdmin):
    list_display = ("url_preview", "title_preview", "event_link", "range_text", "incomplete")
    list_select_related = ()  # the event's "#seq kind" is annotated
    list_filter = ("incomplete",)
    search_fields = ("url", "title")
    search_help_text = (
        "Search URLs and titles; domain:example.com finds sources on that domain and its "
        "subdomains."
    )
    ordering = ("event_id", "ordinal", "id")  # the attribution_event_order index

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attribution]:
        return super().get_queryset(request).defer("excerpt")

    # The event is shown as "#seq kind": nothing else of it is read.
    list_annotations = {"event_seq": F("event__seq"), "event_kind": F("event__kind")}
    fields = ("event_link", "ordinal", "url", "title", "excerpt", "range_start", "range_end",
              "incomplete", "replay")
    readonly_fields = fields

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if term.lower().startswith("domain:"):
            # Hosts are stored as the domain column has them: lower-case, without "www.".
            domain = term[7:].strip().lower().rstrip(".").removeprefix("www.")
            if not DOMAIN.match(domain):
                return queryset.none(), False
            return queryset.filter(domain__in=cited_domains(domain)), False
        words = search_words(term)
        if len(words) != 1 or self.key_search_fields:
            return super().get_search_results(request, queryset, search_term)
        found, indexed = self._source_matches(words[0], queryset.db)
        if indexed is not None and not queryset.query.where:
            # The whole list searched for one word: its index has counted it already. A rare
            # word's list is the index's matches, that many; a count over them was 11 ms for
            # 3,125. A common one's is past the limit, and a count over the LIKE would read
            # sources until it found as many (20 ms for a word in 1 source in 25, at 384k);
            # not for a non-ASCII word, whose case the index folds and LIKE does not. (An ASCII
            # word differs only where a source spells it with a letter that folds to ASCII,
            # the Kelvin sign "K" for "k": at worst the last of 100 pages is short.)
            if indexed <= admin_counts.COUNT_LIMIT:
                setattr(request, KNOWN_COUNT, indexed)
            elif words[0].isascii():
                setattr(request, KNOWN_COUNT, CountAtLeast(admin_counts.COUNT_LIMIT))
        return queryset.filter(found), False

    def word_matches(self, word: str, using: str) -> Q:
        return self._source_matches(word, using)[0]

    def _source_matches(self, word: str, using: str) -> tuple[Q, int | None]:
        """The sources with ``word`` in their URL or title, and how many SQLite's index of
        them holds, up to ``COUNT_LIMIT + 1`` (None: not asked). Through that index for a word
        at most ``COUNT_LIMIT`` sources have (a scan of every source was 130 ms at 384k); a
        common word reads the list in order, testing each. PostgreSQL: the trigram indexes of
        the folded copies of both (``search.FOLDED``)."""
        found = source_matches(word, admin_counts.COUNT_LIMIT, using)
        indexed = found[0] if found else None
        if found and indexed <= admin_counts.COUNT_LIMIT:
            return Q(pk__in=found[1]), indexed
        return source_folded_matches(word, using) or super().word_matches(word, using), indexed

    @admin.display(description="url", ordering="url")
    def url_preview(self, obj: Attribution) -> str:
        return _clip(obj.url, 100)

    @admin.display(description="title")
    def title_preview(self, obj: Attribution) -> str:
        return _clip(obj.title, 60)

    @admin.display(description="event")
    def event_link(self, obj: Attribution) -> str:
        url = change_url(Event, obj.event_id)
        if hasattr(obj, "event_seq"):  # the list's annotation
            return format_html('<a href="{}">#{} {}</a>', url, obj.event_seq, obj.event_kind)
        return format_html('<a href="{}">{}</a>', url, obj.event)

    @admin.display(description="range")
    def range_text(self, obj: Attribution) -> str:
        if obj.range_start is None:
            return "whole event"
        return f"{obj.range_start}–{obj.range_end}"


# -- the provider payload inspector ------------------------------------------------------------


@admin.register(ProviderPayload)
class ProviderPayloadAdmin(ReadOnlyAdmin):
    list_display = ("short_id", "provider", "format", "version", "size_text", "decodes_column",
                    "created_at_when")
    created_at_when = timestamp("created_at")
    # Choices by skip-scan of each column's index, not a DISTINCT over a million rows.
    list_filter = (indexed_choices("provider"), indexed_choices("format"),
                   indexed_choices("version"))
    search_fields = ()
    key_search_fields = ("id", "sha256")
    ordering = ("-created_at",)
    fields = ("id", "provider", "format", "version", "size_text", "sha256", "created_at",
              "decodes_column", "value_view")
    readonly_fields = fields

    def get_urls(self) -> list[Any]:
        download = path(
            "<uuid:object_id>/download/", self.admin_site.admin_view(self.download_view),
            name="conversations_providerpayload_download",
        )
        return [download, *super().get_urls()]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ProviderPayload]:
        return super().get_queryset(request).defer("value")

    # The list never loads a large value: only values small enough to decode per row.
    list_annotations = {"small_value": Case(When(size__lte=LIST_DECODE_LIMIT, then=F("value")),
                                            default=Value(None), output_field=TextField())}

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None
                   ) -> ProviderPayload | None:
        # The page loads at most INLINE_LIMIT characters of the value, whatever its size.
        queryset = ProviderPayload.objects.defer("value").annotate(
            value_head=Substr("value", 1, INLINE_LIMIT)
        )
        try:
            return queryset.get(pk=object_id)
        except (ProviderPayload.DoesNotExist, ValidationError, ValueError):
            return None

    @admin.display(description="id")
    def short_id(self, obj: ProviderPayload) -> str:
        # Time-ordered (uuid7) ids share their head: the tail tells rows apart.
        return "…" + str(obj.pk)[-12:]

    @admin.display(description="size", ordering="size")
    def size_text(self, obj: ProviderPayload) -> str:
        return human_size(obj.size)

    @admin.display(description="decodes with its adapter", boolean=True)
    def decodes_column(self, obj: ProviderPayload) -> bool | None:
        if hasattr(obj, "value_head"):  # the payload's own page: always checked
            value = obj.value_head
            if obj.size > INLINE_LIMIT:
                value = ProviderPayload.objects.values_list("value", flat=True).get(pk=obj.pk)
        else:  # a list row: checked when small enough to have been loaded
            value = getattr(obj, "small_value", None)
            if value is None:
                return None
        return decodes(obj.provider, obj.format, value)

    @admin.display(description="value")
    def value_view(self, obj: ProviderPayload) -> str:
        head = obj.value_head
        download = reverse("admin:conversations_providerpayload_download", args=[obj.pk])
        if obj.size > INLINE_LIMIT:
            return format_html(
                '<p>{} — larger than {}: the first {} characters as stored; '
                '<a href="{}" download>download the whole value</a>.</p>'
                '<pre class="json-value" tabindex="0">{}</pre>',
                human_size(obj.size), human_size(INLINE_LIMIT), PREVIEW_CHARS, download,
                pretty_json_prefix(head[:PREVIEW_CHARS]),
            )
        # Shown as text (escaped), never interpreted.
        return format_html('<p>{} · <a href="{}" download>download</a></p>'
                           '<pre class="json-value" tabindex="0">{}</pre>',
                           human_size(obj.size), download, pretty_json(head))

    def download_view(self, request: HttpRequest, object_id: Any) -> HttpResponse:
        """The stored JSON text as an attachment (staff only: admin_view checks)."""
        if not request.user.is_staff:  # admin_view already redirects others to the login
            raise Http404
        payload = ProviderPayload.objects.filter(pk=object_id).first()
        if payload is None or not self.has_view_permission(request, payload):
            raise Http404
        response = HttpResponse(payload.value.encode(), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="payload-{payload.pk}.json"'
        response["X-Content-Type-Options"] = "nosniff"
        return response


# -- shares ------------------------------------------------------------------------------------


@admin.register(Share)
class ShareAdmin(ReadOnlyAdmin):
    """Every share, to see what is shared; read-only as the rest. The token is neither stored
    nor shown (``conversations.sharing``): staff see that a conversation is shared, not the
    link."""

    list_display = ("conversation", "owner", "created_at", "snapshot_at", "expires_at",
                    "live", "include_reasoning", "views")
    list_select_related = ("conversation", "owner")
    list_filter = ("include_reasoning",)
    key_search_fields = ("id", "conversation__id")
    search_help_text = "A share's or a conversation's id."
    fields = ("id", "conversation", "owner", "created_at", "snapshot_at", "expires_at",
              "turn_count", "last_seq", "include_reasoning", "views")
    readonly_fields = fields
    paginator = Paginator  # a few rows per user: counted exactly

    @admin.display(description="live", boolean=True)
    def live(self, obj: Share) -> bool:
        return not obj.expired
