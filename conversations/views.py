"""Browser pages. Thin: access checks and context; assembly lives in ``reading``."""

from __future__ import annotations

import logging
import uuid
from typing import Any
from urllib.parse import urlencode

from csp.decorators import csp
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conversations import (
    branches,
    compare,
    discard,
    reading,
    store,
    upload_limits,
    uploads,
)
from conversations.actions.create import import_files, new_conversation
from conversations.actions.delete import delete_conversation
from conversations.actions.rename import rename_conversation
from conversations.models import Conversation, Event
from conversations.rendering import ENTRY_POINT_POLICY, search_entry_point_document
from conversations.responses import streaming_response
from streams.bodies import ArtifactBody

log = logging.getLogger("turnscope.views")

PAGE_SIZE = 25


def _visible(request: HttpRequest, conversation_id: str) -> Conversation:
    return get_object_or_404(Conversation.objects.visible_to(request.user), pk=conversation_id)


@login_required
@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    filters = {
        key: request.GET.get(key, "").strip()[:200]
        for key in ("q", "provider", "model", "domain")
    }
    try:
        rows = reading.conversation_rows(
            request.user, query=filters["q"], provider=filters["provider"],
            model=filters["model"], domain=filters["domain"],
        )
    except reading.InvalidFilter as exc:
        return HttpResponse(f"Bad search: {exc}.", status=400, content_type="text/plain")
    page = reading.list_page(rows, after=request.GET.get("after", ""),
                             before=request.GET.get("before", ""),
                             last=request.GET.get("page") == "last", size=PAGE_SIZE,
                             query=filters["q"])
    chips = reading.provenance_chips([c.pk for c in page.rows])
    for conversation in page.rows:
        conversation.chips = chips.get(conversation.pk, [])
    reading.label_rows(page.rows, request.user)
    query = request.GET.copy()
    for key in ("page", "after", "before"):
        query.pop(key, None)
    return render(request, "conversations/list.html", {
        "page": page,
        "filters": filters,
        "choices": reading.filter_choices(request.user),
        "query_string": query.urlencode(),
        "upload_formats": uploads.FORMATS,
        "upload_recordings": uploads.RECORDINGS,
        "upload_limits": upload_limits.limits(),
    })


def _index_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) < 10 else None


def _turn_param(request: HttpRequest) -> uuid.UUID | None:
    try:
        return uuid.UUID(request.GET.get("turn", ""))
    except ValueError:
        return None


def _window(request: HttpRequest, conversation: Conversation,
            end: int | None = None) -> reading.TurnWindow:
    """The window of turns asked for: ``?from=<index>``, or ``?turn=<id>`` (a deep link: the
    window holding that turn), else the newest turns; each turn where the conversation's
    branches part carries them (outside the turn's cached fragment: a new fork changes them)."""
    window = reading.turn_window(
        conversation, size=settings.TURNSCOPE_PAGE_TURNS, start=_index_param(request, "from"),
        turn_id=_turn_param(request), end=end,
    )
    points = branches.branch_points(conversation, request.user,
                                    range(window.start, window.end))
    for view in window.views:
        view.branch = points.get(view.turn.index)
    return window


@login_required
@require_GET
def conversation_detail(request: HttpRequest, conversation_id: str) -> HttpResponse:
    conversation = _visible(request, conversation_id)
    window = _window(request, conversation)
    return render(request, "conversations/detail.html", {
        "conversation": conversation,
        "turns": window.views,
        "window": window,
        "rerun_of": _rerun_of(conversation),
        "forked_from": _forked_from(request, conversation),
        "last_seq": conversation.next_seq - 1,
        "owned": conversation.owner_id == request.user.pk,
        "discard_when_done": discard.marked(conversation.pk),
    })


@login_required
@require_GET
def turn_window_fragment(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """``GET /c/<id>/turns/?from=K&to=S``: the turns from K up to (not including) S, and the
    "Earlier turns" control before them when there are more; what the page's script inserts
    when "Earlier turns" is activated."""
    conversation = _visible(request, conversation_id)
    window = _window(request, conversation, end=_index_param(request, "to"))
    return render(request, "conversations/_window.html", {
        "conversation": conversation, "turns": window.views, "window": window,
    })


@login_required
@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    """The list's "New conversation": an empty one, then its composer."""
    conversation = new_conversation(request.user, request.POST.get("title", "").strip())
    return redirect(reverse("conversation-detail", args=[conversation.pk]) + "#composer")


@login_required
@require_GET
def turn_compare(request: HttpRequest, conversation_id: str, index: int) -> HttpResponse:
    """An agent turn and its re-runs side by side, with the sources each cited or consulted."""
    conversation = _visible(request, conversation_id)
    if not conversation.turns.filter(index=index, role="agent").exists():
        raise Http404("no such agent turn")
    comparison = compare.compare(conversation, index, request.user)
    views = [reading.turn_views(a.conversation, [a.turn])[0] for a in comparison.answers]
    return render(request, "conversations/compare.html", {
        "conversation": conversation, "comparison": comparison,
        "columns": list(zip(comparison.answers, views, strict=True)),
        "both": len(comparison.answers) == 2,
    })


def _forked_from(request: HttpRequest, conversation: Conversation) -> Conversation | None:
    """The conversation this one was forked from, when the reader may open it (named and
    linked on the page; otherwise the page only says there is one)."""
    if conversation.forked_from_id is None:
        return None
    return Conversation.objects.visible_to(request.user).filter(
        pk=conversation.forked_from_id).only("pk", "title").first()


def _rerun_of(conversation: Conversation) -> int | None:
    """The agent turn this conversation re-runs, when it is a re-run (for its Compare link)."""
    if conversation.forked_from_id is None or conversation.forked_at_turn is None:
        return None
    index = conversation.forked_at_turn + 1
    return index if conversation.turns.filter(index=index, role="agent").exists() else None


@login_required
@require_GET
def turn_fragment(request: HttpRequest, conversation_id: str, index: int) -> HttpResponse:
    conversation = _visible(request, conversation_id)
    turn = conversation.turns.filter(index=index).first()
    if turn is None:
        raise Http404("no such turn")
    [view] = reading.turn_views(conversation, [turn])
    return HttpResponse(view.html)


@login_required
@require_GET
def turn_markdown(request: HttpRequest, conversation_id: str, index: int) -> HttpResponse:
    """``GET /c/<id>/turns/<index>/markdown``: the turn as the Markdown export writes it
    (citations as footnotes), for the page's "Copy answer"."""
    conversation = _visible(request, conversation_id)
    turn = conversation.turns.filter(index=index).first()
    if turn is None:
        raise Http404("no such turn")
    return HttpResponse(reading.answer_markdown(conversation, turn),
                        content_type="text/markdown; charset=utf-8")


PAYLOAD_PREVIEW_CHARS = 64 * 1024  # a larger payload shows its head; the native export has all


@login_required
@require_GET
def turn_payloads(request: HttpRequest, conversation_id: str, index: int) -> HttpResponse:
    """``GET /c/<id>/turns/<index>/payloads/``: the native provider payloads of one turn's
    events, for its owner (and staff): each collapsed, shown as escaped JSON text (never
    interpreted), a large one as its first 64 KB."""
    from django.db.models.functions import Substr

    from conversations.payload_text import human_size, pretty_json, pretty_json_prefix

    conversation = _visible(request, conversation_id)
    if conversation.owner_id != request.user.pk and not request.user.is_staff:
        raise PermissionDenied("only its owner sees a conversation's payloads")
    turn = get_object_or_404(conversation.turns, index=index)
    events = (Event.objects.filter(turn=turn, payload__isnull=False).order_by("seq")
              .select_related(None).values("pk", "seq", "kind", "payload__provider",
                                           "payload__format", "payload__version",
                                           "payload__size")
              .annotate(head=Substr("payload__value", 1, PAYLOAD_PREVIEW_CHARS + 1)))
    shown = []
    for event in events:
        head, size = event["head"] or "", event["payload__size"]
        cut = len(head) > PAYLOAD_PREVIEW_CHARS
        shown.append({**event, "size_text": human_size(size), "cut": cut,
                      "text": pretty_json_prefix(head[:PAYLOAD_PREVIEW_CHARS]) if cut
                      else pretty_json(head)})
    return render(request, "conversations/payloads.html", {
        "conversation": conversation, "turn": turn, "events": shown,
        "preview": human_size(PAYLOAD_PREVIEW_CHARS),
    })


@login_required
@require_GET
def conversation_find(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """``GET /c/<id>/find/?q=``: the messages of every turn holding the text (the page shows
    a window of turns, so the browser's own find misses the rest). JSON for the page's
    script; a page of links without it."""
    conversation = _visible(request, conversation_id)
    query = request.GET.get("q", "")[:200]
    try:
        found, more = reading.find_in_conversation(conversation, query)
    except reading.InvalidFilter as exc:
        return JsonResponse({"detail": f"Bad search: {exc}."}, status=400)
    page = reverse("conversation-detail", args=[conversation.pk])
    links = [f"{page}?{urlencode({'turn': str(f.turn_id), 'find': query.strip()})}"
             f"#turn-{f.turn_id}" for f in found]
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"query": query.strip(), "more": more, "results": [
            {"index": f.index, "turn": str(f.turn_id), "role": f.role, "before": f.before,
             "match": f.match, "after": f.after, "url": url}
            for f, url in zip(found, links, strict=True)]})
    return render(request, "conversations/find.html", {
        "conversation": conversation, "query": query.strip(), "more": more,
        "results": list(zip(found, links, strict=True)),
    })


@login_required
@require_GET
@xframe_options_sameorigin
@csp(ENTRY_POINT_POLICY)
def search_entry_point(request: HttpRequest, conversation_id: str, event_id: str) -> HttpResponse:
    """Google's search suggestions (``searchEntryPoint.renderedContent``, sanitized) as their own
    document, for the page's ``<iframe sandbox src>``: with a policy of their own (their styles
    inline, nothing fetched, no script). A ``srcdoc`` iframe would inherit the page's policy,
    fixed when the page loaded, and a chip in a turn the live view or "Earlier turns" added
    later would lose its styles."""
    conversation = _visible(request, conversation_id)
    event = get_object_or_404(Event, pk=event_id, conversation=conversation,
                              kind="provider_artifact")
    body = event.typed_body
    display = body.display_html if isinstance(body, ArtifactBody) else None
    if not display or not display.strip():
        raise Http404("nothing to display")
    response = HttpResponse(search_entry_point_document(display))
    response["Cache-Control"] = "private, max-age=3600"  # an event never changes
    response["Referrer-Policy"] = "no-referrer"
    return response


# -- bring your own conversations, rename, delete ------------------------------------------------


def _owned(request: HttpRequest, conversation_id: Any) -> Conversation:
    """A conversation of the user's own (staff manage other people's in the admin)."""
    conversation = _visible(request, conversation_id)
    if conversation.owner_id != request.user.pk:
        raise PermissionDenied("only its owner can rename or delete a conversation")
    return conversation


@csrf_exempt  # checked below, once the per-file limits sit in front of the body reader
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """``POST /upload/``: files in, conversations out. With ``Accept: application/x-ndjson``
    (the page's script) the results stream as JSON lines, one per conversation or problem, with
    progress between them; a plain form post gets a result page."""
    try:
        upload_limits.check_length(request.META)
        upload_limits.install(request)
        return _upload(request)
    except upload_limits.TooLarge as exc:
        return JsonResponse({"detail": f"Too large: {exc}."}, status=413)


@csrf_protect
def _upload(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "Log in to upload."}, status=403)
    files = upload_limits.request_files(request.FILES)
    fmt = request.POST.get("format") or "auto"
    if fmt not in uploads.FORMATS:
        return JsonResponse({"detail": f"Unknown format {fmt!r}."}, status=400)
    grouping = request.POST.get("recordings") or "auto"
    if grouping not in uploads.RECORDINGS:
        return JsonResponse({"detail": f"Unknown grouping of recordings {grouping!r}."},
                            status=400)
    if not files:
        return JsonResponse({"detail": "No file was uploaded."}, status=400)
    copy = request.POST.get("copy") in ("1", "on", "true")
    results = import_files(files, owner=request.user, format=fmt, recordings=grouping,
                                  copy=copy)
    if "application/x-ndjson" in request.headers.get("Accept", ""):
        return streaming_response(request, uploads.result_lines(results, files, _url),
                                  "application/x-ndjson")
    reports = [uploads.report(r, _url) for r in results if not isinstance(r, uploads.Progress)]
    return render(request, "conversations/upload_results.html", {
        "files": [f.name for f in files], "reports": reports,
        "imported": sum(r["type"] == "conversation" for r in reports),
        "already": sum(r["type"] == "already_imported" for r in reports),
    })


def _url(conversation: Conversation) -> str:
    return reverse("conversation-detail", args=[conversation.pk])


@login_required
@require_POST
def conversation_rename(request: HttpRequest, conversation_id: str) -> HttpResponse:
    conversation = _owned(request, conversation_id)
    title = request.POST.get("title", "").strip()
    if "\x00" in title or len(title) > 300:
        messages.error(request, "A title is at most 300 characters.")
    else:
        rename_conversation(conversation, title)
        messages.success(request, "Renamed.")
    return redirect("conversation-detail", conversation.pk)


@login_required
@require_POST
def conversation_keep(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """Keep a live replay that was started "discard when done"."""
    conversation = _owned(request, conversation_id)
    discard.unmark(conversation.pk)
    messages.success(request, "This replay will be kept.")
    return redirect("conversation-detail", conversation.pk)


@login_required
@require_http_methods(["GET", "POST"])
def conversation_delete(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """``GET``: the confirmation page; ``POST``: delete it."""
    conversation = _owned(request, conversation_id)
    if request.method == "POST":
        return _delete(request, [conversation])
    return render(request, "conversations/delete.html", {"conversations": [conversation]})


@login_required
@require_POST
def conversation_bulk_delete(request: HttpRequest) -> HttpResponse:
    """The list's selection: a confirmation page first, then (``confirm``) delete them all."""
    ids = request.POST.getlist("ids")[:500]
    try:
        chosen = list(Conversation.objects.filter(owner=request.user, pk__in=ids))
    except ValidationError:
        chosen = []
    if not chosen:
        messages.error(request, "Select the conversations to delete first.")
        return redirect("conversation-list")
    if request.POST.get("confirm") != "yes":
        return render(request, "conversations/delete.html", {"conversations": chosen,
                                                              "bulk": True})
    return _delete(request, chosen)


def _delete(request: HttpRequest, conversations: list[Conversation]) -> HttpResponse:
    deleted, busy = 0, []
    for conversation in conversations:
        try:
            delete_conversation(conversation)
            deleted += 1
        except store.ConversationBusy:
            busy.append(conversation.title or str(conversation.pk))
        except Conversation.DoesNotExist:
            pass  # deleted meanwhile
    if deleted:
        messages.success(request, f"Deleted {deleted} conversation{pluralize(deleted)}.")
    if busy:
        messages.error(request, f"Not deleted while a turn is streaming: {', '.join(busy)}.")
    return redirect("conversation-list")
