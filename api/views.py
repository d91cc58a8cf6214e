"""REST API views (DRF), mounted under /api/v1/: the base view every API view builds on, and
the reads (capabilities, conversations, their turns, events and exports). Writes that bring
conversations in are ``api.imports``; forks ``api.forks``; shares ``api.shares``; sources
``api.sources``; live turns ``api.live_turns``.

Every view declares its permission classes (a test walks the URL configuration and checks).
Conversations a user may not see are 404. Bodies are size-limited (413) and malformed bodies are
a 400 naming the problem, with nothing written.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import QuerySet
from django.http.response import HttpResponseBase
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers as s
from api.errors import Refusals
from api.filters import FILTERS, filter_conversations
from api.http import ApiMetadata, JsonOnlyNegotiation, OrjsonRenderer, SmallJSONParser, choice_param
from api.pagination import ConversationCursorPagination, EventCursorPagination
from api.permissions import (
    CanSeeConversation,
    OwnsConversation,
    can_read_native,
    visible_conversations,
)
from api.throttling import WriteThrottled
from conversations import openwop, store
from conversations.actions.create import new_conversation
from conversations.actions.delete import delete_conversation
from conversations.actions.rename import rename_conversation
from conversations.models import Conversation
from conversations.projections import (
    PROJECTIONS,
    conversation_dict,
    event_dict,
    events_queryset,
    export_stream,
    turn_dict,
    turns_with_events,
)
from conversations.responses import streaming_response

log = logging.getLogger("turnscope.api")

EXPORT_FORMATS = {
    "json": ("application/json", "json"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
    "html": ("text/html; charset=utf-8", "html"),
}
TURN_FORMATS = ("turnscope", "openwop")


def errors(*codes: int) -> dict[int, Any]:
    descriptions = {
        400: "The request is malformed; `detail` names the problem.",
        401: "Not authenticated.",
        403: "Not authenticated, or not allowed.",
        404: "No such conversation (or not yours).",
        413: "The request body is larger than the upload limit.",
        415: "Unsupported media type.",
        429: "Too many requests.",
    }
    return {
        code: OpenApiResponse(s.ErrorSerializer, description=descriptions[code]) for code in codes
    }


READ_ERRORS = (401, 403, 429)
OBJECT_ERRORS = (401, 403, 404, 429)

PROJECTION_PARAM = OpenApiParameter(
    "projection", str, enum=list(PROJECTIONS), default="portable",
    description="`native` adds every provider payload (owner or staff only).",
)
CONVERSATION_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class ApiView(GenericAPIView):
    """Base: JSON only. Subclasses declare their own permission_classes; one that reads
    untrusted input declares ``refusals`` (how ``api.errors`` words refusing it)."""

    renderer_classes = [OrjsonRenderer]
    content_negotiation_class = JsonOnlyNegotiation
    metadata_class = ApiMetadata
    parser_classes = [SmallJSONParser]
    lookup_url_kwarg = "id"
    refusals: Refusals | None = None

    def refusal_names(self) -> dict[str, str]:
        """Names the ``refusals`` templates use besides ``reason``."""
        return {}

    def get_queryset(self) -> QuerySet[Conversation]:
        return visible_conversations(self.request.user)

    def projection(self, conversation: Conversation) -> str:
        projection = choice_param(self.request, "projection", PROJECTIONS, "portable")
        if projection == "native" and not can_read_native(self.request.user, conversation):
            raise PermissionDenied("The native projection is for the owner and staff only.")
        return projection


def conversation_summary(conversation: Conversation) -> dict[str, Any]:
    conversation = Conversation.objects.select_related("owner").get(pk=conversation.pk)
    return s.ConversationSummarySerializer(conversation).data


def created_response(conversation: Conversation, body: Any) -> Response:
    location = reverse("api-conversation-detail", kwargs={"id": conversation.pk})
    return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})


# -- capabilities ------------------------------------------------------------------------------


class CapabilitiesView(APIView):
    """What this host supports (OpenWOP capability flags)."""

    permission_classes = [IsAuthenticated]
    renderer_classes = [OrjsonRenderer]
    content_negotiation_class = JsonOnlyNegotiation
    metadata_class = ApiMetadata

    @extend_schema(
        operation_id="capabilities",
        responses={200: s.CapabilitiesSerializer, **errors(*READ_ERRORS)},
        description="`conversationTurnModelProvenance.supported` is true: every agent turn "
        "this host produces carries `agent.model = {provider, model}` (the served model, read "
        "from the provider's response, recorded once, copied verbatim on fork).",
    )
    def get(self, request: Request) -> Response:
        return Response({"conversationTurnModelProvenance": {"supported": True}})


# -- conversations -----------------------------------------------------------------------------


class ConversationListView(WriteThrottled, ApiView):
    permission_classes = [IsAuthenticated]
    pagination_class = ConversationCursorPagination
    serializer_class = s.ConversationSummarySerializer

    def get_queryset(self) -> QuerySet[Conversation]:
        queryset = visible_conversations(self.request.user)
        queryset = filter_conversations(queryset, self.request)
        return queryset.select_related("owner")  # turn_count: a column the writer keeps

    @extend_schema(
        operation_id="conversations_list",
        parameters=[OpenApiParameter(name, str, description=text) for name, text in
                    FILTERS.items()],
        responses={200: s.ConversationSummarySerializer(many=True), **errors(400, *READ_ERRORS,
                                                                              404)},
        description="Your conversations (staff: everyone's), newest first, cursor-paginated.",
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        s.attach_models(page)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


    @extend_schema(
        operation_id="conversations_create",
        request=s.CreateConversationSerializer,
        responses={201: s.ConversationSummarySerializer, **errors(400, 415, *READ_ERRORS)},
        description="A new, empty conversation of yours (its first turn is then sent with "
        "`POST .../turns`).",
    )
    def post(self, request: Request) -> Response:
        data = s.CreateConversationSerializer(data=request.data or {})
        data.is_valid(raise_exception=True)
        conversation = new_conversation(request.user, data.validated_data.get("title", "").strip())
        return created_response(conversation, conversation_summary(conversation))


class ConversationDetailView(WriteThrottled, ApiView):
    permission_classes = [CanSeeConversation]
    write_methods = ("PATCH", "DELETE")

    @extend_schema(
        operation_id="conversations_retrieve",
        parameters=[CONVERSATION_ID, PROJECTION_PARAM],
        responses={200: s.ExportDocumentSerializer, **errors(400, *OBJECT_ERRORS)},
        description="The conversation as an export document (portable projection, or native).",
    )
    def get(self, request: Request, id: Any) -> Response:
        conversation = self.get_object()
        return Response(conversation_dict(conversation, self.projection(conversation)))

    def get_permissions(self) -> list[Any]:
        if self.request.method in ("PATCH", "DELETE"):
            return [OwnsConversation()]
        return super().get_permissions()


    @extend_schema(
        operation_id="conversations_rename",
        parameters=[CONVERSATION_ID],
        request=s.RenameRequestSerializer,
        responses={200: s.ConversationSummarySerializer, **errors(400, 415, *OBJECT_ERRORS)},
        description="Rename the conversation (owner only). Its turns and events do not change.",
    )
    def patch(self, request: Request, id: Any) -> Response:
        conversation = self.get_object()
        data = s.RenameRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rename_conversation(conversation, data.validated_data["title"])
        return Response(conversation_summary(conversation))

    @extend_schema(
        operation_id="conversations_delete",
        parameters=[CONVERSATION_ID],
        responses={204: None, **errors(400, *OBJECT_ERRORS)},
        description="Delete the conversation whole (owner only): its turns, events, "
        "attributions and recordings. Provider payloads a fork still uses are kept. Refused "
        "(400) while a turn is streaming.",
    )
    def delete(self, request: Request, id: Any) -> Response:
        conversation = self.get_object()
        try:
            delete_conversation(conversation)
        except store.ConversationBusy as exc:
            raise ValidationError({"conversation": str(exc)}) from None
        return Response(status=status.HTTP_204_NO_CONTENT)




class ConversationTurnsView(ApiView):
    permission_classes = [CanSeeConversation]

    @extend_schema(
        operation_id="conversations_turns",
        parameters=[
            CONVERSATION_ID, PROJECTION_PARAM,
            OpenApiParameter(
                "format", str, enum=list(TURN_FORMATS), default="turnscope",
                description="`openwop`: OpenWOP conversation-turn objects (messageId, from, role, "
                "turnIndex, ts, content, speakerId, agent{agentId, model{provider, model}}).",
            ),
        ],
        responses={200: s.TurnListSerializer, **errors(400, *OBJECT_ERRORS)},
    )
    def get(self, request: Request, id: Any) -> Response:
        conversation = self.get_object()
        fmt = choice_param(request, "format", TURN_FORMATS, "turnscope")
        if fmt == "openwop":
            return Response(openwop.conversation_turns(conversation))
        projection = self.projection(conversation)
        return Response([turn_dict(t, events, projection)
                         for t, events in turns_with_events(conversation, projection)])


class ConversationEventsView(ApiView):
    permission_classes = [CanSeeConversation]
    pagination_class = EventCursorPagination

    @extend_schema(
        operation_id="conversations_events",
        parameters=[
            CONVERSATION_ID, PROJECTION_PARAM,
            OpenApiParameter("after", int, description="Only events with a seq above this one "
                             "(resync from the last seq a client holds)."),
            OpenApiParameter("turn", int, description="Only the events of this turn index."),
        ],
        responses={200: s.EventSerializer(many=True), **errors(400, *OBJECT_ERRORS)},
        description="The event log in seq order, cursor-paginated.",
    )
    def get(self, request: Request, id: Any) -> Response:
        conversation = self.get_object()
        projection = self.projection(conversation)
        events = events_queryset(projection).filter(conversation=conversation)
        after = _int_param(request, "after")
        if after is not None:
            events = events.filter(seq__gt=after)
        turn = _int_param(request, "turn")
        if turn is not None:
            events = events.filter(turn__index=turn)
        page = self.paginate_queryset(events)
        return self.get_paginated_response([event_dict(e, projection) for e in page])


def _int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValidationError({name: "must be an integer"}) from None
    if number < 0 or number > 2**62:
        raise ValidationError({name: "out of range"})
    return number


class ConversationExportView(ApiView):
    permission_classes = [CanSeeConversation]

    @extend_schema(
        operation_id="conversations_export",
        parameters=[
            CONVERSATION_ID, PROJECTION_PARAM,
            OpenApiParameter("format", str, enum=list(EXPORT_FORMATS), default="json",
                             description="`json` (the export contract), `markdown` (footnote "
                             "citations) or `html` (one self-contained file)."),
        ],
        responses={
            (200, "application/json"): s.ExportDocumentSerializer,
            (200, "text/markdown"): OpenApiTypes.STR,
            (200, "text/html"): OpenApiTypes.STR,
            **errors(400, *OBJECT_ERRORS),
        },
        description="A downloadable export, in every format `manage.py export` writes.",
    )
    def get(self, request: Request, id: Any) -> HttpResponseBase:
        conversation = self.get_object()
        fmt = choice_param(request, "format", EXPORT_FORMATS, "json")
        projection = self.projection(conversation)
        content_type, extension = EXPORT_FORMATS[fmt]
        # Streamed a batch of turns at a time: a 5,000-turn conversation is never in memory.
        response = streaming_response(request._request, export_stream(conversation, fmt,
                                                                       projection), content_type)
        # The two JSON projections are different documents: different file names.
        suffix = "-native" if fmt == "json" and projection == "native" else ""
        response["Content-Disposition"] = (
            f'attachment; filename="conversation-{conversation.pk}{suffix}.{extension}"'
        )
        return response
