"""The recording proxy: a key split across stream chunks at any offset reaches the client as
sent and is never stored or kept in the recording (issue 11, item 1)."""

from __future__ import annotations

import httpx
import pytest

from conversations.models import Conversation, Turn
from tests.proxy.conftest import wait_recorded
from tests.proxy.test_failures import MESSAGES_BODY, headers
from tests.split_secrets import as_sse, assert_nothing_kept, split_cases, split_stream
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_proxied_turn_keeps_no_piece_of_a_key_split_at_any_offset(upstream, proxy_url, token):
    cases = split_cases()
    raw = as_sse(split_stream(cases))
    upstream.add(reply("anthropic", raw))
    with httpx.Client(timeout=60) as http:
        response = http.post(f"{proxy_url}/proxy/anthropic/v1/messages", content=MESSAGES_BODY,
                             headers=headers(token))
    assert response.status_code == 200
    assert response.content == raw  # the client gets the provider's bytes unchanged
    wait_recorded(60)
    assert Turn.objects.get(role="agent").status == "complete"
    assert_nothing_kept(Conversation.objects.get(), cases)
