"""What a recorded upstream served, and whether a request sends it back unchanged.

A provider that gets its own earlier output back (the paused message after ``pause_turn``, the
previous answer before the next question) checks it: a thinking block whose signature does not
verify, a search result without its ``encrypted_content`` or a Gemini part without its
``thoughtSignature`` is refused. ``RecordedUpstream(verify_replay=True)`` does the same with
``refusal``: it keeps the content of every response it served and answers 400, in the
provider's error shape, a request that sends any of it back changed, cut or reordered.

What a client holds of a response, and each provider's rules, are the provider's own
(``Provider.stand_in``, ``providers/<p>/standin.py``: rebuilt from the wire the way its SDK
accumulates it, independently of the adapters); the comparing is here, the same for all.

A served response counts as sent back when the request holds one of its blocks (by id, tool use
id, signature, data or text) or its text inside an assistant message; it must then be there
whole, in order and contiguous, every field as served (null and absent fields are the same).

A response the client hung up on before its last byte (``Served.cut``: Stop, a dropped
connection) was never held whole, so it may come back only as its provider's documentation
accepts after a cut answer (``StandIn.recoverable`` and ``cut_piece``): its first blocks whole
and unchanged, then at most the text that streamed of the one it was cut in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from providers import registry
from providers.standin import Served, StandIn, Unit
from providers.standin import keys as block_keys
from providers.wire import DONE, MalformedInput, read

__all__ = ["Served", "refusal", "served_content"]


def served_content(provider: str, body: bytes) -> Served | None:
    """The content of one served response body (None when it holds none: an error)."""
    found = registry.find(provider)
    if found is None:
        return None
    try:
        return found.stand_in.served([data for _, data, _ in read(body).rows if data is not DONE])
    except (MalformedInput, KeyError, TypeError, AttributeError, orjson.JSONDecodeError):
        return None  # not a response this rebuild can read: nothing to check it against


_QUOTED = 16  # characters of an assistant message found in a served text: that text, sent back


def _contains(haystack: list[bytes], needle: list[bytes]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def refusal(provider: str, body: Any, served: Iterable[Served]) -> str | None:
    """Why the request ``body`` must be refused: a rule of the provider's it breaks, or the
    first served response it sends back changed; None when it sends every one it refers to
    back in a form the provider accepts."""
    found = registry.find(provider)
    if found is None or not isinstance(body, dict):
        return None
    stand_in = found.stand_in
    try:
        return stand_in.unpaired(body) or _refusal(stand_in, provider, body, served)
    except (TypeError, AttributeError, ValueError):
        return "the request's messages are not in the provider's shape"


def _canonical(stand_in: StandIn, blocks: Iterable[dict[str, Any]]) -> list[bytes]:
    return [u.canonical for u in stand_in.units(blocks)]


def _cut_form(stand_in: StandIn, response: Served, message: list[dict[str, Any]],
              body: dict[str, Any]) -> bool:
    """Whether ``message`` holds the cut ``response`` as its provider accepts it: the part of
    the message that is the response's is its first blocks as ``recoverable`` keeps them,
    then at most a cut piece of the next one."""
    units = stand_in.units(message)
    served = stand_in.units(stand_in.returnable(response.blocks, body))
    keys = frozenset().union(*(u.keys for u in served))
    said = [u.text.strip() for u in served if u.text.strip()]

    def mine(unit: Unit) -> bool:
        text = unit.text.strip()
        return bool(unit.keys & keys) or (bool(text) and any(
            text == s or (len(text) >= _QUOTED and text in s)
            or (len(s) >= _QUOTED and s in text) for s in said))

    units = [u for u in units if not stand_in.pairing_judges(u.block)]
    held = [n for n, u in enumerate(units) if mine(u)]
    if not held:
        return True
    span = [u.canonical for u in units[held[0]:held[-1] + 1]]
    for whole in range(len(served) + 1):
        expected = [u.canonical for u in stand_in.recoverable(served, whole)
                    if not stand_in.pairing_judges(u.block)]
        if span == expected:
            return True
        if (whole < len(served) and span[:-1] == expected
                and stand_in.cut_piece(units[held[-1]], served[whole])):
            return True
    return False


def _refusal(stand_in: StandIn, provider: str, body: dict[str, Any], served: Iterable[Served]
             ) -> str | None:
    messages = stand_in.sent_back(body)
    if not messages:
        return None
    keys: set[str] = set()
    texts: list[str] = []
    for message in messages:
        for block in message:
            keys |= block_keys(block)
        texts.append("\n".join(stand_in.text(b) for b in message))
    canonical = [_canonical(stand_in, message) for message in messages]
    api = stand_in.api(body)
    for number, response in enumerate(served):
        if response.provider != provider or response.api != api:
            continue
        mine = set().union(*(block_keys(b) for b in response.blocks))
        said = [t.strip() for t in (stand_in.text(b) for b in response.blocks) if t.strip()]
        # Sent back: one of its blocks by id, or its text in an assistant message, or an
        # assistant message's text (cut or edited) inside it.
        if not (mine & keys or any(s in t or (len(t.strip()) >= _QUOTED and t.strip() in s)
                                   for s in said for t in texts)):
            continue
        returnable = stand_in.returnable(response.blocks, body)
        if any(_contains(c, _canonical(stand_in, whole)) for c in canonical
               for whole in stand_in.whole_forms(returnable)):
            continue
        if response.variants and any(_contains(c, _canonical(stand_in, stand_in.returnable(
                _with_variants(response), body))) for c in canonical):
            continue
        if response.cut:
            variants = [response, *([Served(provider, tuple(_with_variants(response)))]
                                    if response.variants else [])]
            if all(any(_cut_form(stand_in, v, m, body) for v in variants) for m in messages):
                continue
            return (f"the request sends back served response {number + 1}, which was cut, "
                    "in a form its provider does not accept after a cut: its first blocks "
                    "whole and unchanged, then at most the text that streamed of the one it "
                    "was cut in")
        return (f"the request sends back served response {number + 1} changed: its "
                f"{len(response.blocks)} blocks must come back whole, in order and unchanged")
    return None


def _with_variants(response: Served) -> list[dict[str, Any]]:
    variants = dict(response.variants)
    return [variants.get(str(b.get("id")), b) for b in response.blocks]
