"""Cited domains: which host names a "cited domain" filter accepts, and which source URLs are on
such a host or one of its subdomains. The API checks a filter's host name with ``DOMAIN`` (the
filter itself goes through the ``site`` facets of ``conversations.search``); the admin's
``domain:`` search uses ``domain_regex`` (the ``Attribution.domain`` column is filled by
``url_domain``)."""

from __future__ import annotations

import re

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")


def domain_regex(domain: str) -> str:
    """A regex (valid for SQLite's Python REGEXP and PostgreSQL's ~*) matching URLs whose host is
    ``domain`` or a subdomain of it. ``domain`` is already validated: only [a-z0-9.-]."""
    host = domain.replace(".", r"\.")
    return rf"^[a-z][a-z0-9+.-]*://([^/?#@]*@)?([^/?#@]*\.)?{host}(:[0-9]+)?([/?#]|$)"
