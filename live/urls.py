"""Live endpoints, mounted at the site root: ``path("", include("live.urls"))``."""

from django.urls import path

from live import views

urlpatterns = [
    path("c/<uuid:conversation_id>/state/", views.state_view, name="live-state"),
    path("c/<uuid:conversation_id>/replay/", views.replay_view, name="live-replay"),
]
