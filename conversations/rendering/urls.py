"""Which URLs a link may have: the one URL policy of the sanitizer and the markdown parser.

Bleach's own URL check uses a vendored old ``urlparse`` that reads ``javascript:123`` as a
host and port, so it keeps it. Every URL is checked here with the modern ``urllib.parse``
first, as a browser would read it (``browser_url``).
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})

# What a browser strips before parsing a URL: leading/trailing C0 controls and spaces, and every
# ASCII tab or newline anywhere (so "java\tscript:" is "javascript:").
_URL_EDGE = "".join(chr(c) for c in range(0x21))
_URL_TAB_NL = str.maketrans("", "", "\t\n\r")


def browser_url(value: str) -> str:
    """The URL string as a browser would parse it (entities already decoded)."""
    return value.strip(_URL_EDGE).translate(_URL_TAB_NL)


@lru_cache(maxsize=4096)
def is_allowed_url(value: str, *, allow_fragment: bool = False) -> bool:
    """True for an absolute http, https or mailto URL (and a bare ``#fragment`` if asked).

    Relative URLs are refused: model text has no business linking into this app, and a
    protocol-relative ``//evil.example`` (or its backslash spellings) is an external link in
    disguise.
    """
    url = browser_url(value)
    if not url:
        return False
    if url.startswith("#"):
        return allow_fragment
    if url[:2].replace("\\", "/") == "//":
        return False
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            parts.port  # noqa: B018 -- raises on a port a browser would refuse too
    except ValueError:
        return False
    if scheme in ("http", "https"):
        # "https:evil.example" and "https:/x" are still https links in a browser; fine.
        return True
    return scheme == "mailto"


# Query parameters a provider appends to every link it reports (OpenAI: utm_source=openai):
# dropped from what is shown and linked; the payload and the source's identity keep them.
PROVIDER_TRACKING = frozenset({"utm_source=openai"})


def shown_url(value: object) -> str:
    """A URL as shown or linked: without the provider's own tracking parameter."""
    if not isinstance(value, str) or "?" not in value:
        return value if isinstance(value, str) else ""
    head, _, rest = value.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    kept = [part for part in query.split("&") if part and part not in PROVIDER_TRACKING]
    if len(kept) == len([p for p in query.split("&") if p]):
        return value
    return head + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
