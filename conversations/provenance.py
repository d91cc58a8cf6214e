"""Per-turn model provenance: ``agent.model = {provider, model}``.

Recorded once from the response (the served model), never re-resolved, never a secret.
"""

from __future__ import annotations

import re

from guards import redaction

_PROVIDER = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
# Beyond the credential shapes redaction knows: a model name has separators, a key does not.
_KEY_LIKE_RUN = re.compile(r"[A-Za-z0-9+=]{32,}")


class ProvenanceError(ValueError):
    """A provenance value is missing, malformed or looks like a credential."""


def agent_model(provider: str, model: str) -> dict[str, str] | None:
    """The ``agent.model`` object for a turn's stored provider and model (None when unknown)."""
    return {"provider": provider, "model": model} if provider and model else None


def looks_secret(value: str) -> bool:
    return redaction.looks_secret(value) or bool(_KEY_LIKE_RUN.search(value))


def validate(role: str, provider: str, model: str) -> None:
    """Raise ``ProvenanceError`` unless (provider, model) is valid for a turn of ``role``.

    Both empty means "unknown provenance", allowed on any turn. Otherwise the turn must be an
    agent turn and both values must be non-empty, identifier-shaped and not secret-shaped.
    """
    if not provider and not model:
        return
    if role != "agent":
        raise ProvenanceError(f"provenance is only recorded on agent turns, not {role!r} turns")
    for label, value, shape in (("provider", provider, _PROVIDER), ("model", model, _MODEL)):
        if not value:
            raise ProvenanceError(f"provenance needs both provider and model ({label} is empty)")
        if looks_secret(value):
            raise ProvenanceError(f"the {label} looks like a credential; refusing to store it")
        if not shape.match(value):
            raise ProvenanceError(f"the {label} {value[:80]!r} is not a valid identifier")
