"""Render benchmark: cold ``render_turn`` against a plain markdown-it-py floor.

    uv run python -m bench.render [--turns 200] [--blocks 20] [--repeat 3]

Generates a conversation of agent turns, each with ``--blocks`` cited markdown blocks spread
over four message events (paragraphs with emphasis, links, code spans and bare URLs; list
items, some of them tasks; a heading; a fenced code block in one of three languages; a table
with aligned columns; display math, and inline math in some sentences), ranges that cross
blocks and overlap, plus a completed web search with its sources. It then times, in the same
process and interleaved:

* floor — ``MarkdownIt("js-default", linkify)`` with the page's markdown plugins (math as
  MathML, task lists, table alignment, Pygments highlighting: ``floor_parser``) rendering
  every message text, nothing else;
* cold  — ``render_turn`` of every turn with no cached HTML: source numbering, spans,
  markers, sanitizing, timeline items.

* warm   — ``render_turn`` with every message run's HTML already cached;
* page   — the whole conversation page warm, as a reload does it: the events read from
  SQLite, the cached HTML read from ``RenderedHTML``, ``render_turn``, and the template.

Targets: cold/floor <= 3, warm/floor <= 0.2. Times are this process's CPU time, per turn,
best of ``--repeat`` (so other load on a shared machine barely moves the ratio); the page is
timed whole, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

# The page measurement needs Django, on a throwaway SQLite database.
_tmp = tempfile.mkdtemp(prefix="turnscope-bench-")
os.environ["SQLITE_PATH"] = str(Path(_tmp) / "bench.sqlite3")
os.environ.setdefault("TURNSCOPE_VAR_DIR", _tmp)
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from markdown_it import MarkdownIt  # noqa: E402

from conversations.rendering import render_turn  # noqa: E402
from conversations.rendering.markdown import PLUGINS, cite_plugin, render_markdown  # noqa: E402
from conversations.rendering.markdown.depth import inline_depth_plugin  # noqa: E402
from conversations.rendering.markdown.math import render_math  # noqa: E402

_PROSE = (
    "the model reports that rainfall in the region rose sharply during the last decade while "
    "average temperatures kept climbing according to several independent measurements and "
    "officials expect further changes as new data arrives from stations across the country"
)
WORDS = _PROSE.split(" ")


def _sentence(rng: random.Random, count: int) -> str:
    words = [rng.choice(WORDS) for _ in range(count)]
    roll = rng.random()
    if roll < 0.3:
        i = rng.randrange(count - 2)
        words[i] = f"**{words[i]} {words[i + 1]}**"
        del words[i + 1]
    elif roll < 0.5:
        i = rng.randrange(count)
        words[i] = f"`{words[i]}()`"
    elif roll < 0.7:
        i = rng.randrange(count)
        words[i] = f"[{words[i]}](https://news.example.org/{words[i]}?ref={rng.randrange(99)})"
    elif roll < 0.8:
        words.append("see https://data.example.com/report")
    elif roll < 0.9:
        i = rng.randrange(count)
        words[i] = f"*{words[i]}*"
    elif roll < 0.97:
        i = rng.randrange(count)
        words[i] = rng.choice(_INLINE_MATH).replace("N", str(rng.randrange(2, 40)))
    return " ".join(words).capitalize() + "."


_INLINE_MATH = ("$x_N^2$", "$\\frac{a}{N}$", "\\(\\sqrt{N}\\,\\mathrm{mm}\\)",
                "$\\alpha + \\beta_N$")
_DISPLAY_MATH = ("$$\n\\bar{x} = \\frac{1}{N} \\sum_{i=1}^{N} x_i\n$$",
                 "\\[ \\sigma^2 = \\frac{1}{N-1} \\sum_i (x_i - \\bar{x})^2 \\]")


def _block(rng: random.Random, kind: int) -> str:
    if kind == 0:
        return "## " + " ".join(rng.choice(WORDS) for _ in range(5)).capitalize()
    if kind == 1:
        mark = rng.choice(("- ", "- [x] ", "- [ ] "))
        return "\n".join(f"{mark}{_sentence(rng, 12)}" for _ in range(3))
    if kind == 2:
        language = rng.choice(("python", "js", "rust"))
        body = "\n".join(f"value_{i} = compute({i}, rate=0.{i})  # step {i}" for i in range(4))
        return f"```{language}\n{body}\n```"
    if kind == 4:
        rows = "\n".join(f"| {rng.choice(WORDS)} | {rng.randrange(999)} mm | {_sentence(rng, 4)} |"
                         for _ in range(3))  # fmt: skip
        return f"| Station | Rainfall | Note |\n|:--|--:|:-:|\n{rows}"
    if kind == 5:
        return rng.choice(_DISPLAY_MATH).replace("N", str(rng.randrange(2, 40)))
    return " ".join(_sentence(rng, rng.randrange(12, 22)) for _ in range(3))


def make_turn(rng: random.Random, index: int, blocks: int) -> dict[str, Any]:
    urls = [f"https://site{k}.example.com/article/{index}-{k}" for k in range(8)]
    events: list[dict[str, Any]] = [
        {
            "id": f"t{index}-search",
            "seq": 1,
            "kind": "hosted_activity",
            "activity": {
                "id": f"srvtoolu_{index}",
                "name": "web_search",
                "state": "completed",
                "input": {"query": "regional rainfall and temperature trends"},
                "summary": "8 results",
                "sources": [{"url": u, "title": f"Article {k}"} for k, u in enumerate(urls)],
            },
        }
    ]
    per_event = max(1, blocks // 4)
    made = 0
    seq = 2
    while made < blocks:
        count = min(per_event, blocks - made)
        parts = [_block(rng, 3 if i % 4 else rng.randrange(6)) for i in range(count)]
        text = "\n\n".join(parts)
        offsets = []
        pos = 0
        for part in parts:
            offsets.append((pos, pos + len(part)))
            pos += len(part) + 2
        attributions = []
        for b, (start, end) in enumerate(offsets):
            # One cited span per block; every third one runs into the next block.
            lo = start + rng.randrange(max(1, (end - start) // 3))
            hi = end - rng.randrange(max(1, (end - start) // 4))
            if b % 3 == 2 and b + 1 < len(offsets):
                hi = offsets[b + 1][0] + (offsets[b + 1][1] - offsets[b + 1][0]) // 2
            url = rng.choice(urls)
            attributions.append(
                {
                    "source": {"url": url, "title": f"Article {urls.index(url)}"},
                    "excerpt": "..." + " ".join(rng.choice(WORDS) for _ in range(14)) + "...",
                    "range": {"start": lo, "end": max(lo + 1, hi)},
                    "incomplete": False,
                }
            )
        events.append(
            {
                "id": f"t{index}-m{seq}",
                "seq": seq,
                "kind": "message",
                "text": text,
                "incomplete": False,
                "attributions": attributions,
            }
        )
        seq += 1
        made += count
    return {
        "id": f"turn-{index}",
        "index": index,
        "role": "agent",
        "status": "complete",
        "end_reason": "end_turn",
        "agent": {"agentId": "bench", "model": {"provider": "anthropic", "model": "bench-1"}},
        "events": events,
    }


def make_conversation(turns: int, blocks: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [make_turn(rng, i, blocks) for i in range(turns)]


def floor_parser() -> MarkdownIt:
    """markdown-it-py with the same markdown plugins the page uses (math as MathML, task
    lists, table alignment, Pygments highlighting), without citations or the sanitizer."""
    md = MarkdownIt("js-default", {"typographer": False, "linkify": True})
    for plugin in PLUGINS:
        if plugin not in (cite_plugin, inline_depth_plugin):
            md.use(plugin)
    return md


def _cpu(fn: Any, arg: Any) -> float:
    # Formulas are cached per process: every timed render converts them afresh.
    render_math.cache_clear()
    start = time.process_time()
    fn(arg)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    turns = make_conversation(args.turns, args.blocks)
    texts = [[e["text"] for e in t["events"] if e["kind"] == "message"] for t in turns]
    chars = sum(len(text) for group in texts for text in group)
    md = floor_parser()

    # Warm the interpreter and the per-thread parser/cleaner on other input.
    for turn in make_conversation(3, args.blocks, seed=99):
        render_turn(turn)
        for event in turn["events"]:
            if event["kind"] == "message":
                md.render(event["text"])
                render_markdown(event["text"])

    def floor(group: list[str]) -> None:
        for text in group:
            md.render(text)

    def plain(group: list[str]) -> None:
        for text in group:
            render_markdown(text)

    # CPU time of this process, per turn, interleaved, best of --repeat for each turn: other
    # processes on a shared machine then barely move the ratio.
    caches = [render_turn(turn).fresh_html for turn in turns]

    def warm(i: int) -> None:
        render_turn(turns[i], cached_html=caches[i])

    best = {name: [float("inf")] * len(turns) for name in ("floor", "plain", "cold", "warm")}
    gc.disable()
    try:
        for _ in range(args.repeat):
            for i, turn in enumerate(turns):
                best["floor"][i] = min(best["floor"][i], _cpu(floor, texts[i]))
                best["plain"][i] = min(best["plain"][i], _cpu(plain, texts[i]))
                best["cold"][i] = min(best["cold"][i], _cpu(render_turn, turn))
                best["warm"][i] = min(best["warm"][i], _cpu(warm, i))
            gc.collect()
    finally:
        gc.enable()
    total = {name: sum(values) for name, values in best.items()}
    page = _warm_page(turns, args.repeat)

    blocks = args.turns * args.blocks
    events = sum(map(len, texts))
    print(
        f"{args.turns} turns x {args.blocks} cited blocks = {blocks} blocks, "
        f"{events} message events, {chars:,} characters (CPU seconds, best of {args.repeat})"
    )
    print(f"floor  markdown-it-py + the same plugins    {total['floor']:.3f} s")
    print(
        f"plain  our render + sanitize, no citations {total['plain']:.3f} s  "
        f"({total['plain'] / total['floor']:.2f}x floor)"
    )
    print(
        f"cold   render_turn (cites, sanitize, items) {total['cold']:.3f} s  "
        f"({total['cold'] / total['floor']:.2f}x floor; target <= 3x)"
    )
    print(
        f"warm   render_turn, HTML cached            {total['warm']:.3f} s  "
        f"({total['warm'] / total['floor']:.2f}x floor; target <= 0.2x)"
    )
    print(
        f"page   warm reload: DB + cache + template   {page:.3f} s  "
        f"({page / total['floor']:.2f}x floor)"
    )


def _warm_page(turns: list[dict[str, Any]], repeat: int) -> float:
    """CPU seconds of a warm reload of the whole conversation page (best of ``repeat``)."""
    from django.core.management import call_command
    from django.template.loader import render_to_string

    from conversations import reading
    from conversations.projections import import_document

    call_command("migrate", verbosity=0)
    doc = {
        "format": "turnscope.conversation", "version": 1, "projection": "portable",
        "conversation": {"id": str(uuid.uuid4()), "title": "bench", "created_at": None,
                         "forked_from": None},
        "turns": [_exportable(turn, i) for i, turn in enumerate(turns)],
    }
    conversation = import_document(doc)
    reading.turn_views(conversation)  # fills the cache

    def page(_: object) -> None:
        views = reading.turn_views(conversation)
        render_to_string("conversations/detail.html", {
            "conversation": conversation, "turns": views, "last_seq": 0,
        })

    return min(_cpu(page, None) for _ in range(repeat))


def _exportable(turn: dict[str, Any], index: int) -> dict[str, Any]:
    """A generated turn as the export contract has it (ids as UUIDs, seqs from 1)."""
    events = []
    for event in turn["events"]:
        event = {**event, "id": str(uuid.uuid4()), "seq": 1 + index * 1000 + len(events)}
        events.append(event)
    return {
        "id": str(uuid.uuid4()), "index": index, "role": "agent", "status": "complete",
        "end_reason": "end_turn", "created_at": None,
        "agent": {"agentId": "bench", "model": {"provider": "anthropic", "model": "claude-x"}},
        "events": events,
    }


if __name__ == "__main__":
    main()
