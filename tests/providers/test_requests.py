"""The request side of the adapters on plain data: the portable projection to another provider,
what each provider's request carries (tools, model, limits, thinking), and refusals."""

from __future__ import annotations

import orjson
import pytest

from providers.requests import (
    PriorTurn,
    ReplayError,
    StoredPayload,
    TurnRequest,
    build_continuation,
    build_request,
    portable_text,
)

USER = PriorTurn(role="user", text="Where do tides come from?")
ANSWER_BLOCKS = [
    {"type": "thinking", "thinking": "Moon.", "signature": "sig-1"},
    {"type": "text", "text": "Mostly the Moon."},
]
ANTHROPIC_AGENT = PriorTurn(
    role="agent", text="Mostly the Moon.", provider="anthropic", model="claude-x",
    payloads=tuple(StoredPayload("anthropic", "anthropic.content_block", "2023-06-01",
                                 orjson.dumps(b).decode()) for b in ANSWER_BLOCKS),
    hosted=('web search "tides": 10 results',),
)


def test_another_provider_gets_the_portable_text_only():
    turn = TurnRequest("openai", "gpt-5", "And the Sun?")
    request = build_request([USER, ANTHROPIC_AGENT], turn)
    assert request.path == "/v1/responses"
    assert request.body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": USER.text}]},
        {"role": "assistant",
         "content": '[web search "tides": 10 results]\nMostly the Moon.'},
        {"role": "user", "content": [{"type": "input_text", "text": "And the Sun?"}]},
    ]
    # No native state of another provider leaks into the request.
    assert b"sig-1" not in request.content()


def test_gemini_gets_the_portable_text_of_an_anthropic_turn():
    request = build_request([USER, ANTHROPIC_AGENT],
                            TurnRequest("google", "gemini-2.5-pro", "And the Sun?",
                                        web_search=True))
    assert request.path == "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    assert request.query == "alt=sse"
    assert request.body["contents"][1] == {
        "role": "model", "parts": [{"text": portable_text(ANTHROPIC_AGENT)}]}
    assert request.body["tools"] == [{"googleSearch": {}}]
    assert b"sig-1" not in request.content()


def test_same_provider_sends_the_blocks_back_unchanged():
    request = build_request([USER, ANTHROPIC_AGENT],
                            TurnRequest("anthropic", "claude-x", "And the Sun?"))
    assert request.path == "/v1/messages"
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": USER.text}]},
        {"role": "assistant", "content": ANSWER_BLOCKS},
        {"role": "user", "content": [{"type": "text", "text": "And the Sun?"}]},
    ]
    assert ("anthropic-version", "2023-06-01") in request.headers
    assert all(name != "x-api-key" for name, _ in request.headers)


def test_an_anthropic_turn_of_another_provider_goes_as_text():
    openai_turn = PriorTurn(role="agent", text="Gravity.", provider="openai", model="gpt-5",
                            payloads=(StoredPayload("openai", "openai.responses.output_item",
                                                    "v1", '{"type": "message"}'),))
    request = build_request([USER, openai_turn], TurnRequest("anthropic", "claude-x", "More?"))
    assert request.body["messages"][1] == {
        "role": "assistant", "content": [{"type": "text", "text": "Gravity."}]}


def test_hosted_tools_model_limits_and_thinking():
    stored = PriorTurn(role="agent", text="x", provider="anthropic", model="claude-x",
                       payloads=ANTHROPIC_AGENT.payloads,
                       tool_versions={"web_search": "web_search_20250305"})
    turn = TurnRequest("anthropic", "claude-y", "More?", web_search=True, max_tokens=1000,
                       thinking=2048)
    body = build_request([USER, stored], turn).body
    assert body["model"] == "claude-y"
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search"}]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048  # the budget must fit under max_tokens
    # No stored version: the newest the model takes.
    fresh = build_request([USER], TurnRequest("anthropic", "claude-opus-4-6", "", True)).body
    assert fresh["tools"] == [{"type": "web_search_20260209", "name": "web_search"}]
    assert "tools" not in build_request([USER], TurnRequest("anthropic", "claude-x")).body
    openai = build_request([USER], TurnRequest("openai", "gpt-5", "", True, 500, 4000)).body
    assert openai["tools"] == [{"type": "web_search"}]
    assert openai["max_output_tokens"] == 500
    assert openai["reasoning"]["effort"] == "medium"
    assert openai["include"] == ["reasoning.encrypted_content"]
    google = build_request([USER], TurnRequest("google", "gemini-2.5-pro", "", False, 500,
                                               1024)).body
    assert google["generationConfig"] == {
        "maxOutputTokens": 500, "thinkingConfig": {"thinkingBudget": 1024,
                                                   "includeThoughts": True}}
    assert "tools" not in google


def test_an_empty_prompt_answers_the_last_user_turn_again():
    body = build_request([USER], TurnRequest("anthropic", "claude-x")).body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text",
                                                              "text": USER.text}]}]


def test_a_payload_that_does_not_decode_is_an_error_not_a_downgrade():
    broken = PriorTurn(role="agent", text="Mostly the Moon.", provider="anthropic",
                       model="claude-x",
                       payloads=(StoredPayload("anthropic", "anthropic.content_block",
                                               "2023-06-01", '{"type": "thinking"}'),))
    with pytest.raises(ReplayError, match="does not decode"):
        build_request([USER, broken], TurnRequest("anthropic", "claude-x", "More?"))
    not_json = PriorTurn(role="agent", provider="anthropic", model="claude-x",
                         payloads=(StoredPayload("anthropic", "anthropic.content_block",
                                                 "2023-06-01", "{"),))
    with pytest.raises(ReplayError, match="not JSON"):
        build_request([USER, not_json], TurnRequest("anthropic", "claude-x", "More?"))
    pieces = PriorTurn(role="agent", provider="anthropic", model="claude-x", payloads=(
        StoredPayload("anthropic", "anthropic.stream_block", "2023-06-01",
                      '{"content_block": {"type": "compaction"}, "deltas": []}'),))
    with pytest.raises(ReplayError, match="kept as pieces"):
        build_request([USER, pieces], TurnRequest("anthropic", "claude-x", "More?"))


def test_only_anthropic_turns_pause():
    with pytest.raises(ReplayError):
        build_continuation([USER], TurnRequest("openai", "gpt-5"), ANTHROPIC_AGENT)
    with pytest.raises(ReplayError):
        build_continuation([USER], TurnRequest("anthropic", "claude-x"),
                           PriorTurn(role="agent", text="x", provider="openai"))
    with pytest.raises(ValueError, match="unknown provider"):
        build_request([USER], TurnRequest("mistral", "m"))


def _openai_item(item: dict) -> StoredPayload:
    return StoredPayload("openai", "openai.responses.output_item", "v1+web_search",
                         orjson.dumps(item).decode())


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
MESSAGE = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "Gravity.", "annotations": [
               {"type": "url_citation", "url": "https://e.org", "title": "E", "start_index": 0,
                "end_index": 8}]}]}
OPENAI_AGENT = PriorTurn(role="agent", text="Gravity.", provider="openai", model="gpt-5",
                         payloads=(_openai_item(REASONING), _openai_item(MESSAGE)),
                         response_ids=("resp_1",))


def test_openai_items_go_back_as_received():
    body = build_request([USER, OPENAI_AGENT], TurnRequest("openai", "gpt-5", "More?")).body
    assert body["input"][1:3] == [REASONING, MESSAGE]
    assert "previous_response_id" not in body and body["store"] is False


def test_previous_response_id_when_the_response_was_kept_upstream():
    kept = PriorTurn(role="agent", text="Gravity.", provider="openai", model="gpt-5",
                     payloads=OPENAI_AGENT.payloads, response_ids=("resp_0", "resp_1"),
                     request={"model": "gpt-5", "store": True})
    body = build_request([USER, kept], TurnRequest("openai", "gpt-5", "More?",
                                                   store=True)).body
    assert body["previous_response_id"] == "resp_1"
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text",
                                                           "text": "More?"}]}]
    # Not kept upstream (or not asked to keep): the items themselves.
    unkept = PriorTurn(role="agent", text="Gravity.", provider="openai", model="gpt-5",
                       payloads=OPENAI_AGENT.payloads, response_ids=("resp_1",),
                       request={"store": False})
    body = build_request([USER, unkept], TurnRequest("openai", "gpt-5", "More?",
                                                     store=True)).body
    assert "previous_response_id" not in body and body["input"][1] == REASONING


def test_chat_completions_turns_go_back_as_their_message():
    stored = PriorTurn(role="agent", text="Gravity.", provider="openai", model="gpt-4o",
                       payloads=(StoredPayload("openai", "openai.chat.message", "v1",
                                               '{"role": "assistant", "content": "Gravity.",'
                                               ' "annotations": []}'),))
    body = build_request([USER, stored], TurnRequest("openai", "gpt-4o", "More?",
                                                     api="chat", web_search=True)).body
    assert body["messages"] == [{"role": "user", "content": USER.text},
                                {"role": "assistant", "content": "Gravity."},
                                {"role": "user", "content": "More?"}]
    assert body["web_search_options"] == {}
    # A Responses turn asked of Chat Completions (another API): its text.
    body = build_request([USER, OPENAI_AGENT], TurnRequest("openai", "gpt-4o", "More?",
                                                           api="chat")).body
    assert body["messages"][1] == {"role": "assistant", "content": "Gravity."}


def test_a_continuation_keeps_the_paused_turns_hosted_tools():
    paused = PriorTurn(role="agent", text="x", provider="anthropic", model="claude-x",
                       payloads=ANTHROPIC_AGENT.payloads,
                       tool_versions={"web_search": "web_search_20250305",
                                      "web_fetch": "web_fetch_20250910"})
    body = build_continuation([USER], TurnRequest("anthropic", "claude-x"), paused).body
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search"},
                             {"type": "web_fetch_20250910", "name": "web_fetch"}]
    assert body["messages"][-1] == {"role": "assistant", "content": ANSWER_BLOCKS}
    recorded = PriorTurn(role="agent", text="x", provider="anthropic", model="claude-x",
                         payloads=ANTHROPIC_AGENT.payloads,
                         request={"tools": [{"type": "web_search_20260209", "name": "web_search",
                                             "max_uses": 3}]})
    body = build_continuation([USER], TurnRequest("anthropic", "claude-x", web_search=True),
                              recorded).body
    assert body["tools"] == [{"type": "web_search_20260209", "name": "web_search",
                              "max_uses": 3}]


def test_an_interrupted_turn_sends_its_cut_text_after_its_blocks():
    cut = PriorTurn(role="agent", text="Mostly the Moon. And the", provider="anthropic",
                    model="claude-x", payloads=ANTHROPIC_AGENT.payloads,
                    partial_text="And the")
    body = build_request([USER, cut], TurnRequest("anthropic", "claude-x", "Go on")).body
    assert body["messages"][1]["content"] == [*ANSWER_BLOCKS,
                                              {"type": "text", "text": "And the"}]


def test_the_answer_is_read_with_the_requests_context():
    request = build_request([USER], TurnRequest("anthropic", "claude-x", web_search=True))
    context = request.wire_context("http://upstream/v1/messages")
    assert context.api_version == "2023-06-01" and context.request is request.body
    assert context.endpoint == "http://upstream/v1/messages"
    google = build_request([USER], TurnRequest("google", "gemini-2.5-pro")).wire_context()
    assert google.api_version is None


def _payload(provider: str, fmt: str, value: dict) -> StoredPayload:
    return StoredPayload(provider, fmt, "v1", orjson.dumps(value).decode())


def test_client_tool_rounds_go_back_where_they_came():
    # As the recording proxy stores a tool round: the call, the host's result, the answer.
    call = {"type": "tool_use", "id": "toolu_1", "name": "city", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Paris"}
    answer = {"type": "text", "text": "Paris it is."}
    agent = PriorTurn(role="agent", text="Paris it is.", provider="anthropic", model="c",
                      payloads=tuple(_payload("anthropic", "anthropic.content_block", b)
                                     for b in (call, result, answer)))
    body = build_request([USER, agent], TurnRequest("anthropic", "c", "Thanks")).body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant",
                                                     "user"]
    assert body["messages"][1]["content"] == [call]
    assert body["messages"][2]["content"] == [result]
    # A result in the user turn after the call (the newest message answered it and asked on).
    asked = PriorTurn(role="agent", provider="anthropic", model="c",
                      payloads=(_payload("anthropic", "anthropic.content_block", call),))
    replied = PriorTurn(role="user", text="And?", payloads=(
        _payload("anthropic", "anthropic.content_block", result),))
    body = build_request([USER, asked, replied], TurnRequest("anthropic", "c")).body
    assert body["messages"][2] == {"role": "user", "content": [
        result, {"type": "text", "text": "And?"}]}
    # The call goes to another provider as text (here none: the turn said nothing), so its
    # result cannot follow it; the user contents left in a row are one.
    body = build_request([USER, asked, replied], TurnRequest("google", "g")).body
    assert body["contents"] == [{"role": "user", "parts": [{"text": USER.text},
                                                           {"text": "And?"}]}]

    function_call = {"functionCall": {"name": "city", "args": {}, "id": "c1"},
                     "thoughtSignature": "AY89"}
    function_response = {"functionResponse": {"name": "city", "id": "c1",
                                              "response": {"v": "Paris"}}}
    gemini = PriorTurn(role="agent", provider="google", model="g", text="Paris.",
                       payloads=(_payload("google", "google.part", function_call),
                                 _payload("google", "google.part", function_response),
                                 _payload("google", "google.candidate", {"content": {
                                     "role": "model", "parts": [{"text": "Paris."}]}})))
    contents = build_request([USER, gemini], TurnRequest("google", "g", "Thanks")).body[
        "contents"]
    assert contents[1:4] == [{"role": "model", "parts": [function_call]},
                             {"role": "user", "parts": [function_response]},
                             {"role": "model", "parts": [{"text": "Paris."}]}]

    tool_message = {"role": "tool", "tool_call_id": "call_1", "content": "Paris"}
    calls = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "city", "arguments": "{}"}}]}
    chat = PriorTurn(role="agent", provider="openai", model="gpt-4o", text="Paris.",
                     payloads=tuple(_payload("openai", "openai.chat.message", m) for m in (
                         calls, tool_message, {"role": "assistant", "content": "Paris."})))
    messages = build_request([USER, chat], TurnRequest("openai", "gpt-4o", "Thanks",
                                                       api="chat")).body["messages"]
    assert messages[1:4] == [{"role": "assistant", "tool_calls": calls["tool_calls"]},
                             tool_message, {"role": "assistant", "content": "Paris."}]


def test_thinking_only_where_the_model_takes_it():
    ask = dict(prompt="Q", thinking=4096)
    assert "thinking" in build_request([USER], TurnRequest("anthropic", "claude-sonnet-4-5",
                                                           **ask)).body
    assert "thinking" not in build_request([USER], TurnRequest(
        "anthropic", "claude-3-5-sonnet-latest", **ask)).body
    assert "reasoning" in build_request([USER], TurnRequest("openai", "o4-mini", **ask)).body
    gpt4o = build_request([USER], TurnRequest("openai", "gpt-4o", **ask)).body
    assert "reasoning" not in gpt4o and "include" not in gpt4o
    assert "reasoning_effort" not in build_request([USER], TurnRequest(
        "openai", "gpt-4o", api="chat", **ask)).body
    assert "thinkingConfig" in build_request([USER], TurnRequest(
        "google", "gemini-2.5-flash", **ask)).body["generationConfig"]
    assert "generationConfig" not in build_request([USER], TurnRequest(
        "google", "gemini-2.0-flash", **ask)).body
