"""The official SDKs through the proxy: for every recording, the app's result through the proxy
equals its result direct from the same (recorded) upstream, the stored turn equals what ingest
stores for the same bytes, the recording replays wire-exact, and the page shows the turn."""

from __future__ import annotations

import pytest

import providers
from conversations.ingest import ResponseFile, ingest
from conversations.models import Turn
from conversations.projections import turn_dict
from guards.redaction import redact_text, redact_value
from live.models import Recording
from tests.proxy import sdk
from tests.proxy.cases import cases
from tests.proxy.conftest import wait_recorded
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)

CASES = cases()
# The shared recordings are the slow (corpus) tier; the bundled samples stay in the fast one.
PARAMS = [pytest.param(c, id=c.id, marks=() if c.id.startswith("sample:") else pytest.mark.slow)
          for c in CASES]


def portable(turn: Turn) -> dict:
    """A turn's portable projection without ids, seqs and timestamps (which differ per run)."""
    doc = turn_dict(turn, list(turn.events.order_by("seq")))
    doc.pop("id"), doc.pop("created_at"), doc.pop("index")
    for event in doc["events"]:
        event.pop("id"), event.pop("seq")
    return doc


def served_context(upstream, request) -> providers.WireContext:
    """The context the proxy records from the real request the upstream received."""
    url = upstream.url + request.path + (f"?{request.query}" if request.query else "")
    return providers.WireContext(request.header("anthropic-version"), redact_value(request.json),
                                 redact_text(url))


def test_every_provider_has_cases():
    assert {c.provider for c in CASES} >= {"anthropic", "openai", "google"}  # the samples
    recordings = [c for c in CASES if not c.id.startswith("sample:")]
    if not recordings:
        pytest.skip("no recordings: ../shared/fixtures/providers is absent")
    assert {c.provider for c in recordings} == {"anthropic", "openai", "google"}
    assert any(c.stream for c in recordings) and any(not c.stream for c in recordings)


@pytest.mark.parametrize("case", PARAMS)
def test_sdk_through_the_proxy_equals_direct_and_records_what_ingest_stores(
    case, upstream, proxy_url, token, owner, client
):
    served = reply(case.provider, case.raw)
    upstream.add(served, served)
    direct = sdk.call(case, upstream.url)
    proxied = sdk.call(case, f"{proxy_url}/proxy/{case.provider}", {"X-Turnscope-Token": token})
    assert proxied == direct
    assert upstream.sent[1] == upstream.sent[0]
    wait_recorded()

    [turn] = Turn.objects.filter(role=Turn.Role.AGENT)
    conversation = turn.conversation
    assert conversation.owner == owner
    [user_turn] = conversation.turns.filter(role=Turn.Role.USER)
    assert [e.text for e in user_turn.events.all()] == [sdk.PROMPT]
    assert conversation.title == sdk.PROMPT

    request = upstream.requests[1]
    summary = ingest(case.provider, [ResponseFile(case.id, upstream.sent[1],
                                                  served_context(upstream, request))],
                     owner=owner)
    assert portable(turn) == portable(summary.turn)
    assert (turn.provider, turn.model) == (summary.turn.provider, summary.turn.model)
    assert turn.responses_list == summary.turn.responses_list

    # the recording replays wire-exact: the bytes served, and the real request's context
    [kept] = Recording.objects.get(turn=turn).response_list
    raw = kept["raw"].encode()
    if raw != upstream.sent[1]:
        # An SDK that raises on the stream's error event hangs up there: the recording holds
        # what the app took, whole events up to the error; what the provider sent after it
        # may not have been forwarded before the app went away.
        assert upstream.sent[1].startswith(raw) and raw.endswith(b"\n\n"), raw[-200:]
        assert b'"type":"error"' in raw, raw[-200:]
    assert kept["request"] == redact_value(request.json)
    assert kept["endpoint"].endswith(request.path + (f"?{request.query}" if request.query
                                                     else ""))

    client.force_login(owner)
    page = client.get(f"/c/{conversation.pk}/")
    assert page.status_code == 200
    assert f'id="turn-{turn.pk}"'.encode() in page.content
