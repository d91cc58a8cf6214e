"""The conversation list's filters (the same ones the UI offers): text search over titles,
message text and cited sources; provider; model; cited domain."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError

from api.http import text_param
from conversations import search
from conversations.domains import DOMAIN, query_domain
from conversations.models import Conversation

FILTERS = {
    "q": "Search titles, message text, and the titles and URLs of cited sources.",
    "provider": "Conversations with an agent turn from this provider (e.g. anthropic).",
    "model": "Conversations with an agent turn from this model (as the provider named it).",
    "domain": "Conversations citing a source on this domain or one of its subdomains.",
}


def filter_conversations(queryset: QuerySet[Conversation], request: Any) -> QuerySet[Conversation]:
    """``queryset`` narrowed by the request's filters, through the list's indexes
    (``conversations.search``: the same ones the pages use)."""
    q = text_param(request, "q", max_length=200).strip()
    provider = text_param(request, "provider", max_length=64).strip()
    model = text_param(request, "model", max_length=200).strip()
    domain = query_domain(text_param(request, "domain", max_length=2000))
    if domain and not DOMAIN.match(domain):  # a host name, or a pasted URL's host
        raise ValidationError({"domain": "must be a host name such as example.com"})
    return search.filtered(queryset, query=q, provider=provider, model=model, domain=domain)
