"""Live replays started per user are rate-limited (issue 11, item 8): 30 in 3.2 s used to start
30 tasks on the server's loop."""

from __future__ import annotations

import pytest

from conversations.models import Conversation
from live import bundled, tasks

pytestmark = pytest.mark.django_db


def test_replays_past_the_rate_are_refused_with_a_429(client, owner, stranger, monkeypatch,
                                                      settings):
    settings.TURNSCOPE_REPLAY_RATE = "3/min"
    started = []
    monkeypatch.setattr(tasks, "spawn", lambda coro, name="": (started.append(name),
                                                                 coro.close()))
    [(_, source, _)] = bundled.load(owner, only=["anthropic-failed-search"])
    client.force_login(owner)
    url = f"/c/{source.pk}/replay/"
    assert [client.post(url).status_code for _ in range(4)] == [302, 302, 302, 429]
    response = client.post(url)
    assert response.status_code == 429 and "Too many live replays" in response.content.decode()
    assert len(started) == 3
    assert Conversation.objects.filter(owner=owner).count() == 1 + 3  # none made when refused
    # another user's replays are counted apart
    [(_, theirs, _)] = bundled.load(stranger, only=["anthropic-cut-stream"])
    client.force_login(stranger)
    assert client.post(f"/c/{theirs.pk}/replay/").status_code == 302
