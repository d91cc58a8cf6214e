"""Which paths below a provider's prefix the proxy forwards, and how.

A path is forwarded only to where it says: no ``.`` or ``..`` segment (in any encoding: the
server decodes once, the upstream may decode again), no control character (a CR/LF would split
the request line; httpx refuses it with an error, not an answer). What is forwarded is exactly
the path that decided whether the exchange is recorded: duplicate slashes are folded (the
upstream URL joins the path to its base with one), and the path is percent-encoded again so that
a ``%3F`` or ``%23`` stays part of the path instead of starting a query or a fragment upstream.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SLASHES = re.compile(r"/{2,}")
# RFC 3986 pchar, less "%": what may stand in a path segment as it is.
_SAFE = "/:@!$&'()*+,;=-._~"


def refusal(path: str) -> str | None:
    """Why ``path`` (decoded, below the provider's prefix) is not forwarded, or None."""
    decoded = path
    for _ in range(4):  # %252e%252e is ".." after two decodings; stop when nothing changes
        if _CONTROL.search(decoded):
            return "The path holds a control character (CR, LF...)."
        if any(segment in (".", "..") for segment in decoded.replace("\\", "/").split("/")):
            return "The path holds a '.' or '..' segment."
        again = unquote(decoded)
        if again == decoded:
            return None
        decoded = again
    return "The path is percent-encoded too many times over."


def normalized(path: str) -> str:
    """The path as it is checked against the recorded endpoints and forwarded."""
    return _SLASHES.sub("/", path)


def encoded(path: str) -> str:
    """``normalized(path)`` as it goes into the upstream URL."""
    return quote(normalized(path), safe=_SAFE)
