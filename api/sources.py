"""``GET /api/v1/sources`` and ``GET /api/v1/sources/models``: what the models consulted and
cited across the conversations you see (staff: everyone's, ``owner`` to narrow), the figures of
the Sources pages (``conversations.source_report``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from api.http import choice_param, text_param
from api.views import READ_ERRORS, ApiView, errors
from conversations import source_report
from conversations.source_report import COLUMNS, GROUPS, Filters, InvalidFilter

FILTER_PARAMS = [
    OpenApiParameter("provider", str, description="Turns from this provider only."),
    OpenApiParameter("model", str, description="Turns from this model only (as served)."),
    OpenApiParameter("since", str, description="Turns from this UTC day on (YYYY-MM-DD)."),
    OpenApiParameter("until", str, description="Turns up to this UTC day (YYYY-MM-DD)."),
    OpenApiParameter("q", str, description="Conversations the list's search finds (titles, "
                     "messages, sources' titles and URLs)."),
    OpenApiParameter("owner", str, description="Staff: one owner's conversations (a user "
                     "name). Others always see their own only."),
]


def _filters(request: Request) -> Filters:
    values = {name: text_param(request, name, max_length=200)
              for name in ("provider", "model", "since", "until", "q", "owner")}
    try:
        return Filters.read(values)
    except InvalidFilter as exc:
        raise ValidationError({"detail": str(exc)}) from None


class CitedModelCitedSerializer(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()
    cited = serializers.IntegerField()


class CitedSourceSerializer(serializers.Serializer):
    domain = serializers.CharField(required=False, help_text="With group=domain or host.")
    url = serializers.CharField(required=False, help_text="With group=url: the URL (a "
                                "source without one: its title).")
    title = serializers.CharField(required=False, help_text="With group=url.")
    cited = serializers.IntegerField(help_text="Attributions naming it, each once.")
    consulted = serializers.IntegerField(help_text="Times a turn's searches or fetches "
                                         "listed it (a domain: its pages', summed).")
    consulted_not_cited = serializers.IntegerField(help_text="Of those, times the turn did "
                                                   "not cite it.")
    conversations = serializers.IntegerField()
    turns = serializers.IntegerField()
    models = CitedModelCitedSerializer(many=True)
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()


class CitedSourcePageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    results = CitedSourceSerializer(many=True)


class CitedIntegrityCountsSerializer(serializers.Serializer):
    exact = serializers.IntegerField()
    repaired = serializers.IntegerField()
    dropped = serializers.IntegerField()
    no_source = serializers.IntegerField()


class CitedDomainCitedSerializer(serializers.Serializer):
    domain = serializers.CharField()
    cited = serializers.IntegerField()


class CitedModelProfileSerializer(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()
    answers = serializers.IntegerField(help_text="Agent turns.")
    searched_answers = serializers.IntegerField(help_text="Answers that ran a web search.")
    searches = serializers.IntegerField()
    searches_per_answer = serializers.FloatField(allow_null=True)
    consulted = serializers.IntegerField(help_text="Sources consulted, once per answer.")
    cited_sources = serializers.IntegerField(help_text="Sources cited, once per answer.")
    citations = serializers.IntegerField(help_text="Attributions.")
    consulted_per_answer = serializers.FloatField(allow_null=True)
    cited_per_answer = serializers.FloatField(allow_null=True)
    consulted_not_cited = serializers.IntegerField()
    consulted_not_cited_share = serializers.FloatField(
        allow_null=True, help_text="Of the sources consulted, the share never cited.")
    cited_not_consulted = serializers.IntegerField()
    cited_not_consulted_share = serializers.FloatField(
        allow_null=True, help_text="Of the sources cited, the share no search or fetch of "
        "the answer listed (cited without being opened).")
    integrity = CitedIntegrityCountsSerializer()
    top_domains = CitedDomainCitedSerializer(many=True)


class CitedModelProfilesSerializer(serializers.Serializer):
    results = CitedModelProfileSerializer(many=True)


class SourcesView(ApiView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="sources_list",
        parameters=[
            OpenApiParameter("group", str, enum=list(GROUPS), default="domain",
                             description="By registrable domain (a Gemini grounding redirect "
                             "under the site it names), by host, or by URL."),
            OpenApiParameter("domain", str, description="Only the hosts or URLs of this "
                             "registrable domain."),
            *FILTER_PARAMS,
            OpenApiParameter("sort", str, enum=["name", *COLUMNS], default="cited"),
            OpenApiParameter("order", str, enum=["desc", "asc"], default="desc"),
            OpenApiParameter("page", int, default=1),
        ],
        responses={200: CitedSourcePageSerializer, **errors(400, *READ_ERRORS)},
        description="Every source consulted or cited in the turns you see, with how often.",
    )
    def get(self, request: Request) -> Response:
        group = choice_param(request, "group", GROUPS, "domain")
        sort = choice_param(request, "sort", ("name", *COLUMNS), "cited")
        order = choice_param(request, "order", ("desc", "asc"), "desc")
        page_text = text_param(request, "page", max_length=9) or "1"
        if not page_text.isdigit():
            raise ValidationError({"page": "must be a positive integer"})
        page = source_report.sources(
            request.user, _filters(request), group=group, sort=sort,
            descending=order == "desc", page=int(page_text),
            within=text_param(request, "domain", max_length=255).strip().lower())
        return Response({"count": page.total, "page": page.page, "pages": page.pages,
                         "results": [source_report.item(row, group) for row in page.rows]})


class SourceModelsView(ApiView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="sources_models",
        parameters=FILTER_PARAMS,
        responses={200: CitedModelProfilesSerializer, **errors(400, *READ_ERRORS)},
        description="A citation profile per provider · model of the turns you see.",
    )
    def get(self, request: Request) -> Response:
        return Response({"results": source_report.models(request.user, _filters(request))})
