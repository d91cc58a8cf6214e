"""The API's routes, with the live-call endpoints composed in.

``live`` and ``api`` are independent layers (neither imports the other), so the endpoints that
need both — starting a live turn on the API's conversation views, re-running and stopping one —
are put together here, in the layer that composes the apps: ``live.api``'s actions on
``api.views``' base (JSON only, who may see what, throttles).
"""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, URLResolver, path

from api import urls as api_urls
from api.permissions import CanSeeConversation, OwnsConversation
from api.throttling import WriteThrottled
from api.views import ApiView, ConversationTurnsView
from live.api import RerunMixin, StartTurnMixin, StopMixin


class _Writes(WriteThrottled):
    """A POST is the conversation owner's only (``OwnsConversation``, as the API's own writes),
    under the write throttle."""

    def get_permissions(self) -> list[Any]:
        if self.request.method == "POST":  # type: ignore[attr-defined]
            return [OwnsConversation()]
        return list(super().get_permissions())  # type: ignore[misc]


class TurnsView(_Writes, StartTurnMixin, ConversationTurnsView):
    """``GET``: the conversation's turns; ``POST``: the next turn, live."""

    permission_classes = [CanSeeConversation]


class RerunView(_Writes, RerunMixin, ApiView):
    permission_classes = [CanSeeConversation]


class StopView(_Writes, StopMixin, ApiView):
    permission_classes = [CanSeeConversation]


def _routes() -> list[URLPattern | URLResolver]:
    out: list[URLPattern | URLResolver] = []
    for pattern in api_urls.urlpatterns:
        if getattr(pattern, "name", None) == "api-conversation-turns":
            out.append(path("conversations/<uuid:id>/turns", TurnsView.as_view(),
                            name="api-conversation-turns"))
            out.append(path("conversations/<uuid:id>/turns/<int:index>/rerun",
                            RerunView.as_view(), name="api-turn-rerun"))
            out.append(path("conversations/<uuid:id>/turns/<int:index>/stop",
                            StopView.as_view(), name="api-turn-stop"))
        else:
            out.append(pattern)
    return out


urlpatterns = _routes()
