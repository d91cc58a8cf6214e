"""Browser pages."""

from django.urls import path

from conversations import share_views, source_views, views

urlpatterns = [
    path("", views.conversation_list, name="conversation-list"),
    path("upload/", views.upload, name="conversation-upload"),
    path("new/", views.conversation_new, name="conversation-new"),
    path("delete/", views.conversation_bulk_delete, name="conversation-bulk-delete"),
    path("c/<uuid:conversation_id>/", views.conversation_detail, name="conversation-detail"),
    path("c/<uuid:conversation_id>/rename/", views.conversation_rename,
         name="conversation-rename"),
    path("c/<uuid:conversation_id>/keep/", views.conversation_keep, name="conversation-keep"),
    path("c/<uuid:conversation_id>/delete/", views.conversation_delete,
         name="conversation-delete"),
    path("c/<uuid:conversation_id>/turns/", views.turn_window_fragment,
         name="turn-window"),
    path("c/<uuid:conversation_id>/turns/<int:index>/", views.turn_fragment,
         name="turn-fragment"),
    path("c/<uuid:conversation_id>/events/<uuid:event_id>/search-entry-point/",
         views.search_entry_point, name="search-entry-point"),
    path("c/<uuid:conversation_id>/turns/<int:index>/markdown/", views.turn_markdown,
         name="turn-markdown"),
    path("c/<uuid:conversation_id>/turns/<int:index>/payloads/", views.turn_payloads,
         name="turn-payloads"),
    path("c/<uuid:conversation_id>/find/", views.conversation_find, name="conversation-find"),
    path("c/<uuid:conversation_id>/turns/<int:index>/compare/", views.turn_compare,
         name="turn-compare"),
    path("c/<uuid:conversation_id>/shares/", share_views.share_create, name="share-create"),
    path("shares/", share_views.share_list, name="share-list"),
    path("sources/", source_views.sources, name="sources"),
    path("sources/hosts/", source_views.sources, {"group": "host"}, name="sources-hosts"),
    path("sources/urls/", source_views.sources, {"group": "url"}, name="sources-urls"),
    path("sources/turns/", source_views.source_turns, name="sources-turns"),
    path("sources/models/", source_views.models, name="sources-models"),
    path("shares/<uuid:share_id>/update/", share_views.share_update, name="share-update"),
    path("shares/<uuid:share_id>/revoke/", share_views.share_revoke, name="share-revoke"),
    # Anyone with the link: the token is the only key (conversations.sharing).
    path("s/<str:token>/", share_views.share_page, name="share-page"),
    path("s/<str:token>/turns/", share_views.share_window, name="share-window"),
    path("s/<str:token>/export/", share_views.share_export, name="share-export"),
    path("s/<str:token>/events/<uuid:event_id>/search-entry-point/",
         share_views.share_entry_point, name="share-entry-point"),
]
