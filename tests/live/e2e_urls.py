"""URLs for the end-to-end servers: the project's, the live endpoints, test-only controls, and
minimal pages that follow the page contract when the real pages are not routed yet."""

from __future__ import annotations

import uuid

from django.http import Http404, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.urls import Resolver404, include, path, resolve
from django.utils.html import escape
from django.views.decorators.csrf import csrf_exempt

from conversations import streaming
from conversations.models import Conversation
from live import bundled, runner, tasks
from turnscope.urls import urlpatterns as project_urlpatterns


def _project_has_pages() -> bool:
    probe = f"/c/{uuid.uuid4()}/turns/0/"
    try:
        resolve(probe, urlconf="turnscope.urls")
    except Resolver404:
        return False
    return True


async def run_sample(request, conversation_id, slug):
    """Start a sample turn in THIS process (the scale-out test runs it on process B)."""
    conversation = await Conversation.objects.aget(pk=conversation_id)
    sample = bundled.sample(slug)
    speed = float(request.GET.get("speed", "4"))
    coalesce = float(request.GET.get("coalesce", "0.05"))
    tasks.spawn(runner.run_recording(conversation, sample.provider, list(sample.responses),
                                      prompt=request.GET.get("prompt", ""), speed=speed,
                                      coalesce=coalesce), name=f"e2e-{slug}")
    return JsonResponse({"started": slug}, status=202)


def stored_text(request, conversation_id):
    conversation = Conversation.objects.get(pk=conversation_id)
    turns = []
    for turn in conversation.turns.order_by("index"):
        turns.append({"id": str(turn.pk), "status": turn.status, "texts": [
            e.text for e in turn.events.order_by("seq") if e.kind in ("message", "reasoning")
        ]})
    return JsonResponse({"turns": turns})


# -- stand-in pages: the page contract in its simplest markup -------------------------------


def _turn_html(turn) -> str:
    events = "".join(
        f'<div class="event" data-seq="{e.seq}">{escape(e.text)}</div>'
        for e in turn.events.order_by("seq") if e.text
    )
    tail = ""
    if turn.status == "streaming":
        t = streaming.current_tail(turn.pk) or {"text": "", "delta_seq": 0}
        tail = (f'<div class="streaming-tail" data-delta-seq="{t["delta_seq"]}">'
                f'{escape(t["text"])}</div>')
    model = f'<span class="model">{escape(turn.model)}</span>' if turn.model else ""
    return (f'<section class="turn" id="turn-{turn.pk}" data-turn-id="{turn.pk}" '
            f'data-index="{turn.index}" data-status="{turn.status}">{model}{events}{tail}'
            f"</section>")


def _owned(request, conversation_id):
    conversation = Conversation.objects.filter(pk=conversation_id, owner=request.user).first()
    if conversation is None or not request.user.is_authenticated:
        raise Http404
    return conversation


def stub_page(request, conversation_id):
    conversation = _owned(request, conversation_id)
    turns = "".join(_turn_html(t) for t in conversation.turns.order_by("index"))
    form = (f'<form method="post" action="/c/{conversation.pk}/replay/">'
            f'<input type="hidden" name="csrfmiddlewaretoken" value="{get_token(request)}">'
            f'<input type="hidden" name="speed" value="4"><button>Replay</button></form>')
    return HttpResponse(
        f'<!doctype html><html><head><meta charset="utf-8"><title>t</title></head><body>'
        f'<main id="conversation" data-conversation-id="{conversation.pk}" '
        f'data-ws-path="/ws/conversations/{conversation.pk}/" '
        f'data-last-seq="{conversation.next_seq - 1}">{form}{turns}</main>'
        f'<script src="/static/live.js"></script></body></html>'
    )


def stub_fragment(request, conversation_id, index):
    conversation = _owned(request, conversation_id)
    turn = conversation.turns.filter(index=index).first()
    if turn is None:
        raise Http404
    return HttpResponse(_turn_html(turn))


urlpatterns = [
    path("", include("live.urls")),
    path("_e2e/run/<uuid:conversation_id>/<slug:slug>/", csrf_exempt(run_sample)),
    path("_e2e/text/<uuid:conversation_id>/", stored_text),
]
if not _project_has_pages():
    urlpatterns += [
        path("c/<uuid:conversation_id>/", stub_page),
        path("c/<uuid:conversation_id>/turns/<int:index>/", stub_fragment),
    ]
urlpatterns += project_urlpatterns
