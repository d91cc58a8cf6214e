"""HTTP side of live turns: the resync document and the replay button."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from conversations import discard, ratelimit
from conversations.models import Conversation
from live import runner, state


def owned_conversation(user: Any, conversation_id: Any) -> Conversation:
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or not (user.is_staff or conversation.owner_id == user.pk):
        raise Http404("no such conversation")  # the same answer for "not yours"
    return conversation


def conversation_url(conversation: Conversation) -> str:
    return reverse("conversation-detail", args=[conversation.pk])


@never_cache
@require_GET
@login_required
def state_view(request: HttpRequest, conversation_id: Any) -> HttpResponse:
    """``GET /c/<id>/state/?after=<seq>``: last seq, every turn's status, streaming tails."""
    conversation = owned_conversation(request.user, conversation_id)
    try:
        after = max(0, int(request.GET.get("after", "0")))
    except ValueError:
        return JsonResponse({"error": "after must be an integer"}, status=400)
    return JsonResponse(state.conversation_state(conversation, after))


@require_POST
async def replay_view(request: HttpRequest, conversation_id: Any) -> HttpResponse:
    """``POST /c/<id>/replay/``: replay this conversation live into a new one, go there.

    The replay runs as a task on the server's event loop (this view is async for that)."""
    user = await request.auser()
    if not user.is_authenticated:
        from django.contrib.auth.views import redirect_to_login

        return redirect_to_login(request.get_full_path())
    source = await sync_to_async(owned_conversation)(user, conversation_id)
    # A replay costs a task on the server's loop for minutes: a user starts only so many.
    rate = str(getattr(settings, "TURNSCOPE_REPLAY_RATE", "10/min"))
    if not await sync_to_async(ratelimit.allow)("replay", str(user.pk), rate):
        return HttpResponse(
            f"Too many live replays started (the limit is {rate}). Try again shortly.",
            status=429, content_type="text/plain; charset=utf-8")
    try:
        speed = float(request.POST.get("speed", "1") or 1)
    except ValueError:
        speed = 1.0
    speed = min(max(speed, 0.1), 100.0)
    target = await sync_to_async(runner.create_replay_target)(source, user)
    if request.POST.get("discard"):
        await sync_to_async(discard.mark)(target.pk)
    runner.spawn(_replay(source, target, speed), name=f"replay-{target.pk}")
    return HttpResponseRedirect(conversation_url(target))


async def _replay(source: Conversation, target: Conversation, speed: float) -> None:
    """The replay, then, if it was started "discard when done" (and nobody chose to keep it),
    the replay conversation is deleted."""
    try:
        await runner.replay(source, target, speed=speed)
    finally:
        await sync_to_async(discard.discard_if_marked)(target)
