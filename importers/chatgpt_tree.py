"""A ChatGPT export's message tree (``mapping``): node ids to message nodes linked by
``parent`` and ``children``, read defensively (a missing parent, a cycle, a child that names
itself end a walk rather than break it), and how many turns two threads of it share."""

from __future__ import annotations

from typing import Any

from importers.base import ImportedTurn


class MessageTree:
    def __init__(self, mapping: dict[str, Any]) -> None:
        self.nodes = {k: v for k, v in mapping.items()
                      if isinstance(k, str) and isinstance(v, dict)}

    def parent(self, node_id: str) -> str | None:
        parent = self.nodes[node_id].get("parent")
        return parent if isinstance(parent, str) and parent in self.nodes else None

    def children(self, node_id: str) -> list[str]:
        children = self.nodes[node_id].get("children")
        if not isinstance(children, list):
            return []
        return [c for c in children if isinstance(c, str) and c in self.nodes and c != node_id]

    def path(self, leaf: str) -> list[str]:
        """Root .. leaf, following ``parent`` links (a cycle or a missing parent ends it)."""
        path, seen = [], set()
        node: str | None = leaf
        while node is not None and node not in seen:
            seen.add(node)
            path.append(node)
            node = self.parent(node)
        path.reverse()
        return path

    def leaves(self) -> list[str]:
        """Nodes without children, in the tree's order (a parent's children in their order)."""
        out, seen = [], set()
        stack = list(reversed(self.orphan_roots()))
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            children = [c for c in self.children(node) if self.parent(c) == node]
            if not children:
                out.append(node)
            stack.extend(reversed(children))
        return out

    def orphan_roots(self) -> list[str]:
        return [n for n in self.nodes if self.parent(n) is None]

    def latest_leaf(self) -> str | None:
        leaves = self.leaves()
        if not leaves:
            return None

        def created(node: str) -> float:
            message = self.nodes[node].get("message")
            value = message.get("create_time") if isinstance(message, dict) else None
            return float(value) if isinstance(value, int | float) else 0.0

        return max(reversed(leaves), key=created)

    def message(self, node_id: str) -> dict[str, Any] | None:
        message = self.nodes[node_id].get("message")
        return message if isinstance(message, dict) else None


def shared_turns(main: list[tuple[tuple[str, ...], ImportedTurn]],
            branch: list[tuple[tuple[str, ...], ImportedTurn]]) -> int:
    """How many leading turns two threads share (the same messages, by node id)."""
    count = 0
    for (a, _), (b, _) in zip(main, branch, strict=False):
        if a != b:
            break
        count += 1
    return count
