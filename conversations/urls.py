"""Browser pages."""

urlpatterns: list = []
