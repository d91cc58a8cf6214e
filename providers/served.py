"""Who served a response: the provider ``agent.model`` names, which is the service that answered
the call, not the wire format it answered in (a DeepSeek, Groq or xAI answer speaks OpenAI's
format and is still theirs; payloads keep the format's owner, the adapter's ``PROVIDER``).

Decided from what is known, most certain first:

1. ``WireContext.served_by``: the caller knows (the recording proxy's route, e.g. a named
   upstream ``/proxy/xai/...``; a live call's provider);
2. the host the request went to (``WireContext.endpoint``, when the recording has it):
   ``KNOWN_HOSTS``;
3. what the response itself shows (each adapter reads its own fields: OpenRouter's
   ``provider``, Perplexity's ``citations``, Groq's ``x_groq``);
4. the served model's name, where it is a service's own (``grok-*`` is xAI's, ``deepseek-chat``
   and ``deepseek-reasoner`` are DeepSeek's API names; a gateway names them otherwise, e.g.
   ``x-ai/grok-4``, ``deepseek/deepseek-r1``);
5. the adapter's own provider.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from providers.protocol import WireContext

# The name a provider is stored under: what ``conversations.provenance`` accepts.
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

# API host (exact, or a suffix when it starts with ".") -> the service.
KNOWN_HOSTS = (
    ("api.openai.com", "openai"),
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "google"),
    ("api.x.ai", "xai"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("openrouter.ai", "openrouter"),
    ("api.perplexity.ai", "perplexity"),
    ("api.mistral.ai", "mistral"),
    ("api.together.xyz", "together"),
    ("api.together.ai", "together"),
    (".openai.azure.com", "azure"),
    (".services.ai.azure.com", "azure"),
    (".cognitiveservices.azure.com", "azure"),
    ("aiplatform.googleapis.com", "vertex"),
    ("-aiplatform.googleapis.com", "vertex"),
)

# The services' names for a person (a service not named here is shown by its name).
LABELS = {"xai": "xAI", "groq": "Groq", "deepseek": "DeepSeek", "mistral": "Mistral",
          "perplexity": "Perplexity", "openrouter": "OpenRouter", "together": "Together",
          "azure": "Azure OpenAI"}
# Models a live call offers first for the services whose names are known (any name the service
# takes may be sent).
MODELS = {
    "xai": ("grok-4", "grok-4-fast-reasoning", "grok-3-mini"),
    "groq": ("groq/compound", "llama-3.3-70b-versatile", "openai/gpt-oss-120b"),
    "deepseek": ("deepseek-chat", "deepseek-reasoner"),
    "mistral": ("mistral-large-latest", "mistral-small-latest"),
    "perplexity": ("sonar", "sonar-pro"),
    "openrouter": ("openai/gpt-5-mini", "anthropic/claude-sonnet-4.5"),
}

# Model names only one service serves under that name.
_MODELS = (
    (re.compile(r"^grok-"), "xai"),
    (re.compile(r"^deepseek-(chat|reasoner)$"), "deepseek"),
    (re.compile(r"^groq/"), "groq"),
)


def by_host(endpoint: str | None) -> str:
    """The service whose API host ``endpoint`` is ("" when unknown)."""
    if not endpoint:
        return ""
    try:
        host = (urlsplit(endpoint).hostname or "").lower()
    except ValueError:
        return ""
    for known, name in KNOWN_HOSTS:
        if host == known or (known[0] in ".-" and host.endswith(known)):
            return name
    return ""


def by_model(model: str) -> str:
    """The service a model name is unique to ("" when any could serve it)."""
    for pattern, name in _MODELS:
        if pattern.match(model):
            return name
    return ""


def known(context: WireContext) -> str:
    """What the caller or the host says served the response (1 and 2 above; "" if neither)."""
    served = context.served_by or ""
    return served if NAME.match(served) else by_host(context.endpoint)


def provider(context: WireContext, default: str, *, shown: str = "", model: str = "") -> str:
    """The provider to record: the caller's or the host's word, else what the response
    ``shown`` (the adapter read it), else the model's name, else ``default``."""
    return known(context) or shown or by_model(model) or default
