"""The OpenWOP conversation-turn projection, validated against the protocol's own JSON Schema
(../shared/fixtures/openwop, v2: closed top level, speakerId on agent turns, agent.model
closed)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from conversations import openwop, store
from tests.api.conftest import build_conversation
from tests.support import add_turn, shared_path

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def registry() -> Registry:
    """ids.schema.json under its $id, so the turn schema's relative $ref resolves offline."""
    ids_schema = json.loads(shared_path("fixtures", "openwop", "ids.schema.json").read_text())
    return Registry().with_resource(ids_schema["$id"], Resource.from_contents(ids_schema))


@pytest.fixture(scope="module")
def validator(registry) -> Draft202012Validator:
    path = shared_path("fixtures", "openwop", "conversation-turn.schema.json")
    turn_schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(turn_schema)
    return Draft202012Validator(turn_schema, registry=registry)


def assert_valid(validator: Draft202012Validator, turn: dict) -> None:
    errors = sorted(validator.iter_errors(turn), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def test_the_schema_rejects_what_it_should(validator):
    """The validator is wired right: the $ref resolves and the closed parts bite."""
    good = {"messageId": "c:1:agent", "from": "a", "content": "x", "ts": 0, "role": "agent",
            "turnIndex": 1, "speakerId": "a", "agent": {"agentId": "a"}}
    assert_valid(validator, good)
    for bad in (
        {**good, "speakerId": ""},
        {k: v for k, v in good.items() if k != "speakerId"},
        {**good, "agent": {"agentId": "bad id with spaces"}},
        {**good, "agent": {"agentId": "a", "model": {"provider": "p", "model": "m",
                                                     "apiKey": "x"}}},
        {**good, "extra": 1},
    ):
        assert not validator.is_valid(bad)


def test_every_turn_validates_and_model_appears_only_where_it_belongs(alice, alice_api,
                                                                      validator):
    conversation = build_conversation(owner=alice)
    response = alice_api.get(f"/api/v1/conversations/{conversation.pk}/turns?format=openwop")
    assert response.status_code == 200
    turns = response.json()
    assert [t["role"] for t in turns] == ["user", "agent", "user", "agent", "system"]
    for turn in turns:
        assert_valid(validator, turn)
        assert turn["messageId"] == f"{conversation.pk}:{turn['turnIndex']}:{turn['role']}"
        if turn["role"] != "agent":
            assert "agent" not in turn and "speakerId" not in turn
            assert turn["from"] == turn["role"]
    provenance = turns[1]["agent"]
    assert set(provenance["model"]) == {"provider", "model"}
    assert provenance["model"] == {"provider": "anthropic", "model": "claude-sonnet-4-20250514"}
    assert turns[1]["speakerId"] == turns[1]["from"] == provenance["agentId"]
    assert "model" not in turns[3]["agent"]  # unknown provenance is absent, not invented
    assert turns[1]["content"]["text"] == "It is sunny in Paris today."
    assert [e["kind"] for e in turns[1]["content"]["events"]] == [
        "hosted_activity", "reasoning", "message", "provider_artifact"]
    assert "payload" not in json.dumps(turns)


def test_projection_is_deterministic(alice):
    conversation = build_conversation(owner=alice)
    assert openwop.conversation_turns(conversation) == openwop.conversation_turns(conversation)


@pytest.mark.parametrize("raw", [
    "anthropic:claude-sonnet-4-20250514", "openrouter:deepseek/deepseek-chat",
    "vertex:gemini@2025+preview", "a~b", "x" * 300, "", "ünïcode:模型",
])
def test_agent_ids_always_fit_the_grammar_and_stay_distinct(raw, registry):
    agent_id = openwop.agent_id(raw)
    schema = {"$ref": "https://openwop.dev/spec/v2/ids.schema.json#/$defs/agentId"}
    assert Draft202012Validator(schema, registry=registry).is_valid(agent_id)
    if raw and len(raw) < 40:
        assert openwop.agent_id(raw + "x") != agent_id
    assert openwop.agent_id("a/b") != openwop.agent_id("a~2Fb")


def test_agent_turn_with_odd_model_names_validates(alice, validator):
    conversation = store.create_conversation(owner=alice)
    add_turn(conversation, "agent", provider="openrouter",
                     model="deepseek/deepseek-chat@v3+x")
    [turn] = openwop.conversation_turns(conversation)
    assert_valid(validator, turn)
    assert turn["agent"]["model"] == {"provider": "openrouter",
                                      "model": "deepseek/deepseek-chat@v3+x"}


def test_turn_format_parameter_is_checked(alice, alice_api):
    conversation = build_conversation(owner=alice)
    response = alice_api.get(f"/api/v1/conversations/{conversation.pk}/turns?format=yaml")
    assert response.status_code == 400
    assert "format" in response.json()["detail"]
