"""Websocket routes."""

from django.urls import path

from live.consumers import ListConsumer, LiveConsumer

websocket_urlpatterns: list = [
    path("ws/conversations/<uuid:conversation_id>/", LiveConsumer.as_asgi()),
    path("ws/conversations/", ListConsumer.as_asgi()),
]
