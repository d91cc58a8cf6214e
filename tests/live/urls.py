"""The project's URLs with the live endpoints mounted (as turnscope.urls will have them)."""

from django.urls import include, path

from turnscope.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("", include("live.urls")), *project_urlpatterns]
