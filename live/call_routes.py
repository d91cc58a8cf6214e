"""Which providers a live call can be sent to and where each one's requests go: the options the
composer offers (a provider's own API with its key, the built-in recorded provider when no key
is set, Azure OpenAI and the named upstreams of ``live.services``), what it selects first, and
a ``Route``: the URL and the headers (the key read from the environment here, only put in the
request's headers). ``live.calls`` refuses a route that is disabled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from conversations.models import Turn
from live import services
from providers import registry
from providers.requests import UpstreamRequest
from upstream import client

PROVIDERS = registry.names()
# What a provider's live calls need (its ``Provider``: ``providers/<p>/provider.py``): the
# environment variable its key is read from, its name for a person, the models the composer
# offers (any model name the provider accepts may be sent).
KEY_VARIABLES = {p.name: p.key_variable for p in registry.providers()}
LABELS = {p.name: p.label for p in registry.providers()}
MODELS = {p.name: p.models for p in registry.providers()}


def _key(provider: str) -> str:
    return os.environ.get(KEY_VARIABLES[provider], "").strip()


def recorded_base() -> str:
    """Where the recorded provider answers ("" when there is none)."""
    return str(getattr(settings, "TURNSCOPE_RECORDED_UPSTREAM", "") or "").rstrip("/")


@dataclass(frozen=True)
class ProviderOption:
    """A provider as the composer offers it."""

    provider: str
    label: str
    enabled: bool
    recorded: bool  # answered by the recorded provider (no key is set)
    reason: str  # why it is disabled, or what "recorded" means
    models: tuple[str, ...]


def provider_options() -> list[ProviderOption]:
    out = []
    for provider in PROVIDERS:
        variable = KEY_VARIABLES[provider]
        if _key(provider):
            out.append(ProviderOption(provider, LABELS[provider], True, False, "",
                                      MODELS[provider]))
        elif recorded_base():
            out.append(ProviderOption(
                provider, f"{LABELS[provider]} (recorded)", True, True,
                f"No {variable} is set: the recorded provider answers with the bundled "
                f"samples, in {LABELS[provider]}'s wire format.", MODELS[provider]))
        else:
            out.append(ProviderOption(provider, LABELS[provider], False, False,
                                      f"No {variable} in the server's environment.",
                                      MODELS[provider]))
    for service in services.services():  # Azure OpenAI, named upstreams (``live.services``)
        enabled = bool(services.key(service))
        out.append(ProviderOption(service.name, service.label, enabled, False, "" if enabled
                                  else f"No {service.key_variable} in the server's environment.",
                                  service.models))
    return out


@dataclass(frozen=True)
class Composer:
    """What the composer (and the re-run form) offers, and what it selects first."""

    options: list[ProviderOption]
    provider: str  # "" when no provider is enabled
    model: str

    @property
    def any_enabled(self) -> bool:
        return any(o.enabled for o in self.options)

    @property
    def any_recorded(self) -> bool:
        return any(o.recorded for o in self.options)


def composer(exclude: str = "", prefer: tuple[str, str] = ("", "")) -> Composer:
    """The composer's choices. ``prefer`` (provider, model), e.g. the conversation's last
    answer's, is selected when that provider is enabled; else the first enabled provider
    (other than ``exclude``, e.g. the provider of the turn to re-run, when another is enabled)."""
    options = provider_options()
    enabled = [o for o in options if o.enabled]
    preferred = next((o for o in enabled if o.provider == prefer[0]), None)
    if preferred is not None:
        return Composer(options, preferred.provider, prefer[1] or preferred.models[0])
    chosen = next((o for o in enabled if o.provider != exclude), enabled[0] if enabled else None)
    return Composer(options, chosen.provider if chosen else "",
                    chosen.models[0] if chosen else "")


def last_served(conversation_id: Any) -> tuple[str, str]:
    """The provider and model of the conversation's last answer that names them (a fork's and
    a re-run's include the turns they copied), or ("", "")."""
    row = Turn.objects.filter(conversation_id=conversation_id, role=Turn.Role.AGENT).exclude(
        provider="").order_by("-index").values_list("provider", "model").first()
    return (row[0], row[1]) if row else ("", "")


@dataclass(frozen=True)
class Route:
    """Where a provider's requests go, and how they authenticate (the key is read from the
    environment here and only put in the request's headers)."""

    provider: str
    recorded: bool

    @property
    def service(self) -> services.Service | None:
        return None if self.provider in PROVIDERS else services.find(self.provider)

    @property
    def wire(self) -> str:
        """The provider whose wire format the service speaks (its adapter, its error shape)."""
        return self.provider if self.provider in PROVIDERS else services.WIRE

    def url(self, request: UpstreamRequest) -> str:
        if self.recorded:
            full = recorded_base() + "/" + request.path.lstrip("/")
            return f"{full}?{request.query}" if request.query else full
        service = self.service
        if service is not None:
            request = services.upstream_request(service, request)
        return client.url(self.provider, request.path, request.query)

    def headers(self, request: UpstreamRequest) -> list[tuple[bytes, bytes]]:
        out = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers]
        service = self.service
        if service is not None:
            secret = services.key(service)
            if secret:
                name, value = services.auth_header(service, secret)
                out.append((name.encode(), value.encode("latin-1")))
            return out
        key = "" if self.recorded else _key(self.provider)
        if key:
            name, value = registry.get(self.provider).auth_header(key)
            out.append((name.encode(), value.encode("latin-1")))
        return out
