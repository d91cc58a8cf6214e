"""The services Turnscope sends provider requests to, by the name the proxy serves them under
(``/proxy/<name>/…``) and a live call names them by.

* ``anthropic``, ``openai``, ``google``: the providers' own APIs (``TURNSCOPE_UPSTREAM_*``).
* ``azure``: Azure OpenAI (``TURNSCOPE_UPSTREAM_AZURE``, the resource's endpoint, e.g.
  ``https://my-resource.openai.azure.com``): OpenAI's wire formats under
  ``/openai/deployments/<d>/chat/completions?api-version=…`` and ``/openai/v1/…``.
* ``vertex``: Vertex AI (``TURNSCOPE_UPSTREAM_VERTEX``; unset, the regional endpoint the path's
  ``locations/<l>`` names, ``https://<l>-aiplatform.googleapis.com``, or
  ``https://aiplatform.googleapis.com`` for ``global``): Gemini under
  ``…/publishers/google/models/<m>:generateContent``, Claude under
  ``…/publishers/anthropic/models/<m>:rawPredict`` / ``:streamRawPredict``.
* Named OpenAI-compatible upstreams from one setting, ``TURNSCOPE_UPSTREAMS`` =
  ``xai=https://api.x.ai,groq=https://api.groq.com/openai,…``: the name is the proxy prefix
  and the provider ``agent.model`` names (``providers.served``).

``wire`` is the adapter that reads a service's answers (and whose error shape it speaks);
``served_by`` what ``agent.model`` says served them (None for the three providers' own APIs:
the response and its host say).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from providers import registry

OWN = registry.names()
PLATFORMS = ("azure", "vertex")
RESERVED = (*OWN, *PLATFORMS, "t")  # "t" is the proxy's path-token prefix
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_LOCATION = re.compile(r"/locations/([a-z0-9-]+)/")
VERTEX_GLOBAL = "https://aiplatform.googleapis.com"


@dataclass(frozen=True)
class Host:
    name: str
    wire: str  # "anthropic" | "openai" | "google"; vertex: decided per path (``wire_for``)
    served_by: str | None


def parse_upstreams(value: str) -> dict[str, str]:
    """``TURNSCOPE_UPSTREAMS`` (``name=url,name=url``) as a dict; ``ImproperlyConfigured`` for
    a name that cannot be one (or is taken) and a URL that is not http(s)."""
    out: dict[str, str] = {}
    for item in (piece.strip() for piece in value.split(",")):
        if not item:
            continue
        name, sep, url = (part.strip() for part in item.partition("="))
        if not sep or not _NAME.match(name) or name in RESERVED:
            raise ImproperlyConfigured(
                f"TURNSCOPE_UPSTREAMS: {item!r} is not name=https://host (a name of lower-case "
                f"letters, digits, '-' or '_', not one of {', '.join(RESERVED)})")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise ImproperlyConfigured(
                f"TURNSCOPE_UPSTREAMS: {name}'s URL {url!r} is not an http(s) base URL")
        if name in out:
            raise ImproperlyConfigured(f"TURNSCOPE_UPSTREAMS names {name!r} twice")
        out[name] = url.rstrip("/")
    return out


def _configured() -> dict[str, str]:
    found = getattr(settings, "TURNSCOPE_UPSTREAM", {}) or {}
    return {k: v for k, v in found.items() if v}


def named() -> dict[str, str]:
    """The named OpenAI-compatible upstreams: name -> base URL."""
    return dict(getattr(settings, "TURNSCOPE_UPSTREAMS", {}) or {})


def find(name: str) -> Host | None:
    """The service served as ``name``, or None (unknown, or Azure without its endpoint)."""
    if name in OWN:
        return Host(name, name, None)
    if name == "azure":
        return Host("azure", "openai", "azure") if _configured().get("azure") else None
    if name == "vertex":
        return Host("vertex", "", "vertex")
    if name in named():
        return Host(name, "openai", name)
    return None


def names() -> list[str]:
    """Every name ``find`` knows now, in the order the README lists them."""
    return [n for n in (*OWN, *PLATFORMS, *named()) if find(n) is not None]


def wire_for(host: Host, path: str) -> str:
    """The adapter of a request to ``path`` below ``host``'s prefix."""
    if host.wire:
        return host.wire
    return "anthropic" if "/publishers/anthropic/" in path else "google"


def base_url(host: Host, path: str = "") -> str:
    """Where ``host``'s requests go (no trailing slash)."""
    if host.name in named():
        return named()[host.name]
    configured = _configured().get(host.name, "")
    if configured or host.name != "vertex":
        return configured.rstrip("/")
    match = _LOCATION.search(path)
    location = match.group(1) if match else "global"
    return VERTEX_GLOBAL if location == "global" else f"https://{location}-aiplatform.googleapis.com"
