"""Ids for new rows: UUIDv7 (RFC 9562), the creation time in milliseconds, then random bits.

Rows written together get neighbouring ids, so each insert lands on the same few index pages
(the tail of the primary key, of every foreign key index that holds it) where a random UUIDv4
would touch a random page of each: on a growing event log that is most of a commit's writes.
The 74 random bits keep ids unguessable and unique across processes.
"""

from __future__ import annotations

import os
import time
import uuid

_VERSION_7 = 7 << 76
_VARIANT = 0b10 << 62
_RAND_A = (1 << 12) - 1
_RAND_B = (1 << 62) - 1


def uuid7_ints(count: int) -> list[int]:
    """``count`` new UUIDv7 values as integers (one read of os.urandom for all of them)."""
    ms = time.time_ns() // 1_000_000
    head = (ms & 0xFFFF_FFFF_FFFF) << 80 | _VERSION_7 | _VARIANT
    raw = os.urandom(10 * count)
    out = []
    for at in range(0, 10 * count, 10):
        bits = int.from_bytes(raw[at : at + 10], "big")
        out.append(head | ((bits >> 62) & _RAND_A) << 64 | (bits & _RAND_B))
    return out


def uuid7() -> uuid.UUID:
    """A new UUIDv7 (the default id of every conversation, turn, event and payload)."""
    return uuid.UUID(int=uuid7_ints(1)[0])
