"""Function-call arguments that stream (Vertex ``streamFunctionCallArguments``): each
``partialArgs`` piece sets a value at its ``jsonPath``; a string piece with ``willContinue``
goes on in the next one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from providers.values import as_dict, as_list, as_str


@dataclass
class StreamedCall:
    """A function call whose arguments arrive in pieces (``partialArgs``, ``willContinue``)."""

    call_id: str
    name: str
    part: dict[str, Any]  # the first piece's part (its thoughtSignature, ...), without the call
    args: dict[str, Any] = field(default_factory=dict)
    continuing: set[str] = field(default_factory=set)  # jsonPaths whose string goes on


def apply_partial_args(call: StreamedCall, pieces: Any) -> None:
    """Set each ``partialArgs`` value at its ``jsonPath`` ($.a.b, $.a[0]); a string whose
    previous piece said ``willContinue`` goes on where it stopped."""
    for piece in map(as_dict, as_list(pieces)):
        path = as_str(piece.get("jsonPath"))
        steps = _json_path(path)
        if steps is None:
            continue
        if "stringValue" in piece:
            value: Any = as_str(piece.get("stringValue"))
            if path in call.continuing:
                value = _get(call.args, steps) + value if isinstance(
                    _get(call.args, steps), str) else value
        elif "numberValue" in piece:
            value = piece["numberValue"]
        elif "boolValue" in piece:
            value = piece["boolValue"]
        elif "nullValue" in piece:
            value = None
        else:
            continue
        if piece.get("willContinue") is True:
            call.continuing.add(path)
        else:
            call.continuing.discard(path)
        _put(call.args, steps, value)


_PATH_STEP = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\[[\"']([^\"']*)[\"']\]")


def _json_path(path: str) -> list[str | int] | None:
    """``$.a.b[0]`` as steps ["a", "b", 0]; None for a path this reader does not follow."""
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_STEP.match(path, position)
        if match is None:
            return None
        name, index, quoted = match.groups()
        steps.append(int(index) if index is not None else name if name is not None else quoted)
        position = match.end()
    return steps or None


def _get(root: dict[str, Any], steps: list[str | int]) -> Any:
    node: Any = root
    for step in steps:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return node


def _put(root: dict[str, Any], steps: list[str | int], value: Any) -> None:
    node: Any = root
    for step, following in zip(steps, [*steps[1:], None], strict=True):
        child: Any = value if following is None else [] if isinstance(following, int) else {}
        if isinstance(step, int):
            if not isinstance(node, list) or step > len(node):
                return  # an index past the end of what arrived: not a path this follows
            if step == len(node):
                node.append(child)
            elif following is None or not isinstance(node[step], list | dict):
                node[step] = child
        else:
            if not isinstance(node, dict):
                return
            if following is None or not isinstance(node.get(step), list | dict):
                node[step] = child
        node = node[step]
