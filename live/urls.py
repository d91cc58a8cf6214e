"""Live endpoints, mounted at the site root: ``path("", include("live.urls"))``."""

from django.urls import path

from live import views

urlpatterns = [
    path("c/<uuid:conversation_id>/state/", views.state_view, name="live-state"),
    path("c/<uuid:conversation_id>/replay/", views.live_replay_view, name="live-replay"),
    path("c/<uuid:conversation_id>/send/", views.send_view, name="live-send"),
    path("c/<uuid:conversation_id>/stop/", views.stop_view, name="live-stop"),
    path("c/<uuid:conversation_id>/turns/<int:index>/fork/", views.fork_view, name="live-fork"),
    path("c/<uuid:conversation_id>/turns/<int:index>/rerun/", views.rerun_view,
         name="live-rerun"),
    path("staff/capture/", views.capture_status_view, name="capture-status"),
]
