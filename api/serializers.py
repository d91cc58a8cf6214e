"""Serializers: request bodies the API reads, and the shapes it returns (for the OpenAPI schema).

Conversation documents are produced by ``conversations.projections`` (the export contract, whose
exact JSON Schema is ``schemas/export.schema.json``); the serializers below describe the same
shapes for OpenAPI 3.0, a little looser where 3.0 cannot say it (the per-kind event variants).
The schemathesis test checks every response against these.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, inline_serializer
from rest_framework import serializers

from conversations.models import Conversation, Turn
from conversations.projections import PROJECTIONS

# -- errors ------------------------------------------------------------------------------------


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in one sentence.")
    errors = serializers.DictField(
        required=False, help_text="Per-field problems, when the request body had fields."
    )


# -- conversation summaries --------------------------------------------------------------------


class ModelProvenanceSerializer(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()


class ConversationSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(allow_blank=True)
    owner = serializers.CharField(source="owner.username", allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    forked_from = serializers.UUIDField(source="forked_from_id", allow_null=True)
    forked_at_turn = serializers.IntegerField(allow_null=True)
    turns = serializers.IntegerField(source="turn_count", help_text="Number of turns.")
    models = ModelProvenanceSerializer(
        many=True, source="model_list",
        help_text="Distinct agent.model values of the agent turns, in turn order.",
    )

    def to_representation(self, instance: Conversation) -> dict[str, Any]:
        if not hasattr(instance, "model_list"):
            instance.model_list = model_list(instance)
        return super().to_representation(instance)


def model_list(conversation: Conversation) -> list[dict[str, str]]:
    return attach_models([conversation])[0].model_list


def attach_models(conversations: list[Conversation]) -> list[Conversation]:
    """Set ``model_list`` on each conversation with ONE query for the whole page."""
    found: dict[Any, list[dict[str, str]]] = {c.pk: [] for c in conversations}
    rows = (
        Turn.objects.filter(conversation__in=list(found), role=Turn.Role.AGENT)
        .exclude(provider="").order_by("conversation_id", "index")
        .values_list("conversation_id", "provider", "model")
    )
    for conversation_id, provider, model in rows:
        entry = {"provider": provider, "model": model}
        if entry not in found[conversation_id]:
            found[conversation_id].append(entry)
    for c in conversations:
        c.model_list = found[c.pk]
    return conversations


# -- the export document (portable / native projection) ----------------------------------------


class PayloadSerializer(serializers.Serializer):
    provider = serializers.CharField()
    format = serializers.CharField()
    version = serializers.CharField()
    value = serializers.JSONField(help_text="The provider's native artifact, verbatim.")


class SourceSerializer(serializers.Serializer):
    url = serializers.CharField(allow_blank=True)
    title = serializers.CharField(allow_blank=True)


class RangeSerializer(serializers.Serializer):
    start = serializers.IntegerField(min_value=0)
    end = serializers.IntegerField(min_value=1)


class PagesSerializer(serializers.Serializer):
    first = serializers.IntegerField(min_value=1)
    last = serializers.IntegerField(min_value=1)


class AttributionSerializer(serializers.Serializer):
    source = SourceSerializer()
    excerpt = serializers.CharField(allow_blank=True)
    pages = PagesSerializer(required=False, help_text="The source document's pages the passage "
                            "is on, 1-based, inclusive; absent when not located by page.")
    range = RangeSerializer(required=False, help_text="Code-point range; absent = whole event.")
    incomplete = serializers.BooleanField()
    integrity = serializers.ChoiceField(
        choices=["exact", "repaired", "dropped", "no_source"], required=False,
        help_text="What ingest did with the provider's range: exact; repaired (found again by "
        "the provider's segment text); dropped (not placed: cites the whole event); no_source "
        "(the citation names no source). Absent when the provider gave no range.",
    )
    replay = PayloadSerializer(required=False, help_text="Native projection only.")


class LedgerSearchSerializer(serializers.Serializer):
    activity_id = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    queries = serializers.ListField(child=serializers.CharField())
    state = serializers.ChoiceField(choices=["started", "completed", "failed"])
    results = serializers.IntegerField(allow_null=True, help_text="Sources it returned.")
    cited = serializers.ListField(child=serializers.IntegerField(min_value=1),
                                  help_text="Cited sources it returned; empty: nothing cited.")


class LedgerOpenSerializer(serializers.Serializer):
    activity_id = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    action = serializers.ChoiceField(choices=["fetch", "open_page", "find_in_page"])
    url = serializers.CharField(allow_blank=True)
    pattern = serializers.CharField(required=False)
    state = serializers.ChoiceField(choices=["started", "completed", "failed"])
    cited = serializers.IntegerField(allow_null=True, help_text="null: opened, never cited.")


class LedgerCitedSerializer(serializers.Serializer):
    number = serializers.IntegerField(min_value=1)
    title = serializers.CharField(allow_blank=True)
    url = serializers.CharField(allow_blank=True)
    surfaced_by = serializers.ListField(child=serializers.IntegerField(min_value=1),
                                        help_text="Positions of the searches that returned it.")
    opened = serializers.BooleanField(help_text="false: no fetch or page-open names its URL.")
    citations = serializers.IntegerField(min_value=0)
    repaired = serializers.IntegerField(min_value=0)
    dropped = serializers.IntegerField(min_value=0)


class IntegritySerializer(serializers.Serializer):
    exact = serializers.IntegerField(min_value=0)
    repaired = serializers.IntegerField(min_value=0)
    dropped = serializers.IntegerField(min_value=0)
    no_source = serializers.IntegerField(min_value=0)
    unchecked = serializers.IntegerField(min_value=0)
    searches_without_results = serializers.ListField(child=serializers.IntegerField(min_value=1))


class LedgerSerializer(serializers.Serializer):
    """An agent turn's research ledger, derived from its events (``$defs/ledger`` of the
    export schema)."""

    searches = LedgerSearchSerializer(many=True)
    opened = LedgerOpenSerializer(many=True)
    cited = LedgerCitedSerializer(many=True)
    integrity = IntegritySerializer()


class ActivitySerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=["started", "completed", "failed"])
    input = serializers.JSONField()
    summary = serializers.CharField(allow_blank=True)
    sources = serializers.JSONField(required=False)
    error_code = serializers.CharField(required=False, allow_blank=True)
    output = serializers.JSONField(
        required=False,
        help_text="What it produced: text, stderr, return_code, error, images, tools.",
    )


class ToolCallSerializer(serializers.Serializer):
    id = serializers.CharField(allow_blank=True)
    name = serializers.CharField(allow_blank=True)
    arguments = serializers.JSONField()
    incomplete = serializers.BooleanField(
        required=False, help_text="The stream was cut while the arguments were arriving."
    )


class EventErrorSerializer(serializers.Serializer):
    code = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)


class RefusalSerializer(serializers.Serializer):
    category = serializers.CharField(allow_blank=True)
    explanation = serializers.CharField(allow_blank=True)


class EventSerializer(serializers.Serializer):
    """One event. Which of the optional fields appear depends on ``kind`` (see the export
    contract): message → text, incomplete, attributions; reasoning → text, redacted,
    incomplete; hosted_activity → activity; tool_call_request → call; provider_artifact → type,
    summary, display_html; error → error; refusal → refusal. ``payload`` only in the native
    projection."""

    id = serializers.UUIDField()
    seq = serializers.IntegerField(min_value=1)
    kind = serializers.CharField()
    text = serializers.CharField(required=False, allow_blank=True)
    incomplete = serializers.BooleanField(required=False)
    redacted = serializers.BooleanField(required=False)
    attributions = AttributionSerializer(many=True, required=False)
    activity = ActivitySerializer(required=False)
    call = ToolCallSerializer(required=False)
    type = serializers.CharField(required=False, allow_blank=True)
    summary = serializers.CharField(required=False, allow_blank=True)
    display_html = serializers.CharField(
        required=False, allow_blank=True, help_text="Untrusted HTML; sanitize before display."
    )
    error = EventErrorSerializer(required=False)
    refusal = RefusalSerializer(required=False)
    payload = PayloadSerializer(required=False, help_text="Native projection only.")


class AgentSerializer(serializers.Serializer):
    agentId = serializers.CharField()
    model = ModelProvenanceSerializer(
        required=False, help_text="The provider and model that produced the turn, when known."
    )


class TurnSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    index = serializers.IntegerField(min_value=0)
    role = serializers.ChoiceField(choices=Turn.Role.choices)
    status = serializers.ChoiceField(choices=Turn.Status.choices)
    end_reason = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True, required=False)
    agent = AgentSerializer(required=False, help_text="Agent turns only.")
    responses = serializers.JSONField(required=False, help_text="Native projection only.")
    events = EventSerializer(many=True)
    ledger = LedgerSerializer(required=False, help_text="Agent turns only.")


class ConversationMetaSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField(allow_null=True)
    forked_from = serializers.UUIDField(allow_null=True)


class ExportDocumentSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["turnscope.conversation"])
    version = serializers.ChoiceField(choices=[1])
    projection = serializers.ChoiceField(choices=list(PROJECTIONS))
    conversation = ConversationMetaSerializer()
    turns = TurnSerializer(many=True)


# -- OpenWOP conversation turns ----------------------------------------------------------------

OpenWopTurnSerializer = inline_serializer(
    name="OpenWopConversationTurn",
    fields={
        "messageId": serializers.CharField(),
        "from": serializers.CharField(),
        "role": serializers.ChoiceField(choices=Turn.Role.choices),
        "turnIndex": serializers.IntegerField(min_value=0),
        "ts": serializers.IntegerField(min_value=0),
        "content": serializers.JSONField(),
        "speakerId": serializers.CharField(required=False, help_text="Agent turns."),
        "agent": AgentSerializer(required=False, help_text="Agent turns only."),
    },
)

TurnListSerializer = PolymorphicProxySerializer(
    component_name="TurnOrOpenWopTurn",
    serializers=[TurnSerializer, OpenWopTurnSerializer],
    resource_type_field_name=None,
    many=True,
)


# -- ingest, fork, capabilities ----------------------------------------------------------------


class TurnRefSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    index = serializers.IntegerField(min_value=0)


class IngestResultSerializer(serializers.Serializer):
    conversation = serializers.UUIDField()
    turn = TurnRefSerializer()
    status = serializers.ChoiceField(choices=Turn.Status.choices)
    end_reason = serializers.CharField(allow_blank=True)
    agent = AgentSerializer()
    events = serializers.DictField(
        child=serializers.IntegerField(), help_text="Events written, by kind."
    )
    citations = serializers.IntegerField()
    hosted_activities = serializers.DictField(
        child=serializers.IntegerField(), help_text="Hosted activities by final state."
    )
    usage = serializers.DictField(
        child=serializers.IntegerField(), help_text="Usage counters (diagnostics, not stored)."
    )


class AlreadyIngestedSerializer(serializers.Serializer):
    already_imported = serializers.BooleanField()
    conversation = serializers.UUIDField(help_text="The conversation it became the first time.")
    title = serializers.CharField(allow_blank=True)
    url = serializers.CharField()
    detail = serializers.CharField()


class IngestedTurnRefSerializer(TurnRefSerializer):
    url = serializers.CharField(help_text="The turn's events.")


class AlreadyIngestedTurnSerializer(AlreadyIngestedSerializer):
    conversation = serializers.UUIDField(help_text="This conversation.")
    turn = IngestedTurnRefSerializer(help_text="The agent turn it became the first time.")
    url = serializers.CharField(help_text="The turn's events.")


class ForkRefSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(allow_blank=True)
    forked_at_turn = serializers.IntegerField(allow_null=True)
    url = serializers.CharField()


class ImportedSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["conversation"])
    files = serializers.ListField(child=serializers.IntegerField(),
                                  help_text="Indexes of the files it came from.")
    source = serializers.CharField(help_text="The file (or zip member) it was read from.")
    format = serializers.CharField()
    id = serializers.UUIDField()
    title = serializers.CharField(allow_blank=True)
    url = serializers.CharField()
    turns = serializers.IntegerField()
    forks = ForkRefSerializer(many=True, help_text="Branches of the export, as forks.")
    notes = serializers.ListField(child=serializers.CharField())


class ImportProblemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["problem"])
    files = serializers.ListField(child=serializers.IntegerField())
    source = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    detail = serializers.CharField()


class AlreadyImportedSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["already_imported"])
    files = serializers.ListField(child=serializers.IntegerField())
    source = serializers.CharField()
    format = serializers.CharField()
    id = serializers.UUIDField(help_text="The conversation imported before.")
    title = serializers.CharField(allow_blank=True)
    url = serializers.CharField()
    turns = serializers.IntegerField(help_text="Turns of the conversation imported before.")
    changed = serializers.BooleanField(help_text="The file holds another number of turns of "
                                       "it (a later export): import a copy to keep both.")
    notes = serializers.ListField(child=serializers.CharField())


class ImportReportSerializer(serializers.Serializer):
    imported = ImportedSerializer(many=True)
    already_imported = AlreadyImportedSerializer(many=True, help_text="Conversations you "
                                                 "imported before: not imported again.")
    problems = ImportProblemSerializer(many=True)
    conversations = serializers.IntegerField(help_text="How many were imported.")
    detail = serializers.CharField(required=False, help_text="When nothing was imported.")


class RenameRequestSerializer(serializers.Serializer):
    title = serializers.CharField(allow_blank=True, max_length=300)


class ForkRequestSerializer(serializers.Serializer):
    at_turn = serializers.IntegerField(
        min_value=0, help_text="Index of the last turn the fork keeps (0-based)."
    )
    title = serializers.CharField(
        required=False, allow_blank=True, max_length=300,
        help_text="Title of the fork (default: the source's title).",
    )


CapabilitiesSerializer = inline_serializer(
    name="Capabilities",
    fields={
        "conversationTurnModelProvenance": inline_serializer(
            name="CapabilityFlag", fields={"supported": serializers.BooleanField()}
        ),
    },
)


class CreateConversationSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=300)


class TurnForkRequestSerializer(serializers.Serializer):
    title = serializers.CharField(
        required=False, allow_blank=True, max_length=300,
        help_text="Title of the fork (default: the source's title).",
    )


# -- shares ------------------------------------------------------------------------------------


class ShareRequestSerializer(serializers.Serializer):
    expires = serializers.ChoiceField(
        choices=["never", "1d", "7d", "30d"], default="never",
        help_text="When the link stops working: never, or 1, 7 or 30 days from now.")
    include_reasoning = serializers.BooleanField(
        default=True, help_text="Show the model's reasoning (false: left out of the page and "
        "the exports).")


class ShareSerializer(serializers.Serializer):
    token = serializers.CharField(
        allow_null=True, help_text="The link's secret; null if this server can no longer show "
        "it (its SECRET_KEY changed): the link still works for those who have it.")
    url = serializers.CharField(allow_null=True, help_text="The read-only page, for anyone.")
    conversation = serializers.UUIDField(source="conversation_id")
    title = serializers.CharField(source="conversation.title", allow_blank=True)
    created_at = serializers.DateTimeField()
    snapshot_at = serializers.DateTimeField(help_text="When the snapshot it shows was taken.")
    expires_at = serializers.DateTimeField(allow_null=True)
    expired = serializers.BooleanField()
    include_reasoning = serializers.BooleanField()
    turns = serializers.IntegerField(source="turn_count", help_text="Turns in the snapshot.")
    views = serializers.IntegerField(help_text="Times the page was opened.")
