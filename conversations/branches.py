"""Branches: where the conversations of one fork tree part ways, seen from any of them.

A fork (Fork here, a re-run, an imported ChatGPT or Claude.ai branch) holds turns 0..at_turn
of the conversation it came from, then its own. So at index ``at_turn + 1`` the fork and its
source answer differently: that turn is a branch point. Seen from a conversation X, the
branches at index i are the conversations whose turn i is their own (not a copy) and that
share turns 0..i-1 with X: the one X's turns 0..i-1 come from (the "original" there) and every
conversation forked from that family at i-1. This is worked out both ways: from the original
(its forks) and from a fork (its source and its siblings).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from conversations.models import Conversation, Turn

MAX_TREE = 500  # conversations read of one fork tree (an import's branches are far fewer)
MAX_DEPTH = 100


@dataclass
class Branch:
    conversation_id: Any
    title: str
    turn_id: Any
    current: bool


@dataclass
class BranchPoint:
    """The branches at turn ``index`` of the conversation being read, oldest first."""

    index: int
    branches: list[Branch] = field(default_factory=list)

    @property
    def position(self) -> int:
        return next(n for n, b in enumerate(self.branches, start=1) if b.current)

    @property
    def previous(self) -> Branch | None:
        n = self.position
        return self.branches[n - 2] if n > 1 else None

    @property
    def next(self) -> Branch | None:
        n = self.position
        return self.branches[n] if n < len(self.branches) else None


@dataclass
class _Node:
    pk: Any
    title: str
    parent: Any
    at: int  # the last turn shared with the parent (-1: none); unused without a parent
    owner_id: Any
    created_at: Any


_FIELDS = ("pk", "title", "forked_from_id", "forked_at_turn", "owner_id", "created_at")


def _node(row: tuple[Any, ...]) -> _Node:
    pk, title, parent, at, owner_id, created_at = row
    return _Node(pk, title, parent, -1 if at is None else at, owner_id, created_at)


def _tree(conversation: Conversation) -> dict[Any, _Node]:
    """Every conversation of ``conversation``'s fork tree (bounded), by id."""
    nodes = {conversation.pk: _Node(conversation.pk, conversation.title,
                                    conversation.forked_from_id,
                                    -1 if conversation.forked_at_turn is None
                                    else conversation.forked_at_turn,
                                    conversation.owner_id, conversation.created_at)}
    root = nodes[conversation.pk]
    for _ in range(MAX_DEPTH):
        if root.parent is None:
            break
        row = Conversation.objects.filter(pk=root.parent).values_list(*_FIELDS).first()
        if row is None:
            root.parent = None
            break
        root = nodes.setdefault(row[0], _node(row))
    frontier = [root.pk]
    explored = {root.pk}  # (the ancestors read on the way up are explored on the way down)
    for _ in range(MAX_DEPTH):
        if not frontier or len(nodes) >= MAX_TREE:
            break
        rows = Conversation.objects.filter(forked_from__in=frontier).order_by(
            "created_at", "pk").values_list(*_FIELDS)[:MAX_TREE]
        frontier = []
        for row in rows:
            if row[0] not in explored:
                nodes.setdefault(row[0], _node(row))
                explored.add(row[0])
                frontier.append(row[0])
    for node in nodes.values():  # a parent outside what was read is no parent here
        if node.parent is not None and node.parent not in nodes:
            node.parent = None
    return nodes


def branch_points(conversation: Conversation, user: Any, indexes: range
                  ) -> dict[int, BranchPoint]:
    """The branch points of ``conversation`` among turn ``indexes``, with the branches
    ``user`` may open (a point with one such branch is none)."""
    if conversation.forked_from_id is None and not conversation.forks.exists():
        return {}
    nodes = _tree(conversation)
    children: dict[Any, list[_Node]] = defaultdict(list)
    for node in nodes.values():
        if node.parent is not None:
            children[node.parent].append(node)
    me = nodes[conversation.pk]
    candidates = sorted({n.at + 1 for n in nodes.values() if n.parent is not None}
                        & set(indexes))
    points: dict[int, list[_Node]] = {}
    origins: dict[int, Any] = {}
    for i in candidates:
        top = me  # the farthest up that still shares turns 0..i-1 with this conversation
        while top.parent is not None and top.at >= i - 1:
            top = nodes[top.parent]
        family, alternatives = [top], [top]
        while family:
            node = family.pop()
            for child in children[node.pk]:
                if child.at >= i - 1:
                    family.append(child)
                    if child.at == i - 1:
                        alternatives.append(child)
        origin = me  # the conversation this one's turn i was copied from, or this one
        while origin.parent is not None and origin.at >= i:
            origin = nodes[origin.parent]
        if len(alternatives) > 1:
            points[i] = alternatives
            origins[i] = origin.pk
    if not points:
        return {}
    visible = set(Conversation.objects.visible_to(user).filter(
        pk__in={n.pk for group in points.values() for n in group}).values_list("pk", flat=True))
    turns = {
        (c, i): t for c, i, t in Turn.objects.filter(
            conversation__in={n.pk for group in points.values() for n in group},
            index__in=list(points)).values_list("conversation_id", "index", "pk")
    }
    out = {}
    for i, group in points.items():
        branches = []
        for node in sorted(group, key=lambda n: (n.created_at, str(n.pk))):
            current = node.pk == origins[i]
            turn = turns.get((conversation.pk if current else node.pk, i))
            if turn is None or not (current or node.pk in visible):
                continue  # a fork with no turn of its own yet, or one the reader cannot open
            branches.append(Branch(conversation.pk if current else node.pk,
                                   conversation.title if current else node.title, turn,
                                   current))
        if len(branches) > 1 and any(b.current for b in branches):
            out[i] = BranchPoint(i, branches)
    return out
