"""The conversation list's filters (the same ones the UI offers): text search over titles,
message text and cited sources; provider; model; cited domain."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from rest_framework.exceptions import ValidationError

from api.http import text_param
from conversations.domains import DOMAIN, domain_regex
from conversations.models import Attribution, Conversation, Event, Turn

FILTERS = {
    "q": "Search titles, message text, and the titles and URLs of cited sources.",
    "provider": "Conversations with an agent turn from this provider (e.g. anthropic).",
    "model": "Conversations with an agent turn from this model (as the provider named it).",
    "domain": "Conversations citing a source on this domain or one of its subdomains.",
}


def filter_conversations(queryset: QuerySet[Conversation], request: Any) -> QuerySet[Conversation]:
    q = text_param(request, "q", max_length=200).strip()
    if q:
        in_text = Event.objects.filter(conversation=OuterRef("pk"), kind="message",
                                       text__icontains=q)
        in_sources = Attribution.objects.filter(event__conversation=OuterRef("pk")).filter(
            Q(url__icontains=q) | Q(title__icontains=q))
        queryset = queryset.filter(Q(title__icontains=q) | Exists(in_text) | Exists(in_sources))
    provider = text_param(request, "provider", max_length=64).strip()
    if provider:
        queryset = queryset.filter(
            Exists(Turn.objects.filter(conversation=OuterRef("pk"), provider=provider)))
    model = text_param(request, "model", max_length=200).strip()
    if model:
        queryset = queryset.filter(
            Exists(Turn.objects.filter(conversation=OuterRef("pk"), model=model)))
    domain = text_param(request, "domain", max_length=253).strip().lower().rstrip(".")
    if domain:
        if domain.startswith("www."):
            domain = domain[4:]
        if not DOMAIN.match(domain):
            raise ValidationError({"domain": "must be a host name such as example.com"})
        cited = Attribution.objects.filter(event__conversation=OuterRef("pk"),
                                           url__iregex=domain_regex(domain))
        queryset = queryset.filter(Exists(cited))
    return queryset
