"""REST API routes (DRF), mounted under /api/v1/. No trailing slashes."""

from django.contrib.auth.decorators import login_required
from django.urls import path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated

from api import forks, imports, live_turns, shares, sources, views

urlpatterns = [
    path("capabilities", views.CapabilitiesView.as_view(), name="api-capabilities"),
    path("conversations", views.ConversationListView.as_view(), name="api-conversation-list"),
    path("conversations/import", imports.ImportView.as_view(), name="api-conversation-import"),
    path("conversations/ingest", imports.IngestView.as_view(), name="api-conversation-ingest"),
    path("conversations/<uuid:id>", views.ConversationDetailView.as_view(),
         name="api-conversation-detail"),
    # GET the turns, POST the next one live; re-run and stop a live turn (api.live_turns).
    path("conversations/<uuid:id>/turns", live_turns.TurnsView.as_view(),
         name="api-conversation-turns"),
    path("conversations/<uuid:id>/turns/<int:index>/rerun", live_turns.RerunView.as_view(),
         name="api-turn-rerun"),
    path("conversations/<uuid:id>/turns/<int:index>/stop", live_turns.StopView.as_view(),
         name="api-turn-stop"),
    path("conversations/<uuid:id>/events", views.ConversationEventsView.as_view(),
         name="api-conversation-events"),
    path("conversations/<uuid:id>/export", views.ConversationExportView.as_view(),
         name="api-conversation-export"),
    path("conversations/<uuid:id>/ingest", imports.ConversationIngestView.as_view(),
         name="api-conversation-ingest-turn"),
    path("conversations/<uuid:id>/fork", forks.ForkView.as_view(), name="api-conversation-fork"),
    path("conversations/<uuid:id>/turns/<int:index>/fork", forks.TurnForkView.as_view(),
         name="api-turn-fork"),
    path("conversations/<uuid:id>/shares", shares.ConversationSharesView.as_view(),
         name="api-conversation-shares"),
    path("shares", shares.ShareListView.as_view(), name="api-share-list"),
    path("sources", sources.SourcesView.as_view(), name="api-sources"),
    path("sources/models", sources.SourceModelsView.as_view(), name="api-source-models"),
    path("shares/<str:token>", shares.ShareDetailView.as_view(), name="api-share-detail"),
    # The OpenAPI schema and its docs UI (Swagger UI from drf-spectacular-sidecar, no CDN; the
    # split view serves its init script as a separate file, so the strict CSP holds).
    path("schema", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
         name="api-schema"),
    # The docs live at "docs"; "docs/" (an address people type) is not a 404.
    path("docs/", login_required(RedirectView.as_view(pattern_name="api-docs",
                                                      permanent=False)), name="api-docs-slash"),
    path("docs", login_required(SpectacularSwaggerSplitView.as_view(
        url_name="api-schema", template_name="api/swagger_ui.html",
        permission_classes=[IsAuthenticated],
    )), name="api-docs"),
]
