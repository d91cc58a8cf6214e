"""Forking through the API: a conversation, whole or up to a turn, as a new conversation."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers as s
from api.permissions import CanSeeConversation
from api.throttling import WriteRateThrottle
from api.views import (
    CONVERSATION_ID,
    OBJECT_ERRORS,
    ApiView,
    conversation_summary,
    created_response,
    errors,
)
from conversations.actions.create import fork_conversation


class TurnForkView(ApiView):
    permission_classes = [CanSeeConversation]
    throttle_classes = [*APIView.throttle_classes, WriteRateThrottle]

    @extend_schema(
        operation_id="conversations_turns_fork",
        parameters=[CONVERSATION_ID, OpenApiParameter(
            "index", {"type": "integer", "minimum": 0}, OpenApiParameter.PATH,
            description="The last turn to keep (the route matches digits only).")],
        request=s.TurnForkRequestSerializer,
        responses={201: s.ConversationSummarySerializer,
                   **errors(400, 413, 415, *OBJECT_ERRORS)},
        description="Fork here: a new conversation of yours holding turns 0..index of this "
        "one (what the page's \"Fork here\" does); the next turn is then sent to it.",
    )
    def post(self, request: Request, id: Any, index: int) -> Response:
        source = self.get_object()
        data = s.TurnForkRequestSerializer(data=request.data or {})
        data.is_valid(raise_exception=True)
        title = data.validated_data.get("title")
        forked = fork_conversation(source, index, owner=request.user, title=title)
        return created_response(forked, conversation_summary(forked))


class ForkView(ApiView):
    permission_classes = [CanSeeConversation]
    throttle_classes = [*APIView.throttle_classes, WriteRateThrottle]

    @extend_schema(
        operation_id="conversations_fork",
        parameters=[CONVERSATION_ID],
        request=s.ForkRequestSerializer,
        responses={201: s.ConversationSummarySerializer,
                   **errors(400, 413, 415, *OBJECT_ERRORS)},
        description="A new conversation of yours holding turns 0..at_turn of this one. Events "
        "are copied with new ids and seqs; provider payloads are shared; agent.model is copied "
        "verbatim, never re-resolved.",
    )
    def post(self, request: Request, id: Any) -> Response:
        source = self.get_object()
        data = s.ForkRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        title = data.validated_data.get("title")
        forked = fork_conversation(source, data.validated_data["at_turn"], owner=request.user,
                             title=title)
        return created_response(forked, conversation_summary(forked))
