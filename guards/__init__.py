"""What guards every way in, without Django: secrets redaction (``guards.redaction``) and the
fixed-window rate limits (``guards.ratelimit``, counted in a cache the caller hands in).

Low in the layers (only ``streams`` is below it): the proxy, the live runner, the importers'
callers, ``upstream`` and the API all use it, and it knows none of them."""
