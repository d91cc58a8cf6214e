"""Bringing conversations in through the API: import (chat exports and documents, one or many
files) and ingest (a provider's recorded responses, as a new conversation or its next turn)."""

from __future__ import annotations

import logging
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import providers
from api import serializers as s
from api.errors import Refusals
from api.http import (
    LimitedMultiPartParser,
    PayloadTooLarge,
    RawBodyParser,
    SpooledBodyParser,
    choice_param,
    header_param,
    text_param,
)
from api.permissions import OwnsConversation
from api.throttling import WriteRateThrottle, import_throttles
from api.views import CONVERSATION_ID, OBJECT_ERRORS, READ_ERRORS, ApiView, created_response, errors
from conversations import upload_limits, uploads
from conversations.actions.create import import_files
from conversations.actions.ingest import ingest_response
from conversations.ingest import AlreadyImported, ResponseFile
from conversations.models import Conversation
from conversations.responses import streaming_response
from guards.redaction import redact_text

log = logging.getLogger("turnscope.api")

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
        # What is stored remembers its source (the body and prompt): the same ingest sent
        # again (a client retrying after a crash or a lost response) is reported, not stored
        # twice, unless ``copy``: as a new conversation, or as a turn of this one.
        copy = _flag(request.query_params.get("copy"))
        try:
            summary = ingest_response(
                provider, [ResponseFile("body", raw, context)], owner=request.user,
                title=title, prompt=prompt, conversation=conversation, remember=not copy,
            )
        except AlreadyImported as already:
            return Response(_already_ingested(already))
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
        return created_response(summary.conversation, body)


def _already_ingested(already: AlreadyImported) -> dict[str, Any]:
    """The answer to an ingest sent again: what it became the first time (a conversation, or
    a turn of the conversation it was ingested into)."""
    there = already.conversation
    body = {"already_imported": True, "conversation": str(there.pk), "title": there.title,
            "url": _conversation_url(there),
            "detail": "You ingested this response before; copy=true stores a copy."}
    if already.turn is not None:
        turn = already.turn
        url = f"{reverse('api-conversation-events', kwargs={'id': there.pk})}?turn={turn.index}"
        body |= {"turn": {"id": str(turn.pk), "index": turn.index, "url": url}, "url": url,
                 "detail": f"You ingested this response into this conversation before (turn "
                 f"{turn.index}); copy=true appends it again."}
    return body


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
COPY_PARAMETER = OpenApiParameter(
    "copy", bool, default=False,
    description="Store a copy of a response ingested before instead of answering that it was.")
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
                                     "(percent-encoded). ?title= is still read."),
                    COPY_PARAMETER],
        request=INGEST_BODY,
        responses={201: s.IngestResultSerializer,
                    200: OpenApiResponse(s.AlreadyIngestedSerializer,
                                         description="Ingested before: not stored again."),
                    **errors(400, 413, *READ_ERRORS)},
        description="Ingest a raw provider response body (SSE, JSON lines or a JSON body) as a "
        "new conversation holding one agent turn. Credentials in it are redacted. The same "
        "body (with the same prompt) ingested again is not stored twice: the answer is a 200 "
        "naming the conversation it became (`copy=true` stores a copy).",
    )
    def post(self, request: Request) -> Response:
        return self.run_ingest(request, None)


class ConversationIngestView(_IngestBase):
    permission_classes = [OwnsConversation]

    @extend_schema(
        operation_id="conversations_ingest_turn",
        parameters=[CONVERSATION_ID, *INGEST_PARAMETERS, COPY_PARAMETER],
        request=INGEST_BODY,
        responses={201: s.IngestResultSerializer,
                   200: OpenApiResponse(s.AlreadyIngestedTurnSerializer,
                                        description="Ingested into this conversation before: "
                                        "not appended again."),
                   **errors(400, 413, *OBJECT_ERRORS)},
        description="Ingest a raw provider response body as a new agent turn of this "
        "conversation (owner only). The same body (with the same prompt) ingested into this "
        "conversation again is not appended twice: the answer is a 200 naming the turn it "
        "became (`copy=true` appends it again).",
    )
    def post(self, request: Request, id: Any) -> Response:
        return self.run_ingest(request, self.get_object())
