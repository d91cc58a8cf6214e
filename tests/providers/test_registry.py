"""One home per provider: the registry lists every provider, each satisfies ``Provider``, and
no code outside ``providers/`` names a provider except the places listed (with why) below."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

import providers
from providers import registry
from providers.provider import Provider
from tests.support import REPO

# The names of providers and of the services that speak their wire formats.
PROVIDER_NAMES = {"anthropic", "openai", "google", "gemini", "claude", "xai", "groq", "deepseek",
                  "azure", "vertex", "openrouter", "perplexity", "mistral", "together"}

# File -> (how many provider literals it holds, why they stay there). The count makes a new
# literal in a listed file fail too, and a stale entry fails when the literals leave.
EXCEPTIONS: dict[str, tuple[int, str]] = {
    "turnscope/settings.py": (5, "each provider's TURNSCOPE_UPSTREAM_* environment variable: "
                              "settings are read before any app code is imported"),
    "otlp/spans.py": (25, "OpenTelemetry's gen_ai.system vocabulary (a standard's names for "
                      "systems, mapped onto the registered providers)"),
    "importers/chatgpt.py": (1, "a ChatGPT export is OpenAI's product: its turns were served "
                             "by OpenAI"),
    "importers/claude_ai.py": (1, "a claude.ai export is Anthropic's product"),
    "importers/vcr.py": (8, "the API hosts a VCR cassette's requests went to"),
    "live/recorded_provider.py": (4, "which bundled sample the demo's recorded provider serves "
                                  "per provider"),
    "live/services.py": (2, "the wire the OpenAI-compatible services speak, and the Azure "
                         "platform's name (its key variable, api-key header, /openai prefix)"),
    "proxy/endpoints.py": (15, "the routes of the platforms (Azure, Vertex AI: which path is "
                           "which provider's wire) and of the named OpenAI-compatible upstreams"),
    "upstream/hosts.py": (14, "the services the proxy forwards to (Azure, Vertex AI, named "
                          "upstreams) and the wire each speaks"),
    "bench/ingest.py": (3, "a benchmark reads each provider's bundled recordings"),
    "bench/live_servers.py": (4, "a benchmark serves recordings under each provider's path"),
    "bench/long.py": (1, "a benchmark's made-up stored turn"),
    "bench/proxy.py": (2, "a benchmark serves an Anthropic recording"),
    "bench/render.py": (2, "a benchmark's made-up conversation documents"),
    "bench/sources.py": (1, "a benchmark's fallback when the store names no served model"),
}


def _literals() -> Counter[str]:
    """Provider names as whole string literals, per file, outside providers/, tests and
    migrations (docstrings and prose hold them freely: only a literal is code that decides)."""
    found: Counter[str] = Counter()
    for path in sorted(REPO.rglob("*.py")):
        relative = path.relative_to(REPO)
        top = relative.parts[0]
        if top.startswith(".") or top in ("providers", "tests") or "migrations" in relative.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(relative))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.lower() in PROVIDER_NAMES):
                found[relative.as_posix()] += 1
    return found


def test_no_provider_literal_outside_providers_but_the_listed_ones() -> None:
    found = _literals()
    unlisted = {f: n for f, n in found.items() if f not in EXCEPTIONS}
    assert not unlisted, f"provider names outside providers/: {unlisted} (reach them through "
    "providers.registry, or list the file in EXCEPTIONS with why)"
    counts = {f: found.get(f, 0) for f in EXCEPTIONS}
    assert counts == {f: n for f, (n, _) in EXCEPTIONS.items()}


def test_the_scan_finds_a_literal() -> None:
    tree = ast.parse('if provider == "openai": pass')
    assert any(isinstance(n, ast.Constant) and n.value in PROVIDER_NAMES for n in ast.walk(tree))


def test_every_provider_is_registered_once_with_its_package() -> None:
    names = registry.names()
    assert names == ("anthropic", "openai", "google")
    assert {n: f"providers.{n}" for n in names} == providers.ADAPTERS
    for provider in registry.providers():
        assert registry.get(provider.name) is provider
        assert provider.package == f"providers.{provider.name}"


def test_each_provider_satisfies_the_protocol() -> None:
    members = [name for name in dir(Provider) if not name.startswith("_")]
    members += list(Provider.__annotations__)
    for provider in registry.providers():
        missing = [m for m in members if not hasattr(provider, m)]
        assert not missing, f"{provider.name} lacks {missing}"


def test_an_unknown_provider_is_refused_by_name() -> None:
    assert registry.find("nobody") is None
    with pytest.raises(ValueError, match="unknown provider 'nobody'"):
        registry.get("nobody")
    with pytest.raises(ValueError, match="unknown provider"):
        providers.adapter("nobody")


def test_a_provider_registered_twice_is_refused() -> None:
    seen: dict[str, Provider] = {}

    def register(provider: Provider) -> None:
        assert provider.name not in seen
        seen[provider.name] = provider

    registry.register_providers(register)
    assert list(seen) == list(registry.names())
    with pytest.raises(ValueError, match="registered twice"):
        registry._register(registry.get("openai"))


def test_every_provider_package_exists() -> None:
    for name in registry.names():
        assert (REPO / "providers" / name / "provider.py").is_file()
