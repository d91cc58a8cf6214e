"""Shares: a read-only link to a snapshot of a conversation, for anyone who holds it.

The business actions (make, update, revoke) and what the shared page and exports read. A share
shows the portable projection only (never payloads or replay values), as the conversation stood
when it was shared: the turns finished by then, their events up to the seq it had reached.

The token is 256 bits from ``secrets``. It is never stored: its SHA-256 finds the share, and a
sealed copy (the token XOR a pad that is ``salted_hmac(SECRET_KEY, share id)``) lets the
owner's list show and copy the link again. Storing only the hash would make the link a
show-once secret; owners asked to list and copy their links. Storing the token would let
anyone who reads the database (a dump, a backup, a replica, a staff user with SQL) open every
share. With the pad, that takes SECRET_KEY as well. The links keep working when SECRET_KEY
changes (the hash finds them); the list then unseals with ``SECRET_KEY_FALLBACKS`` and, past
those, says the link can no longer be shown (revoke it and share again).

``TURNSCOPE_SHARING=0`` turns sharing off: no Share button, every link a 404, the API refuses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import salted_hmac

from conversations.models import Conversation, Share, Turn
from conversations.projections import Snapshot

TOKEN_BYTES = 32
_PAD_SALT = "turnscope.conversations.sharing.token"
# The choices a share's expiry offers: days from now (None: never).
EXPIRY_DAYS: dict[str, int | None] = {"never": None, "1d": 1, "7d": 7, "30d": 30}
EXPIRY_LABELS = {"never": "Never", "1d": "1 day", "7d": "7 days", "30d": "30 days"}


class SharingDisabled(RuntimeError):
    """``TURNSCOPE_SHARING=0``: this instance makes and serves no shares."""


def enabled() -> bool:
    return bool(getattr(settings, "TURNSCOPE_SHARING", True))


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _pad(share_id: Any, secret: str | None = None) -> bytes:
    return salted_hmac(_PAD_SALT, str(share_id), secret=secret, algorithm="sha256").digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def token_of(share: Share) -> str | None:
    """The share's token, unsealed; None when no key this server holds (SECRET_KEY, its
    fallbacks) opens it."""
    try:
        sealed = binascii.unhexlify(share.sealed_token)
    except (binascii.Error, ValueError):
        return None
    for secret in (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())):
        token = _encode(_xor(sealed, _pad(share.pk, secret)))
        if secrets.compare_digest(_hash(token), share.token_hash):
            return token
    return None


def _new_token(share: Share) -> str:
    raw = secrets.token_bytes(TOKEN_BYTES)
    token = _encode(raw)
    share.token_hash = _hash(token)
    share.sealed_token = _xor(raw, _pad(share.pk)).hex()
    return token


def _horizon(conversation: Conversation) -> tuple[int, int]:
    """(turn count, last seq) of the conversation as it stands: the turns finished now (up to
    the first still streaming, which a snapshot leaves out) and the last seq handed out."""
    streaming = conversation.turns.filter(status=Turn.Status.STREAMING) \
        .order_by("index").values_list("index", flat=True).first()
    count = conversation.turns.count() if streaming is None else streaming
    next_seq = Conversation.objects.filter(pk=conversation.pk) \
        .values_list("next_seq", flat=True).get()
    return count, next_seq - 1


def expiry_from(choice: str) -> Any:
    """``expires_at`` for an expiry choice (``EXPIRY_DAYS``); ValueError for another."""
    if choice not in EXPIRY_DAYS:
        raise ValueError(f"expiry must be one of {', '.join(EXPIRY_DAYS)}")
    days = EXPIRY_DAYS[choice]
    return None if days is None else timezone.now() + timedelta(days=days)


def create(conversation: Conversation, owner: Any, *, expires: str = "never",
           include_reasoning: bool = True) -> tuple[Share, str]:
    """Share ``conversation`` as it stands now; returns the share and its token (the link is
    ``/s/<token>/``). The caller checks that ``owner`` owns it."""
    if not enabled():
        raise SharingDisabled("sharing is turned off on this instance")
    expires_at = expiry_from(expires)
    count, last_seq = _horizon(conversation)
    share = Share(conversation=conversation, owner=owner, turn_count=count, last_seq=last_seq,
                  include_reasoning=include_reasoning, expires_at=expires_at)
    token = _new_token(share)
    share.save(force_insert=True)
    return share, token


def update(share: Share) -> Share:
    """Move the snapshot to the conversation as it stands now (same link, same options)."""
    if not enabled():
        raise SharingDisabled("sharing is turned off on this instance")
    count, last_seq = _horizon(share.conversation)
    share.turn_count, share.last_seq, share.snapshot_at = count, last_seq, timezone.now()
    Share.objects.filter(pk=share.pk).update(turn_count=count, last_seq=last_seq,
                                             snapshot_at=share.snapshot_at)
    return share


def revoke(share: Share) -> None:
    """The link stops working now: the share is deleted (its token with it). The page is
    read from the database on each request and sent ``no-store``, so nothing serves it after."""
    Share.objects.filter(pk=share.pk).delete()


def find(token: str) -> Share | None:
    """The live share behind ``token``: None when sharing is off, or the token names no share,
    or it expired."""
    if not enabled() or not token or len(token) > 200:
        return None
    share = Share.objects.select_related("conversation").filter(token_hash=_hash(token)).first()
    if share is None or share.expired:
        return None
    if share.conversation.owner_id != share.owner_id:
        return None  # the conversation changed hands: its former owner's links stop
    return share


def owned_with_token(user: Any, token: str) -> Share | None:
    """``user``'s share behind ``token`` (expired or not: its owner may still revoke it)."""
    if not token or len(token) > 200:
        return None
    return Share.objects.select_related("conversation").filter(
        token_hash=_hash(token), owner_id=getattr(user, "pk", None)).first()


def record_view(share: Share) -> None:
    with transaction.atomic():
        Share.objects.filter(pk=share.pk).update(views=F("views") + 1)


def snapshot(share: Share) -> Snapshot:
    return Snapshot(share.turn_count, share.last_seq, share.include_reasoning)


def owned_by(user: Any) -> list[Share]:
    """``user``'s shares, newest first, each with ``token`` (None if it can no longer be
    unsealed) and ``turns_now`` (the conversation's turns today, to show a snapshot behind)."""
    shares = list(Share.objects.filter(owner=user).select_related("conversation")
                  .order_by("-created_at"))
    for share in shares:
        share.token = token_of(share)
        share.turns_now = share.conversation.turn_count
    return shares


@dataclass
class Related:
    """Other shared conversations a shared page may link to: the one it was forked from and
    its forks, each only when its owner shares it too (a live share, newest first)."""

    parent: str | None  # the parent's share token
    forks: list[tuple[str, str]]  # (title, token)


def _live(qs: Any) -> Any:
    now = timezone.now()
    return qs.filter(expires_at__isnull=True) | qs.filter(expires_at__gt=now)


def related(share: Share) -> Related:
    conversation = share.conversation
    parent = None
    if conversation.forked_from_id is not None:
        row = _live(Share.objects.filter(conversation_id=conversation.forked_from_id,
                                         owner_id=share.owner_id)).order_by("-created_at") \
            .first()
        parent = token_of(row) if row is not None else None
    forks: list[tuple[str, str]] = []
    seen = set()
    for row in _live(Share.objects.filter(conversation__forked_from=conversation,
                                          owner_id=share.owner_id)) \
            .select_related("conversation").order_by("-created_at")[:50]:
        if row.conversation_id in seen:
            continue
        seen.add(row.conversation_id)
        token = token_of(row)
        if token is not None:
            forks.append((row.conversation.title or "Untitled conversation", token))
    return Related(parent, forks)
