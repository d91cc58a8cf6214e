"""The capability flag, and the proof that it does not lie: every agent turn ingested from every
recorded provider fixture carries agent.model = {provider, model}, in every projection."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from conversations import openwop
from conversations.ingest import ingest
from conversations.projections import conversation_dict
from tests.api.conftest import fixture_turns, response_files
from tests.support import shared_path

pytestmark = pytest.mark.django_db


def test_capabilities_endpoint(alice_api, client):
    response = alice_api.get("/api/v1/capabilities")
    assert response.status_code == 200
    assert response.json() == {"conversationTurnModelProvenance": {"supported": True}}
    assert client.get("/api/v1/capabilities").status_code in (401, 403)


def openwop_validator() -> Draft202012Validator:
    folder = shared_path("fixtures", "openwop")
    ids_schema = json.loads((folder / "ids.schema.json").read_text())
    registry = Registry().with_resource(ids_schema["$id"], Resource.from_contents(ids_schema))
    schema = json.loads((folder / "conversation-turn.schema.json").read_text())
    return Draft202012Validator(schema, registry=registry)


@pytest.mark.parametrize("provider, label, names", fixture_turns(),
                         ids=[label for _p, label, _n in fixture_turns()])
def test_every_agent_turn_from_every_fixture_carries_agent_model(alice, provider, label, names):
    conversation = None
    for files in response_files(provider, names):
        summary = ingest(provider, files, owner=alice, conversation=conversation)
        conversation = summary.conversation
    agent_turns = list(conversation.turns.filter(role="agent").order_by("index"))
    assert agent_turns
    for turn in agent_turns:
        # (the provider is who served it: an OpenAI-compatible response may name openrouter)
        assert turn.provider and turn.model, f"turn {turn.index} has no provenance"
    doc = conversation_dict(conversation, "portable")
    for turn in doc["turns"]:
        assert set(turn["agent"]["model"]) == {"provider", "model"}
    validator = openwop_validator()
    for turn in openwop.conversation_turns(conversation):
        assert not list(validator.iter_errors(turn))
        assert turn["agent"]["model"]["model"]
