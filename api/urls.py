"""REST API routes (DRF), mounted under /api/v1/."""

urlpatterns: list = []
