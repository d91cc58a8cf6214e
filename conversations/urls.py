"""Browser pages."""

from django.urls import path

from conversations import views

urlpatterns = [
    path("", views.conversation_list, name="conversation-list"),
    path("c/<uuid:conversation_id>/", views.conversation_detail, name="conversation-detail"),
    path("c/<uuid:conversation_id>/turns/<int:index>/", views.turn_fragment,
         name="turn-fragment"),
]
