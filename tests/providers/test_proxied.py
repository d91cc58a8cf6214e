"""Each provider reads a proxied request body (``Provider.read_request``): its messages as
entries, who sent the last one, the newest user message's text and its client tool results
with their native payloads, the text as the body has it (the proxy redacts it)."""

from __future__ import annotations

from providers import registry

KEY = "sk-ant-api03-" + "x" * 40  # looks like a key: the reader leaves redaction to the proxy


def test_anthropic_reads_messages_tool_results_and_a_paused_turn() -> None:
    body = {"messages": [
        {"role": "user", "content": "Find the tide times " + KEY},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                                          {"type": "tool_use", "id": "tu_1", "name": "tides"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                      "content": [{"type": "text", "text": "high at 6"}],
                                      "is_error": True}]},
    ]}
    read = registry.get("anthropic").read_request(body, "messages", "2023-06-01", "")
    assert read.entries == [("user", "Find the tide times " + KEY), ("agent", "Looking."),
                            ("user", "")]
    assert read.last_role == "user" and read.prompt_text == ""
    [result] = read.tool_results
    assert (result.call_id, result.output, result.is_error) == ("tu_1", "high at 6", True)
    assert result.payload.provider == "anthropic"
    assert result.payload.format == "anthropic.content_block"
    assert result.payload.version == "2023-06-01"
    assert result.payload.value is body["messages"][2]["content"][0]
    paused = {"messages": [*body["messages"][:1], body["messages"][1]]}
    assert registry.get("anthropic").read_request(paused, "messages", None, "").last_role == (
        "agent")


def test_openai_reads_responses_input_and_chat_messages_by_endpoint() -> None:
    openai = registry.get("openai")
    responses = {"previous_response_id": "resp_1", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
        {"type": "function_call_output", "call_id": "call_1", "output": {"ok": 1}},
    ]}
    read = openai.read_request(responses, "responses", None, "")
    assert read.previous_response_id == "resp_1"
    assert read.entries == [("user", "Hello"), ("user", "")]
    assert [(r.call_id, r.output) for r in read.tool_results] == [("call_1", {"ok": 1})]
    assert read.tool_results[0].payload.format == "openai.responses.output_item"
    assert read.prompt_text == ""  # the request only answers a call
    assert openai.read_request({"input": "Just text"}, "responses", None, "").prompt_text == (
        "Just text")
    chat = {"messages": [{"role": "system", "content": "Be brief"},
                         {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello"},
                         {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "42"}]}
    read = openai.read_request(chat, "chat", None, "")
    assert read.entries == [("user", "Hi"), ("agent", "Hello"), ("user", "")]
    [result] = read.tool_results
    assert (result.call_id, result.name, result.output) == ("c1", "f", "42")
    assert result.payload.format == "openai.chat.message"


def test_gemini_reads_function_responses_and_a_prefill_is_no_continuation() -> None:
    body = {"contents": [
        {"role": "user", "parts": [{"text": "Weather?"}]},
        {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"text": "Sunny"}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "f1", "name": "weather",
                                                         "response": {"t": 20}}}]},
        {"role": "model", "parts": [{"text": "It is"}]},
    ]}
    url = "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash:generateContent"
    read = registry.get("google").read_request(body, "generate", None, url)
    assert read.entries == [("user", "Weather?"), ("agent", "Sunny"), ("user", ""),
                            ("agent", "It is")]
    assert read.last_role == "user"  # a model message sent last is a prefill
    [result] = read.tool_results
    assert (result.call_id, result.name, result.output) == ("f1", "weather", {"t": 20})
    assert (result.payload.format, result.payload.version) == ("google.part", "v1")


def test_a_body_with_no_messages_reads_as_nothing() -> None:
    for provider in registry.providers():
        read = provider.read_request({}, "", None, "")
        assert (read.entries, read.tool_results, read.prompt_text) == ([], [], "")


def test_each_provider_names_the_endpoints_the_proxy_records() -> None:
    anthropic, openai, google = (registry.get(n) for n in ("anthropic", "openai", "google"))
    assert anthropic.proxied_endpoint("/v1/messages") == "messages"
    assert anthropic.proxied_endpoint("/v1/messages/count_tokens") is None
    assert openai.proxied_endpoint("/v1/responses") == "responses"
    assert openai.proxied_endpoint("/v1/chat/completions") == "chat"
    assert openai.proxied_endpoint("/v1/models") is None
    assert google.proxied_endpoint("/v1beta/models/gemini-2.5-flash:streamGenerateContent") == (
        "generate")
    assert google.proxied_endpoint("/v1/models/gemini-2.5-pro:generateContent") == "generate"
    assert google.proxied_endpoint("/v1beta/models/gemini-2.5-flash:countTokens") is None
