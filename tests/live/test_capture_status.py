"""How far behind recording is, where staff and owners look: ``manage.py capture_status``, the
staff page ``/staff/capture/`` and the conversation's page."""

from __future__ import annotations

import asyncio
import io
import time
import uuid

import pytest
from django.core.management import call_command

from conversations import store
from live import capture
from tests.support import add_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def log_(tmp_path, settings):
    settings.TURNSCOPE_CAPTURE_PATH = str(tmp_path / "capture.sqlite3")
    return capture.get_log()


def _waiting(log_: capture.CaptureLog, conversation_id: str | None, age: float = 10.0) -> str:
    async def go() -> str:
        xid = await log_.open("proxy", {"user": 1, "provider": "anthropic",
                                        "path": "/v1/messages", "conversation": conversation_id},
                              b"{}", instance="p-gone")
        await log_.append(xid, 0, b"event: ping\n\n")
        return xid

    xid = asyncio.run(go())
    log_.write("end", xid, "complete", None, None)
    import sqlite3

    sqlite3.connect(log_.path, isolation_level=None).execute(
        "UPDATE exchanges SET opened = ? WHERE id = ?", (time.time() - age, xid))
    return xid


def test_the_command_says_how_far_behind_recording_is(log_):
    out = io.StringIO()
    call_command("capture_status", stdout=out)
    assert "up to date" in out.getvalue()
    xid = _waiting(log_, None)
    call_command("capture_status", "--list", "5", stdout=(out := io.StringIO()))
    text = out.getvalue()
    assert "waiting      1 exchange(s), 13 bytes (1 complete)" in text
    assert "oldest       1" in text or "oldest       9" in text
    assert "p-gone (gone" in text and xid in text
    assert "untaken      1 (not being recorded yet)" in text
    assert [x.id for x in log_.take("r-gone", "p-gone", 1)] == [xid]  # then the recorder died
    call_command("capture_status", stdout=(out := io.StringIO()))
    assert "recording    1 taken by r-gone (gone: a server's next round frees them)" in (
        out.getvalue())


def test_the_staff_page_shows_the_lag_and_others_may_not_see_it(log_, client,
                                                               django_user_model):
    _waiting(log_, None)
    user = django_user_model.objects.create_user("u", password="pw-12345678")
    client.force_login(user)
    assert client.get("/staff/capture/").status_code == 302  # to the admin login
    staff = django_user_model.objects.create_user("s", password="pw-12345678", is_staff=True)
    client.force_login(staff)
    page = client.get("/staff/capture/")
    assert page.status_code == 200 and b"1 exchange waiting to be recorded" in page.content
    assert b"<td>nobody yet</td>" in page.content  # no recorder has taken it
    data = client.get("/staff/capture/", HTTP_ACCEPT="application/json").json()
    assert (data["waiting"], data["bytes"], data["by_state"]) == (1, 13, {"complete": 1})


def test_a_conversation_says_when_a_response_into_it_waits_to_be_recorded(
        log_, client, django_user_model):
    owner = django_user_model.objects.create_user("o", password="pw-12345678")
    conversation = store.create_conversation(owner=owner, title="T")
    add_turn(conversation, "user")
    client.force_login(owner)
    page = client.get(f"/c/{conversation.pk}/")
    assert b"data-capture-waiting" not in page.content
    _waiting(log_, str(uuid.uuid4()))  # another conversation's
    _waiting(log_, str(conversation.pk), age=0.0)  # a live recording keeping up
    assert b"data-capture-waiting" not in client.get(f"/c/{conversation.pk}/").content
    _waiting(log_, str(conversation.pk), age=42.0)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "1 response proxied into this conversation is still waiting to be recorded" in page
    assert "(the oldest for 42 s)" in page
