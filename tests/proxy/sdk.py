"""The official SDKs, pointed at a base URL (the proxy, or the recorded upstream directly)."""

from __future__ import annotations

from typing import Any

from tests.proxy.cases import Case
from tests.proxy.conftest import ANTHROPIC_KEY, GOOGLE_KEY, OPENAI_KEY

PROMPT = "What does the record say?"


def anthropic_client(base: str, headers: dict[str, str] | None = None) -> Any:
    import anthropic

    return anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=base, max_retries=0,
                               default_headers=headers or {}, timeout=30)


def openai_client(base: str, headers: dict[str, str] | None = None) -> Any:
    import openai

    return openai.OpenAI(api_key=OPENAI_KEY, base_url=base, max_retries=0,
                         default_headers=headers or {}, timeout=30)


def google_client(base: str, headers: dict[str, str] | None = None) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(api_key=GOOGLE_KEY, http_options=types.HttpOptions(
        base_url=base, headers=headers or {}, timeout=30_000))


def base_url(provider: str, root: str) -> str:
    """An SDK's base URL under ``root`` (the proxy's ``/proxy/<provider>`` prefix, or the
    upstream itself)."""
    return root + ("/v1" if provider == "openai" else "")


def _dump(value: Any) -> Any:
    dumped = value.model_dump(mode="json", exclude_none=False)
    if isinstance(dumped, dict):
        dumped.pop("sdk_http_response", None)  # google-genai keeps the raw HTTP headers here
    return dumped


def outcome(fn: Any) -> Any:
    """What the app gets: the result, or the SDK's exception (type, status, body)."""
    try:
        return ("ok", fn())
    except Exception as exc:  # the SDKs' errors, compared as the app would see them
        return ("error", type(exc).__name__, getattr(exc, "status_code", None),
                getattr(exc, "body", None) or str(exc))


def call(case: Case, root: str, headers: dict[str, str] | None = None,
         messages: list[dict[str, Any]] | None = None) -> Any:
    """Ask for ``case`` the way its provider's SDK does; returns ``outcome``."""
    base = base_url(case.provider, root)
    if case.provider == "anthropic":
        client = anthropic_client(base, headers)
        kwargs = {"model": case.model, "max_tokens": 1024,
                  "messages": messages or [{"role": "user", "content": PROMPT}]}
        if case.stream:
            return outcome(lambda: [_dump(e) for e in client.messages.create(**kwargs,
                                                                            stream=True)])
        return outcome(lambda: _dump(client.messages.create(**kwargs)))
    if case.provider == "openai":
        client = openai_client(base, headers)
        if case.api == "chat":
            kwargs = {"model": case.model,
                      "messages": messages or [{"role": "user", "content": PROMPT}]}
            create = client.chat.completions.create
        else:
            kwargs = {"model": case.model, "input": messages or PROMPT}
            create = client.responses.create
        if case.stream:
            return outcome(lambda: [_dump(e) for e in create(**kwargs, stream=True)])
        return outcome(lambda: _dump(create(**kwargs)))
    client = google_client(base, headers)
    contents = messages or PROMPT
    if case.stream:
        return outcome(lambda: [_dump(c) for c in client.models.generate_content_stream(
            model=case.model, contents=contents)])
    return outcome(lambda: _dump(client.models.generate_content(model=case.model,
                                                                contents=contents)))
