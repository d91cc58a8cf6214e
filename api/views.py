"""REST API views (DRF), mounted under /api/v1/.

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
from rest_framework.exceptions import NotFound, ParseError, PermissionDenied, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import providers
from api import serializers as s
from api.errors import Refusals
from api.filters import FILTERS, filter_conversations
from api.http import (
    ApiMetadata,
    JsonOnlyNegotiation,
    LimitedMultiPartParser,
    OrjsonRenderer,
    PayloadTooLarge,
    RawBodyParser,
    SmallJSONParser,
    SpooledBodyParser,
    choice_param,
    header_param,
    text_param,
)
from api.pagination import ConversationCursorPagination, EventCursorPagination
from api.permissions import (
    CanSeeConversation,
    OwnsConversation,
    can_read_native,
    visible_conversations,
)
from api.throttling import WriteRateThrottle, WriteThrottled, import_throttles
from conversations import openwop, sharing, store, upload_limits, uploads
from conversations.actions.create import (
    announce_created,
    fork_conversation,
    import_files,
    new_conversation,
)
from conversations.actions.delete import delete_conversation
from conversations.actions.rename import rename_conversation
from conversations.actions.share import revoke_share, share_conversation
from conversations.ingest import ResponseFile, ingest
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
from guards.redaction import redact_text

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


def _summary(conversation: Conversation) -> dict[str, Any]:
    conversation = Conversation.objects.select_related("owner").get(pk=conversation.pk)
    return s.ConversationSummarySerializer(conversation).data


def _created(conversation: Conversation, body: Any) -> Response:
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
        return _created(conversation, _summary(conversation))


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
        return Response(_summary(conversation))

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


# -- writes ------------------------------------------------------------------------------------


IMPORT_BODY = {
    "multipart/form-data": {"type": "object", "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "format": {"type": "string", "enum": list(uploads.FORMATS)},
        "recordings": {"type": "string", "enum": list(uploads.RECORDINGS)},
    }},
    "application/json": {"type": "object", "additionalProperties": True},
    "application/octet-stream": {"type": "string", "format": "binary"},
    "application/zip": {"type": "string", "format": "binary"},
    "application/x-yaml": {"type": "string"},
    "text/event-stream": {"type": "string"},
    "application/x-ndjson": {"type": "string"},
}


class ImportView(ApiView):
    permission_classes = [IsAuthenticated]
    throttle_classes = [*APIView.throttle_classes, WriteRateThrottle]

    def get_throttles(self) -> list[Any]:
        return import_throttles(self.request, super().get_throttles())
    parser_classes = [LimitedMultiPartParser, SpooledBodyParser]

    def initialize_request(self, request: Any, *args: Any, **kwargs: Any) -> Request:
        # The per-file limit sits in front of the multipart reader before anything reads the
        # body (the session path's CSRF check does, through request.POST).
        upload_limits.install(request)
        return super().initialize_request(request, *args, **kwargs)

    @extend_schema(
        operation_id="conversations_import",
        parameters=[
            OpenApiParameter("format", str, enum=list(uploads.FORMATS), default="auto",
                             description="How to read the files (default: detected from their "
                             "content). In a multipart body, a `format` field."),
            OpenApiParameter("name", str, description="A name for a raw body in the report "
                             "(default `body`)."),
            OpenApiParameter("recordings", str, enum=list(uploads.RECORDINGS), default="auto",
                             description="How provider recordings of one provider are grouped: "
                             "`auto` by their content (a continuation joins the response it "
                             "continues), `continuations` one turn in the order given (as "
                             "`ingest FILE...`), `each` one conversation each (as `ingest "
                             "--each`). In a multipart body, a `recordings` field."),
            OpenApiParameter("copy", bool, default=False,
                             description="Import a copy of what you imported before, instead "
                             "of reporting it as already imported. In a multipart body, a "
                             "`copy` field."),
        ],
        request=IMPORT_BODY,
        responses={201: s.ImportReportSerializer, 200: s.ImportReportSerializer,
                   **errors(400, 413, *READ_ERRORS)},
        description="Import conversations, as yours: a Turnscope export document (either "
        "projection), provider recordings (raw SSE, JSON lines or a JSON body; a recording joins "
        "the one before it when it continues it, see `recordings`), VCR cassettes, "
        "ChatGPT and Claude.ai data exports (the .zip or its conversations.json). Send one file "
        "as the raw body, or several as multipart/form-data. Each conversation is all or "
        "nothing; the report lists every conversation imported and every problem (file and "
        "line). A conversation you imported before (the same export conversation id, or the "
        "same recording bytes) is not imported again: it is listed in `already_imported` with "
        "its link (`copy=true` imports a copy). When nothing was imported nor already there "
        "the answer is a 400 whose `detail` names the first problem (with the same lists); "
        "when everything was already there, a 200. With `Accept: application/x-ndjson` the "
        "report streams as JSON lines, one per conversation as it is stored (`start`, "
        "`conversation`, `already_imported`, `problem`, `progress`, then `done`, or `error` "
        "when the server fails under way). Credentials found are redacted.",
    )
    def post(self, request: Request) -> Response:
        try:
            upload_limits.check_length(request.META)
            data = request.data
        except upload_limits.TooLarge as exc:
            raise PayloadTooLarge(f"Too large: {exc}.") from None
        if isinstance(data, uploads.Upload):  # a raw body
            files = [data]
            fmt = choice_param(request, "format", list(uploads.FORMATS), "auto")
        else:
            files = upload_limits.request_files(request.FILES)
            fmt = (data.get("format") if hasattr(data, "get") else None) or \
                choice_param(request, "format", list(uploads.FORMATS), "auto")
            if fmt not in uploads.FORMATS:
                raise ValidationError({"format": f"must be one of {', '.join(uploads.FORMATS)}"})
            if not files:
                raise ParseError("No file in the multipart body.")
        grouping = (data.get("recordings") if hasattr(data, "get") else None) or \
            choice_param(request, "recordings", list(uploads.RECORDINGS), "auto")
        if grouping not in uploads.RECORDINGS:
            raise ValidationError({"recordings": "must be one of "
                                                 f"{', '.join(uploads.RECORDINGS)}"})
        copy = _flag(data.get("copy") if hasattr(data, "get") else None,
                     request.query_params.get("copy"))
        results = import_files(files, owner=request.user, format=fmt,
                                      recordings=grouping, copy=copy)
        if "application/x-ndjson" in request.headers.get("Accept", ""):
            # Each conversation as it is stored: a client still connected when the server
            # stops has every line of what was stored before.
            return streaming_response(request._request, uploads.result_lines(
                results, files, _conversation_url), "application/x-ndjson")
        found: dict[str, list[dict[str, Any]]] = {
            "conversation": [], "already_imported": [], "problem": []}
        try:
            for result in results:
                if not isinstance(result, uploads.Progress):
                    report = uploads.report(result, _conversation_url)
                    found[report["type"]].append(report)
        except Exception:  # what was stored before it stays stored: say which, with the error
            log.exception("import stopped")
            return Response(_import_body(found) | {
                "detail": "The import stopped on a server error; what is listed was imported."},
                status=status.HTTP_500_INTERNAL_SERVER_ERROR)
        body = _import_body(found)
        if found["conversation"]:
            location = reverse("api-conversation-detail",
                               kwargs={"id": found["conversation"][0]["id"]})
            return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})
        if found["already_imported"]:  # nothing new: every conversation was there already
            return Response(body)
        problems = found["problem"]
        body["detail"] = problems[0]["detail"] if problems else "Nothing to import."
        return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _import_body(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"imported": found["conversation"], "already_imported": found["already_imported"],
            "problems": found["problem"], "conversations": len(found["conversation"])}


def _flag(*values: Any) -> bool:
    """A yes/no parameter: the first given of ``values`` (``1``, ``true``, ``on``: yes)."""
    for value in values:
        if value not in (None, ""):
            if str(value).lower() not in ("1", "true", "on", "yes", "0", "false", "off", "no"):
                raise ValidationError({"copy": "must be true or false"})
            return str(value).lower() in ("1", "true", "on", "yes")
    return False


def _conversation_url(conversation: Conversation) -> str:
    return reverse("api-conversation-detail", kwargs={"id": conversation.pk})


def available_providers() -> list[str]:
    return sorted(providers.ADAPTERS)


class _IngestBase(ApiView):
    throttle_classes = [*APIView.throttle_classes, WriteRateThrottle]

    def get_throttles(self) -> list[Any]:
        return import_throttles(self.request, super().get_throttles())
    parser_classes = [RawBodyParser]
    refusals = Refusals(
        action="ingest ({provider})",
        unreadable="The body is not a readable {provider} response: {reason}",
        refused="The body cannot be ingested: {reason}",
        unstorable="The turn cannot be stored: {reason}",
        unexpected="The body is not a readable {provider} response ({reason}).",
    )
    provider = ""  # the request's, once it is known

    def refusal_names(self) -> dict[str, str]:
        return {"provider": self.provider}

    def run_ingest(self, request: Request, conversation: Conversation | None) -> Response:
        provider = self.provider = choice_param(request, "provider", available_providers())
        # What may hold a secret comes in headers, not in the URL (ingest() redacts both).
        title = header_param(request, "title", max_length=300)
        prompt = header_param(request, "prompt", max_length=100_000)
        api_version = text_param(request, "api_version", max_length=100) or None
        endpoint = redact_text(header_param(request, "endpoint", max_length=2000)) or None
        # The body as RawBodyParser read it, not request.stream read here: on the session path
        # the CSRF check reads request.POST first, which parses (and so consumes) the body.
        raw = request.data if isinstance(request.data, bytes) else b""
        context = providers.WireContext(api_version=api_version, endpoint=endpoint)
        summary = ingest(
            provider, [ResponseFile("body", raw, context)], owner=request.user,
            title=title, prompt=prompt, conversation=conversation,
        )
        if conversation is None:
            announce_created(summary.conversation)
        turn = summary.turn
        agent: dict[str, Any] = {"agentId": turn.agent_id or "agent"}
        if turn.model_provenance:
            agent["model"] = turn.model_provenance
        states: dict[str, int] = {}
        for state in summary.activities.values():
            states[state] = states.get(state, 0) + 1
        body = {
            "conversation": str(summary.conversation.pk),
            "turn": {"id": str(turn.pk), "index": turn.index},
            "status": summary.status,
            "end_reason": summary.end_reason,
            "agent": agent,
            "events": summary.kinds,
            "citations": summary.citations,
            "hosted_activities": states,
            "usage": summary.usage,
        }
        return _created(summary.conversation, body)


INGEST_PARAMETERS = [
    OpenApiParameter("provider", str, required=True, enum=available_providers(),
                     description="Whose wire format the body is."),
    OpenApiParameter("Turnscope-Prompt", str, location=OpenApiParameter.HEADER,
                     description="The user message that asked for the response (percent-encoded"
                     " UTF-8); stored as a user turn before the agent turn. A header, not a query"
                     " parameter: what may hold a secret stays out of URLs and access logs "
                     "(?prompt= is still read)."),
    OpenApiParameter("api_version", str, description="API version header in force (e.g. "
                     "anthropic-version), when the body alone does not say."),
    OpenApiParameter("Turnscope-Endpoint", str, location=OpenApiParameter.HEADER,
                     description="The URL the request went to (names Gemini's API version); "
                     "percent-encoded. ?endpoint= is still read."),
]
INGEST_BODY = {
    "application/octet-stream": {"type": "string", "format": "binary"},
    "text/event-stream": {"type": "string"},
    "application/x-ndjson": {"type": "string"},
    "application/json": {"type": "object", "additionalProperties": True},
}


class IngestView(_IngestBase):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="conversations_ingest",
        parameters=[*INGEST_PARAMETERS,
                    OpenApiParameter("Turnscope-Title", str, location=OpenApiParameter.HEADER,
                                     description="Title of the new conversation "
                                     "(percent-encoded). ?title= is still read.")],
        request=INGEST_BODY,
        responses={201: s.IngestResultSerializer, **errors(400, 413, *READ_ERRORS)},
        description="Ingest a raw provider response body (SSE, JSON lines or a JSON body) as a "
        "new conversation holding one agent turn. Credentials in it are redacted.",
    )
    def post(self, request: Request) -> Response:
        return self.run_ingest(request, None)


class ConversationIngestView(_IngestBase):
    permission_classes = [OwnsConversation]

    @extend_schema(
        operation_id="conversations_ingest_turn",
        parameters=[CONVERSATION_ID, *INGEST_PARAMETERS],
        request=INGEST_BODY,
        responses={201: s.IngestResultSerializer, **errors(400, 413, *OBJECT_ERRORS)},
        description="Ingest a raw provider response body as a new agent turn of this "
        "conversation (owner only).",
    )
    def post(self, request: Request, id: Any) -> Response:
        return self.run_ingest(request, self.get_object())


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
        return _created(forked, _summary(forked))


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
        return _created(forked, _summary(forked))



# -- shares ------------------------------------------------------------------------------------


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
