"""Pathological markdown (super-linear inputs for markdown-it and friends) is bounded by the cap.

Inputs are built as ``markdown_pathological_inputs.json`` says. Inputs over
``MAX_MARKDOWN_CHARS`` must take the escaped path (never parsed); the others are parsed, with a
citation across them, and must finish within the per-event budget. At the cap the slowest
known pattern ("[a" repeated) costs ~5 s on a 2-core machine, hence the budget.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from conversations.rendering.markdown import MAX_MARKDOWN_CHARS, Cite, render_markdown
from tests.support import shared_path

BUDGET_SECONDS = 10.0  # CPU seconds per event, parsed path
CAPPED_BUDGET_SECONDS = 0.5  # CPU seconds per event, escaped path


def build(parts: list[dict[str, Any]], i: int | None = None) -> str:
    out = []
    for part in parts:
        if "range" in part:
            out.extend(build(part["parts"], j) for j in range(part["range"]))
        else:
            count = part.get("n", 1)
            out.append(part["s"] * (i if count == "i" else count))
    return "".join(out)


def cases() -> list[Any]:
    path = shared_path("fixtures", "security", "markdown_pathological_inputs.json")
    return [pytest.param(case, id=case["name"]) for case in json.loads(path.read_text())["cases"]]


def _cases_or_skip() -> list[Any]:
    try:
        return cases()
    except pytest.skip.Exception:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared is absent"))]


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases_or_skip())
def test_pathological_input_is_bounded(case: dict[str, Any]) -> None:
    text = build(case["parts"])
    assert len(text) == case["input_length"]
    start = time.process_time()
    html = render_markdown(text, [Cite(1, len(text) // 3, 2 * len(text) // 3)], anchor_prefix="s-")
    spent = time.process_time() - start
    if len(text) > MAX_MARKDOWN_CHARS:
        assert html.startswith('<p class="render-note">')  # escaped, never parsed
        assert spent < CAPPED_BUDGET_SECONDS, spent
    else:
        assert not html.startswith('<p class="render-note">')  # parsed
        assert spent < BUDGET_SECONDS, spent
    assert 'data-source="1"' in html
