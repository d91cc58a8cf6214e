"""The proxy makes what a provider read of a request body (``Provider.read_request``) into the
turns it holds: redacted and normalized as stored turns are, with the request's shape."""

from __future__ import annotations

from proxy import messages

KEY = "sk-ant-api03-" + "x" * 40


def test_text_and_tool_results_are_redacted_and_the_shape_is_a_tool_round() -> None:
    body = {"model": "claude-x", "messages": [
        {"role": "user", "content": "Use " + KEY},
        {"role": "assistant", "content": [{"type": "text", "text": "One"}]},
        {"role": "assistant", "content": [{"type": "text", "text": " two"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                      "content": "secret " + KEY}]},
    ]}
    exchange = messages.read("anthropic", "messages", body)
    assert exchange.history == [("user", "Use [REDACTED]"), ("agent", "One two")]
    assert exchange.shape == "tool_result" and exchange.model == "claude-x"
    [record] = exchange.prompt
    assert record.kind == "tool_call_response"
    assert KEY not in str(record.body) and KEY not in str(record.payload.value)


def test_a_paused_turn_sent_back_and_a_new_prompt() -> None:
    paused = {"messages": [{"role": "user", "content": "Hi"},
                           {"role": "assistant", "content": [{"type": "text", "text": "So"}]}]}
    exchange = messages.read("anthropic", "messages", paused)
    assert exchange.shape == "pause_turn" and exchange.tool_results == []
    asked = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    exchange = messages.read("google", "generate", asked)
    assert (exchange.shape, exchange.prompt_text, exchange.before_prompt) == ("prompt", "Hi", [])


def test_a_body_for_no_registered_provider_or_not_an_object_holds_nothing() -> None:
    for exchange in (messages.read("nobody", "chat", {"messages": [{"role": "user"}]}),
                     messages.read("openai", "chat", ["not", "an", "object"])):
        assert exchange == messages.Exchange()
