"""Cited domains: which host names a "cited domain" filter accepts. The API and the admin's
``domain:`` search check a filter's host name with ``DOMAIN``; the filter itself goes through the
``site`` facets of ``conversations.search`` (the list) or the ``Attribution.domain`` column,
filled by ``url_domain`` (the admin). A source is found by the host its URL points at and by
the domain its title shows the reader (``source_domains``); a URL pasted in the filter is read
as its host (``query_domain``)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")



def host_of(url: str) -> str:
    """The host ``url`` points at, lower-cased, without a leading "www." ("" if none)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.rstrip(".").removeprefix("www.")[:255]


def reader_domain(title: str) -> str:
    """The domain a source's title shows the reader, when the title is a host name and nothing
    else (Gemini's grounding sources: their URL is a ``vertexaisearch.cloud.google.com``
    redirect, and the page shows ``web.title``, the site's domain); "" otherwise."""
    text = title.strip().lower().rstrip(".").removeprefix("www.")
    if "." not in text or len(text) > 253 or not DOMAIN.match(text):
        return ""
    return text if any(c.isalpha() for c in text.rsplit(".", 1)[1]) else ""  # no IP address


def source_domains(url: str, title: str, host: str | None = None) -> list[str]:
    """Every domain a source is found by: the host its URL points at (a redirect's host too)
    and the one its title shows the reader."""
    found = [host if host is not None else host_of(url), reader_domain(title)]
    return list(dict.fromkeys(d for d in found if d))


def query_domain(text: str) -> str:
    """A cited-domain filter as typed: a host name, or a URL pasted whole (its host)."""
    text = text.strip()
    if "/" in text or ":" in text:
        text = host_of(text if "//" in text else f"http://{text}")
    return text.lower().rstrip(".").removeprefix("www.")
