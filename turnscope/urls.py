from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from turnscope import auth

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("api.urls")),
    path("", include("conversations.urls")),
    path("", include("live.urls")),
]
