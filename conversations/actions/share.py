"""Sharing a conversation: a link made, moved to now, or revoked (the conversation's Share, the
shared links page, the API). Each is announced to the owner's open pages that list links."""

from __future__ import annotations

from typing import Any

from conversations import sharing
from conversations.actions import announce
from conversations.models import Conversation, Share


def _message(op: str, share: Share) -> dict[str, Any]:
    return {"type": "share", "op": op, "share": str(share.pk),
            "conversation": str(share.conversation_id), "turn_count": share.turn_count}


def share_conversation(conversation: Conversation, owner: Any, *, expires: str = "never",
                       include_reasoning: bool = True) -> tuple[Share, str]:
    """``sharing.create``: the share and its token. The token is not announced (a page shows
    it from the server, sealed in the database, never through the channel layer)."""
    share, token = sharing.create(conversation, owner, expires=expires,
                                  include_reasoning=include_reasoning)
    announce.announce(_message("add", share), owner=share.owner_id)
    return share, token


def update_share(share: Share) -> Share:
    """``sharing.update``: the same link shows the conversation as it stands now."""
    sharing.update(share)
    announce.announce(_message("update", share), owner=share.owner_id)
    return share


def revoke_share(share: Share) -> None:
    """``sharing.revoke``: the link stops working now."""
    sharing.revoke(share)
    announce.announce(_message("remove", share), owner=share.owner_id)
