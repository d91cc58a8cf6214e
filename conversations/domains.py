"""Cited domains: which host names a "cited domain" filter accepts. The API and the admin's
``domain:`` search check a filter's host name with ``DOMAIN``; the filter itself goes through the
``site`` facets of ``conversations.search`` (the list) or the ``Attribution.domain`` column,
filled by ``url_domain`` (the admin)."""

from __future__ import annotations

import re

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")

