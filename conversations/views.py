"""Browser pages. Thin: access checks and context; assembly lives in ``reading``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from conversations import reading
from conversations.models import Conversation

PAGE_SIZE = 25


def _visible(request: HttpRequest, conversation_id: str) -> Conversation:
    return get_object_or_404(Conversation.objects.visible_to(request.user), pk=conversation_id)


def _allow_chip_styles(response: HttpResponse, views: list[reading.TurnView]) -> HttpResponse:
    """Google's search chip is shown in a sandboxed srcdoc iframe, which inherits this page's
    CSP; allow exactly its (sanitized) style blocks by hash, nothing else."""
    hashes = [h for view in views for h in view.style_hashes]
    if hashes:
        response._csp_update = {"style-src": hashes}  # read by django-csp's middleware
    return response


@login_required
@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    filters = {
        key: request.GET.get(key, "").strip()[:200]
        for key in ("q", "provider", "model", "domain")
    }
    rows = reading.conversation_rows(
        request.user, query=filters["q"], provider=filters["provider"],
        model=filters["model"], domain=filters["domain"],
    )
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    chips = reading.provenance_chips([c.pk for c in page.object_list])
    for conversation in page.object_list:
        conversation.chips = chips.get(conversation.pk, [])
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "conversations/list.html", {
        "page": page,
        "filters": filters,
        "choices": reading.filter_choices(request.user),
        "query_string": query.urlencode(),
    })


@login_required
@require_GET
def conversation_detail(request: HttpRequest, conversation_id: str) -> HttpResponse:
    conversation = _visible(request, conversation_id)
    views = reading.turn_views(conversation)
    response = render(request, "conversations/detail.html", {
        "conversation": conversation,
        "turns": views,
        "last_seq": conversation.next_seq - 1,
    })
    return _allow_chip_styles(response, views)


@login_required
@require_GET
def turn_fragment(request: HttpRequest, conversation_id: str, index: int) -> HttpResponse:
    conversation = _visible(request, conversation_id)
    turn = conversation.turns.filter(index=index).first()
    if turn is None:
        raise Http404("no such turn")
    [view] = reading.turn_views(conversation, [turn])
    return _allow_chip_styles(HttpResponse(view.html), [view])
