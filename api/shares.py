"""Shares through the API: read-only links to a conversation's snapshot, made, listed and
revoked by its owner."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers as s
from api.permissions import OwnsConversation
from api.throttling import WriteRateThrottle
from api.views import CONVERSATION_ID, OBJECT_ERRORS, ApiView, errors
from conversations import sharing
from conversations.actions.share import revoke_share, share_conversation


def _sharing_on() -> None:
    if not sharing.enabled():
        raise NotFound("Sharing is turned off on this instance.")


def _share_body(request: Request, share: Any, token: str | None) -> Any:
    share.token = token
    share.url = (request.build_absolute_uri(reverse("share-page", args=[token]))
                 if token else None)
    return s.ShareSerializer(share).data


class ConversationSharesView(ApiView):
    permission_classes = [OwnsConversation]
    throttle_classes = [*APIView.throttle_classes, WriteRateThrottle]

    @extend_schema(
        operation_id="conversations_share",
        parameters=[CONVERSATION_ID],
        request=s.ShareRequestSerializer,
        responses={201: s.ShareSerializer, **errors(400, 415, *OBJECT_ERRORS)},
        description="A read-only link to the conversation as it stands now (owner only): "
        "`/s/<token>/` opens for anyone, without logging in, and shows the portable "
        "projection only (never payloads). 404 when sharing is turned off.",
    )
    def post(self, request: Request, id: Any) -> Response:
        _sharing_on()
        conversation = self.get_object()
        data = s.ShareRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        share, token = share_conversation(
            conversation, request.user, expires=data.validated_data["expires"],
            include_reasoning=data.validated_data["include_reasoning"])
        return Response(_share_body(request, share, token), status=status.HTTP_201_CREATED)


class ShareListView(ApiView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="shares_list",
        responses={200: s.ShareSerializer(many=True), **errors(*OBJECT_ERRORS)},
        description="Your shared links, newest first, with their views.",
    )
    def get(self, request: Request) -> Response:
        _sharing_on()
        return Response([_share_body(request, share, share.token)
                         for share in sharing.owned_by(request.user)])


class ShareDetailView(ApiView):
    permission_classes = [IsAuthenticated]
    throttle_classes = [*APIView.throttle_classes, WriteRateThrottle]

    @extend_schema(
        operation_id="shares_revoke",
        parameters=[OpenApiParameter("token", str, OpenApiParameter.PATH)],
        responses={204: None, **errors(*OBJECT_ERRORS)},
        description="Revoke a link of yours: it opens nothing from now on.",
    )
    def delete(self, request: Request, token: str) -> Response:
        _sharing_on()
        share = sharing.owned_with_token(request.user, token)
        if share is None:
            raise NotFound("No such shared link of yours.")
        revoke_share(share)
        return Response(status=status.HTTP_204_NO_CONTENT)
