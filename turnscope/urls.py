from functools import cache

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.decorators.http import require_safe

from turnscope import auth, security


@cache
def _favicon_bytes() -> bytes:
    return (settings.BASE_DIR / "static" / "favicon.svg").read_bytes()


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for whatever the page links: the app's own icon."""
    response = HttpResponse(_favicon_bytes(), content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("turnscope.api_routes")),
    path("csp-report/", security.csp_report, name="csp-report"),
    path("", include("conversations.urls")),
    path("", include("live.urls")),
]
