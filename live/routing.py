"""Websocket routes."""

from django.urls import path

from live.consumers import LiveConsumer

websocket_urlpatterns: list = [
    path("ws/conversations/<uuid:conversation_id>/", LiveConsumer.as_asgi()),
]
