"""HTTP side of live turns: the resync document, the Replay live button, and the live calls' browser
side (the composer's Send and Stop, Fork here, Re-run with…): thin, the work is ``live.calls``."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conversations import compare, discard
from conversations.actions.create import announce_created
from conversations.models import Conversation, Turn
from guards import ratelimit
from live import calls, live_replay, state, tasks


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
async def live_replay_view(request: HttpRequest, conversation_id: Any) -> HttpResponse:
    """``POST /c/<id>/replay/``: a live replay of this conversation into a new one, go there.

    The live replay runs as a task on the server's event loop (this view is async for that)."""
    user = await request.auser()
    if not user.is_authenticated:
        from django.contrib.auth.views import redirect_to_login

        return redirect_to_login(request.get_full_path())
    source = await sync_to_async(owned_conversation)(user, conversation_id)
    # A live replay costs a task on the server's loop for minutes: a user starts only so many.
    rate = str(getattr(settings, "TURNSCOPE_REPLAY_RATE", "10/min"))
    if not await sync_to_async(ratelimit.allow)(cache, "replay", str(user.pk), rate):
        return HttpResponse(
            f"Too many live replays started (the limit is {rate}). Try again shortly.",
            status=429, content_type="text/plain; charset=utf-8")
    try:
        speed = float(request.POST.get("speed", "1") or 1)
    except ValueError:
        speed = 1.0
    speed = min(max(speed, 0.1), 100.0)
    target = await sync_to_async(live_replay.create_live_replay_target)(source, user)
    await sync_to_async(announce_created)(target)
    if request.POST.get("discard"):
        await sync_to_async(discard.mark)(target.pk)
    tasks.spawn(_live_replay(source, target, speed), name=f"replay-{target.pk}")
    return HttpResponseRedirect(conversation_url(target))


async def _live_replay(source: Conversation, target: Conversation, speed: float) -> None:
    """The live replay, then, if it was started "discard when done" (and nobody chose to keep
    it), its conversation is deleted."""
    try:
        await live_replay.live_replay(source, target, speed=speed)
    finally:
        await sync_to_async(discard.discard_if_marked)(target)


# -- live calls: the composer, Stop, Fork here, Re-run with… ---------------------------------


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _owned_only(user: Any, conversation_id: Any) -> Conversation:
    conversation = owned_conversation(user, conversation_id)
    if conversation.owner_id != user.pk:
        raise PermissionDenied("Only the owner of a conversation can add turns to it.")
    return conversation


async def _user_or_login(request: HttpRequest) -> Any:
    user = await request.auser()
    return user if user.is_authenticated else None


def _login(request: HttpRequest) -> HttpResponse:
    from django.contrib.auth.views import redirect_to_login

    return redirect_to_login(request.get_full_path())


def _ask(post: Any, prompt: str = "") -> calls.Ask:
    return calls.Ask(provider=str(post.get("provider", "")), model=str(post.get("model", "")),
                     prompt=prompt, web_search=bool(post.get("web_search")))


def _started(request: HttpRequest, live: calls.LiveTurn) -> HttpResponse:
    url = conversation_url(live.conversation)
    if _wants_json(request):
        return JsonResponse({"conversation": str(live.conversation.pk), "url": url,
                             "turn": {"id": str(live.turn.pk), "index": live.turn.index},
                             "recorded": live.recorded}, status=202)
    return HttpResponseRedirect(url)


def _refused(request: HttpRequest, conversation_id: Any, exc: calls.CallError,
             back: str = "") -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"detail": str(exc)}, status=exc.status)
    messages.error(request, str(exc))
    return HttpResponseRedirect(back or reverse("conversation-detail", args=[conversation_id]))


@require_POST
async def send_view(request: HttpRequest, conversation_id: Any) -> HttpResponse:
    """``POST /c/<id>/send/``: the composer's Send (the same action as the API's)."""
    user = await _user_or_login(request)
    if user is None:
        return _login(request)
    conversation = await sync_to_async(_owned_only)(user, conversation_id)
    prompt = request.POST.get("prompt", "")
    if not prompt.strip():
        return _refused(request, conversation_id, calls.CallError("Type a prompt first."))
    try:
        live = await calls.start_turn(conversation, _ask(request.POST, prompt))
    except calls.CallError as exc:
        return _refused(request, conversation_id, exc)
    return _started(request, live)


@require_POST
async def stop_view(request: HttpRequest, conversation_id: Any) -> HttpResponse:
    """``POST /c/<id>/stop/``: the composer's Stop: the streaming turn ends interrupted."""
    user = await _user_or_login(request)
    if user is None:
        return _login(request)
    conversation = await sync_to_async(_owned_only)(user, conversation_id)
    turn = await calls.stop(conversation)
    if _wants_json(request):
        if turn is None:
            return JsonResponse({"detail": "No turn is streaming."}, status=404)
        return JsonResponse({"turn": {"id": str(turn.pk), "index": turn.index}}, status=202)
    return HttpResponseRedirect(conversation_url(conversation))


def _agent_turn(conversation: Conversation, index: int) -> Turn:
    turn = conversation.turns.filter(index=index).first()
    if turn is None or turn.role != Turn.Role.AGENT:
        raise Http404("no such agent turn")
    return turn


@login_required
@require_http_methods(["GET", "POST"])
def fork_view(request: HttpRequest, conversation_id: Any, index: int) -> HttpResponse:
    """``/c/<id>/turns/<index>/fork/``: Fork here (GET: the form; POST: fork, then the new
    conversation's composer)."""
    conversation = owned_conversation(request.user, conversation_id)
    turn = _agent_turn(conversation, index)
    if request.method == "POST":
        title = request.POST.get("title", "").strip()[:300] or None
        try:
            forked = calls.fork_at(conversation, index, request.user, title)
        except calls.CallError as exc:
            return _refused(request, conversation_id, exc)
        return HttpResponseRedirect(conversation_url(forked) + "#composer")
    return render(request, "live/fork.html", {"conversation": conversation, "turn": turn})


@require_http_methods(["GET", "POST"])
async def rerun_view(request: HttpRequest, conversation_id: Any, index: int) -> HttpResponse:
    """``/c/<id>/turns/<index>/rerun/``: Re-run with… (GET: choose who answers; POST: the new
    branch, streaming)."""
    user = await _user_or_login(request)
    if user is None:
        return _login(request)
    conversation = await sync_to_async(owned_conversation)(user, conversation_id)
    turn = await sync_to_async(_agent_turn)(conversation, index)
    if request.method == "POST":
        if conversation.owner_id != user.pk:
            raise PermissionDenied("Only the owner of a conversation can re-run its turns.")
        try:
            live = await calls.rerun(conversation, index, user, _ask(request.POST))
        except calls.CallError as exc:
            return _refused(request, conversation_id, exc, back=request.get_full_path())
        return _started(request, live)
    reruns = await sync_to_async(compare.reruns)(conversation, index)
    return await sync_to_async(render)(request, "live/rerun.html", {
        "conversation": conversation, "turn": turn, "reruns": reruns,
        "composer": calls.composer(exclude=turn.provider)})


@never_cache
@require_GET
def capture_status_view(request: HttpRequest) -> HttpResponse:
    """``GET /staff/capture/`` (staff only): how far behind recording is — what
    ``manage.py capture_status`` prints — as a page, or JSON with ``Accept: application/json``."""
    from django.contrib.admin.views.decorators import staff_member_required

    @staff_member_required
    def view(request: HttpRequest) -> HttpResponse:
        from live import capture

        log = capture.get_log()
        lag = log.lag()
        if _wants_json(request):
            return JsonResponse({"waiting": lag.count, "bytes": lag.bytes,
                                 "oldest_seconds": round(lag.seconds, 1),
                                 "by_state": lag.by_state})
        return render(request, "live/capture_status.html", {
            "lag": lag, "waiting": log.pending(limit=50), "path": log.path})

    return view(request)
