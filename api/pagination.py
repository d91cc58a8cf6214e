"""Cursor pagination with a capped page size."""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class ConversationCursorPagination(CursorPagination):
    # Creation time never changes, so a cursor stays valid while conversations get new turns.
    ordering = ("-created_at", "-id")
    page_size = 25
    page_size_query_param = "page_size"
    max_page_size = 100


class EventCursorPagination(CursorPagination):
    ordering = "seq"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 500
