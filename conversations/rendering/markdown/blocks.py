"""Two small block plugins: GFM task lists and table column alignment.

``task_list_plugin`` — GFM task lists, as mdit-py-plugins' tasklists renders them (the same
classes, checkboxes disabled) but in one linear pass, with the checkbox named for assistive
technology, and citation boundaries that fall inside the ``[x] `` marker moved after it.

``table_align_plugin`` — markdown-it writes a column's alignment as ``style="text-align:…"``,
which the page's CSP does not apply; it becomes a class (``align-left|center|right``) that the
stylesheet styles.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from .sentinels import is_sentinel

_TASK = re.compile(r"\[([ xX])\][ \t]")
TASK_CHECKBOX = '<input type="checkbox" class="task-list-item-checkbox" disabled aria-label="Task"'


def _move_sentinels_after_marker(token: Token) -> None:
    """Sentinels inside a leading ``[x] `` move to just after it (text and inline content):
    the marker must be whole to be recognised."""
    first = token.children[0] if token.children else None
    if first is None or first.type != "text":
        return
    head = first.content[:16]
    if not any(is_sentinel(ch) for ch in head):
        return
    if not _TASK.match("".join(ch for ch in head if not is_sentinel(ch))[:4]):
        return
    for holder in (first, token):
        text = holder.content
        kept: list[str] = []
        moved: list[str] = []
        i = seen = 0
        while i < len(text) and seen < 4:
            (moved if is_sentinel(text[i]) else kept).append(text[i])
            seen += not is_sentinel(text[i])
            i += 1
        holder.content = "".join(kept) + "".join(moved) + text[i:]


def _task_lists(state: StateCore) -> None:
    """``list_item_open, paragraph_open, inline`` whose text starts with ``[ ]``/``[x]`` and a
    space: a task. One pass with a stack of open lists (mdit-py-plugins' tasklists looks
    each item's list up backwards, quadratic in the number of items)."""
    tokens = state.tokens
    lists: list[int] = []
    for i, token in enumerate(tokens):
        if token.type in ("bullet_list_open", "ordered_list_open"):
            lists.append(i)
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            if lists:
                lists.pop()
        elif (token.type == "inline" and i >= 2 and tokens[i - 1].type == "paragraph_open"
              and tokens[i - 2].type == "list_item_open" and token.children):  # fmt: skip
            _move_sentinels_after_marker(token)
            first = token.children[0]
            match = _TASK.match(first.content) if first.type == "text" else None
            if match is None:
                continue
            checked = " checked" if match.group(1) in "xX" else ""
            box = Token("html_inline", "", 0, content=f"{TASK_CHECKBOX}{checked}>")
            first.content = first.content[3:]
            token.content = token.content[3:]
            token.children.insert(0, box)
            tokens[i - 2].attrSet("class", "task-list-item")
            if lists:
                tokens[lists[-1]].attrSet("class", "contains-task-list")


def task_list_plugin(md: MarkdownIt) -> None:
    """GFM task lists (``- [ ] to do`` / ``- [x] done``) with disabled checkboxes, named for
    assistive technology: the page is a record, not a form."""
    md.core.ruler.after("inline", "task_lists", _task_lists)


_ALIGN = {f"text-align:{side}": f"align-{side}" for side in ("left", "center", "right")}


def _align_classes(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and token.attrs:
            style = token.attrs.pop("style", None)
            if isinstance(style, str) and style.replace(" ", "") in _ALIGN:
                token.attrSet("class", _ALIGN[style.replace(" ", "")])


def table_align_plugin(md: MarkdownIt) -> None:
    """Table column alignment as classes instead of inline styles."""
    md.core.ruler.after("block", "table_align", _align_classes)
