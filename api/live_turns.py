"""The live-call endpoints of the REST API (``/api/v1/conversations/<id>/turns`` POST,
``.../turns/<index>/rerun`` and ``.../turns/<index>/stop``): thin, the work is ``live.calls``.

Each action is a mixin put on the API's base view (JSON only, who may see what, throttles) by the
views at the end; ``TurnsView`` adds the POST to the conversation's turns (``GET`` lists them).
Appending to a conversation is for its owner: a conversation the user cannot see is a 404
(``get_object``), one they see but do not own (staff) a 403.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api.permissions import CanSeeConversation, OwnsConversation
from api.throttling import WriteThrottled
from api.views import ApiView, ConversationTurnsView
from conversations.models import Conversation
from live import calls

CONVERSATION_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)
# The route only matches digits: a negative index is no URL of the API (an HTML 404 from the
# resolver), so the schema says so.
TURN_INDEX = OpenApiParameter("index", {"type": "integer", "minimum": 0}, OpenApiParameter.PATH,
                              description="The agent turn's index (0-based).")


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "A turn of this conversation is still streaming."
    default_code = "conflict"


class _Error(serializers.Serializer):
    detail = serializers.CharField()


def _errors(*codes: int) -> dict[int, Any]:
    words = {
        400: "Not sendable: `detail` says why (a disabled provider names the missing key).",
        401: "Not authenticated.", 403: "Not the owner of this conversation.",
        404: "No such conversation or turn (or not yours).",
        409: "A turn of this conversation is still streaming.", 429: "Too many requests.",
    }
    return {code: OpenApiResponse(_Error, description=words[code]) for code in codes}


class AskSerializer(serializers.Serializer):
    provider = serializers.CharField(
        max_length=64, help_text="Who answers: anthropic, openai, google, or azure / a named "
        "upstream (TURNSCOPE_UPSTREAMS) when configured; its key comes from the server's "
        "environment (without one, the recorded provider answers the first three).")
    model = serializers.CharField(max_length=200)
    web_search = serializers.BooleanField(default=True,
                                          help_text="Offer the provider's hosted web search.")


class TurnAskSerializer(AskSerializer):
    prompt = serializers.CharField(max_length=calls.MAX_PROMPT, trim_whitespace=False)


class LiveTurnSerializer(serializers.Serializer):
    conversation = serializers.UUIDField()
    turn = serializers.DictField(help_text="`{id, index}` of the agent turn that streams.")
    status = serializers.CharField(help_text="`streaming` while the answer arrives (or how it "
                                   "ended, when the server streamed it before answering).")
    provider = serializers.CharField()
    model = serializers.CharField(help_text="The model asked for; the turn's `agent.model` "
                                  "is the one the response names.")
    recorded = serializers.BooleanField(help_text="Answered by the built-in recorded "
                                        "provider (no key is set).")
    url = serializers.CharField(help_text="The conversation's page (watch the turn stream).")


class StoppedSerializer(serializers.Serializer):
    turn = serializers.DictField(help_text="`{id, index}` of the turn that was stopped.")


def _ask(data: dict[str, Any], prompt: str = "") -> calls.Ask:
    return calls.Ask(data["provider"], data["model"].strip(), prompt, data["web_search"])


def _accepted(live: calls.LiveTurn, ask: calls.Ask) -> Response:
    live.turn.refresh_from_db(fields=["status"])
    page = reverse("conversation-detail", args=[live.conversation.pk])
    body = {"conversation": str(live.conversation.pk),
            "turn": {"id": str(live.turn.pk), "index": live.turn.index},
            "status": live.turn.status, "provider": ask.provider, "model": ask.model,
            "recorded": live.recorded, "url": page}
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": page})


def _run(action: Any, *args: Any) -> Any:
    try:
        return calls.in_thread(action, *args)
    except calls.Busy as exc:
        raise Conflict(str(exc)) from None
    except calls.NotFound as exc:
        raise NotFound(str(exc)) from None
    except calls.TooMany as exc:
        raise Throttled(detail=str(exc)) from None
    except calls.CallError as exc:
        raise ValidationError({"detail": str(exc)}) from None


class StartTurnMixin:
    @extend_schema(
        operation_id="conversations_turns_start",
        parameters=[CONVERSATION_ID],
        request=TurnAskSerializer,
        responses={202: LiveTurnSerializer, **_errors(400, 401, 403, 404, 409, 429)},
        description="Send the next turn to a provider: the prompt is stored as a user turn and "
        "the answer streams into a new agent turn (watch it on the page or the websocket). "
        "Owner only; 409 while a turn of this conversation is streaming. The provider's key "
        "comes from the server's environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, "
        "`GEMINI_API_KEY`), never from the request; a provider without one is answered by the "
        "recorded provider when the server has one, else refused (400, naming the key).",
    )
    def post(self, request: Request, id: Any) -> Response:
        # The composing view's conversation: the owner's only for a POST (_Writes)
        conversation: Conversation = self.get_object()  # type: ignore[attr-defined]
        data = TurnAskSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ask = _ask(data.validated_data, data.validated_data["prompt"])
        return _accepted(_run(calls.start_turn, conversation, ask), ask)


class RerunMixin:
    @extend_schema(
        operation_id="conversations_turns_rerun",
        parameters=[CONVERSATION_ID, TURN_INDEX],
        request=AskSerializer,
        responses={202: LiveTurnSerializer, **_errors(400, 401, 403, 404, 409, 429)},
        description="Answer agent turn `index` again with another provider or model, as a new "
        "branch: a fork up to the user turn before it, then a live turn there (the original "
        "is untouched). The 202 names the new conversation and its streaming turn.",
    )
    def post(self, request: Request, id: Any, index: int) -> Response:
        # The composing view's conversation: the owner's only for a POST (_Writes)
        conversation: Conversation = self.get_object()  # type: ignore[attr-defined]
        data = AskSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ask = _ask(data.validated_data)
        return _accepted(_run(calls.rerun, conversation, index, request.user, ask), ask)


class StopMixin:
    @extend_schema(
        operation_id="conversations_turns_stop",
        parameters=[CONVERSATION_ID, TURN_INDEX],
        request=None,
        responses={202: StoppedSerializer, **_errors(401, 403, 404, 429)},
        description="Stop the streaming turn `index`: it ends interrupted, keeping what "
        "streamed. 404 when that turn is not streaming.",
    )
    def post(self, request: Request, id: Any, index: int) -> Response:
        # The composing view's conversation: the owner's only for a POST (_Writes)
        conversation: Conversation = self.get_object()  # type: ignore[attr-defined]
        streaming = calls.streaming_turn(conversation)
        if streaming is None or streaming.index != index:
            raise NotFound(f"Turn {index} is not streaming.")
        turn = _run(calls.stop, conversation)
        if turn is None:
            raise NotFound(f"Turn {index} is not streaming.")
        return Response({"turn": {"id": str(turn.pk), "index": turn.index}},
                        status=status.HTTP_202_ACCEPTED)


class _Writes(WriteThrottled):
    """A POST is the conversation owner's only (``OwnsConversation``, as the API's own writes),
    under the write throttle."""

    def get_permissions(self) -> list[Any]:
        if self.request.method == "POST":  # type: ignore[attr-defined]
            return [OwnsConversation()]
        return list(super().get_permissions())  # type: ignore[misc]


class TurnsView(_Writes, StartTurnMixin, ConversationTurnsView):
    """``GET``: the conversation's turns; ``POST``: the next turn, live."""

    permission_classes = [CanSeeConversation]


class RerunView(_Writes, RerunMixin, ApiView):
    permission_classes = [CanSeeConversation]


class StopView(_Writes, StopMixin, ApiView):
    permission_classes = [CanSeeConversation]
