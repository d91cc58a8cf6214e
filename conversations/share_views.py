"""Shared pages (``/s/<token>/``: anyone with the link) and the owner's shares (``/shares/``).

Thin, as the other pages: the rules live in ``conversations.sharing``. Every response under
``/s/`` is ``no-store`` (a revoked or expired link shows nothing, not even from a cache),
``noindex``, and sends no Referer (the token is in the page's URL: a cited site must never
see it), under the same Content-Security-Policy as every page.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from csp.decorators import csp
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET, require_POST

from conversations import reading, sharing
from conversations.actions.share import revoke_share, share_conversation, update_share
from conversations.models import Conversation, Event, Share
from conversations.projections import export_stream
from conversations.rendering import ENTRY_POINT_POLICY, search_entry_point_document
from conversations.responses import streaming_response
from streams.bodies import ArtifactBody

EXPORTS = {
    "json": ("application/json", "json"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
    "html": ("text/html; charset=utf-8", "html"),
}


def _private(response: HttpResponse) -> HttpResponse:
    add_never_cache_headers(response)  # no-store: a revoked link is gone from caches too
    response["X-Robots-Tag"] = "noindex, nofollow, noarchive"
    response["Referrer-Policy"] = "no-referrer"
    return response


def shared(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A view under ``/s/<token>/``: the share behind the token as its ``share`` (with its
    ``token``), a plain 404 when there is none (revoked, expired, sharing off, never made),
    and the share headers on whatever it answers."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, token: str, *args: Any, **kwargs: Any) -> HttpResponse:
        share = sharing.find(token)
        if share is None:
            return _private(HttpResponseNotFound("No such shared conversation.",
                                                 content_type="text/plain"))
        share.token = token
        try:
            return _private(view(request, share, *args, **kwargs))
        except Http404:
            return _private(HttpResponseNotFound("Not found.", content_type="text/plain"))

    return wrapped


def _index_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) < 10 else None


def _turn_param(request: HttpRequest) -> uuid.UUID | None:
    try:
        return uuid.UUID(request.GET.get("turn", ""))
    except ValueError:
        return None


def _window(request: HttpRequest, share: Share, end: int | None = None) -> reading.TurnWindow:
    return reading.snapshot_window(
        share.conversation, sharing.snapshot(share), share,
        size=settings.TURNSCOPE_PAGE_TURNS, start=_index_param(request, "from"),
        turn_id=_turn_param(request), end=end,
    )


@require_GET
@shared
def share_page(request: HttpRequest, share: Share) -> HttpResponse:
    window = _window(request, share)
    sharing.record_view(share)
    return render(request, "conversations/shared.html", {
        "share": share, "conversation": share.conversation, "turns": window.views,
        "window": window, "related": sharing.related(share),
    })


@require_GET
@shared
def share_window(request: HttpRequest, share: Share) -> HttpResponse:
    """The shared page's "Earlier turns" (as ``/c/<id>/turns/``)."""
    window = _window(request, share, end=_index_param(request, "to"))
    return render(request, "conversations/_window.html", {
        "share": share, "conversation": share.conversation, "turns": window.views,
        "window": window,
    })


@require_GET
@shared
def share_export(request: HttpRequest, share: Share) -> HttpResponse:
    """The snapshot as a portable export: JSON, Markdown or HTML."""
    fmt = request.GET.get("format", "json")
    if fmt not in EXPORTS:
        return HttpResponse(f"format must be one of {', '.join(EXPORTS)}.", status=400,
                            content_type="text/plain")
    content_type, extension = EXPORTS[fmt]
    response = streaming_response(
        request, export_stream(share.conversation, fmt, "portable",
                               snapshot=sharing.snapshot(share)), content_type)
    response["Content-Disposition"] = (
        f'attachment; filename="conversation-{share.conversation_id}.{extension}"')
    return response


@require_GET
@xframe_options_sameorigin
@csp(ENTRY_POINT_POLICY)
@shared
def share_entry_point(request: HttpRequest, share: Share, event_id: uuid.UUID) -> HttpResponse:
    """Google's search suggestions of an event in the snapshot (see
    ``views.search_entry_point``)."""
    event = get_object_or_404(Event, pk=event_id, conversation_id=share.conversation_id,
                              kind="provider_artifact", seq__lte=share.last_seq,
                              turn__index__lt=share.turn_count)
    body = event.typed_body
    display = body.display_html if isinstance(body, ArtifactBody) else None
    if not display or not display.strip():
        raise Http404("nothing to display")
    return HttpResponse(search_entry_point_document(display))


# -- the owner's side ---------------------------------------------------------------------------


def _sharing_on() -> None:
    if not sharing.enabled():
        raise Http404("sharing is turned off")


def link(request: HttpRequest, token: str) -> str:
    return request.build_absolute_uri(reverse("share-page", args=[token]))


@login_required
@require_POST
def share_create(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """The conversation page's Share: a new link to it as it stands, then the list of shares
    with the new one picked out."""
    _sharing_on()
    conversation = get_object_or_404(Conversation, pk=conversation_id, owner=request.user)
    expires = request.POST.get("expires", "never")
    if expires not in sharing.EXPIRY_DAYS:
        messages.error(request, "Choose when the link expires: never, in 1, 7 or 30 days.")
        return redirect("conversation-detail", conversation.pk)
    share, _ = share_conversation(conversation, request.user, expires=expires,
                                  include_reasoning=request.POST.get("reasoning") == "1")
    messages.success(request, "Link created: anyone who has it can read this conversation "
                     "as it stands now.")
    return redirect(reverse("share-list") + f"?new={share.pk}#share-{share.pk}")


@login_required
@require_GET
def share_list(request: HttpRequest) -> HttpResponse:
    _sharing_on()
    shares = sharing.owned_by(request.user)
    for share in shares:
        share.url = link(request, share.token) if share.token else None
    return render(request, "conversations/shares.html", {
        "shares": shares, "new": request.GET.get("new", ""),
    })


def _own_share(request: HttpRequest, share_id: uuid.UUID) -> Share:
    _sharing_on()
    return get_object_or_404(Share.objects.select_related("conversation"), pk=share_id,
                             owner=request.user)


@login_required
@require_POST
def share_update(request: HttpRequest, share_id: uuid.UUID) -> HttpResponse:
    share = _own_share(request, share_id)
    update_share(share)
    messages.success(request, "The link now shows the conversation as it stands now.")
    return redirect(reverse("share-list") + f"#share-{share.pk}")


@login_required
@require_POST
def share_revoke(request: HttpRequest, share_id: uuid.UUID) -> HttpResponse:
    share = _own_share(request, share_id)
    revoke_share(share)
    messages.success(request, "Revoked: the link no longer opens anything.")
    return redirect("share-list")
