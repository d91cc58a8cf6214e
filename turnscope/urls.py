from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from turnscope import auth, security
from turnscope.views import favicon

urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("api.urls")),
    path("csp-report/", security.csp_report, name="csp-report"),
    path("", include("conversations.urls")),
    path("", include("live.urls")),
]
