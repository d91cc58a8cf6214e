"""Data migrations: rows stored before a derived column existed get it, as the store derives it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("conversations", "0004_uuid7_ids")]
AFTER = [("conversations", "0005_event_activity_name")]


@pytest.mark.django_db(transaction=True)
def test_0005_derives_the_activity_name_of_stored_events():
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        conversation = apps.get_model("conversations", "Conversation").objects.create()
        turn = apps.get_model("conversations", "Turn").objects.create(
            conversation=conversation, index=0, role="agent")
        Event = apps.get_model("conversations", "Event")
        bodies = ['{"activity":{"id":"s1","name":"web_search","state":"started","input":{},'
                  '"summary":""}}', '{"activity":{"id":"f1","name":"web_fetch","state":"failed",'
                  '"input":{},"summary":"","sources":[],"error_code":"x"}}', "{}"]
        for seq, (kind, body) in enumerate(zip(
                ["hosted_activity", "hosted_activity", "message"], bodies, strict=True), 1):
            Event.objects.create(conversation=conversation, turn=turn, seq=seq, kind=kind,
                                 body=body)
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        Event = executor.loader.project_state(AFTER).apps.get_model("conversations", "Event")
        assert list(Event.objects.order_by("seq").values_list("activity_name", flat=True)) == [
            "web_search", "web_fetch", ""]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
