"""Groq's built-in tools in Chat Completions (the ``groq/compound`` systems, and models given
``browser_search`` / ``code_interpreter``): Groq runs them itself and reports each run in the
assistant message's ``executed_tools`` (``choices[].message``, or the stream's deltas), never
as a ``tool_calls`` entry for the client to answer.

An executed tool is ``{index, type, arguments, output, search_results}``: ``type`` is what ran
(``search`` / ``browser_search`` a web search, ``visit`` a page fetch, ``python`` /
``code_interpreter`` code), ``arguments`` its JSON arguments as a string, ``output`` what it
returned as text, ``search_results.results`` a search's results (title, url, content, score).
Each becomes one hosted activity, id ``"{response id}:executed_tool:{index}"``: ``started``
with its input, ``completed`` once its output or results are in (a stream may send the entry
before its output). A search's results are its sources; a fetch's or a run's output its text.
The entries stay verbatim in the message payload.
"""

from __future__ import annotations

from typing import Any

from providers.openai.common import json_arguments
from providers.values import as_dict, as_int, as_list, as_str, count, output_text
from streams.parts import Activity
from streams.registries import ACTIVITY_NAMES

# Groq's executed tool type -> the activity name.
TOOL_TYPES = {
    "search": "web_search",
    "web_search": "web_search",
    "browser_search": "web_search",
    "visit": "web_fetch",
    "python": "code_execution",
    "code_interpreter": "code_execution",
    "code_execution": "code_execution",
}
OTHER = "server_tool"  # a type this table does not name yet; ``tool`` in its input says which
_PRODUCER = __package__ or __name__  # the adapter package is the producer
for _name in sorted({*TOOL_TYPES.values(), OTHER}):
    ACTIVITY_NAMES.register(_name, producer=_PRODUCER)


def merge(known: dict[int, dict[str, Any]], entries: Any) -> list[int]:
    """Fold ``executed_tools`` entries (a body's, or a stream delta's) into ``known`` by their
    ``index``: a later piece adds or replaces fields. The indexes the entries touched."""
    touched = []
    for position, entry in enumerate(as_list(entries)):
        if not isinstance(entry, dict):
            continue
        index = as_int(entry.get("index"))
        index = position if index is None else index
        slot = known.setdefault(index, {})
        for key, value in entry.items():
            if value is not None and value != "":
                slot[key] = value
        touched.append(index)
    return touched


def finished(entry: dict[str, Any]) -> bool:
    """Whether the run's outcome is in (its output, or a search's results)."""
    return "output" in entry or isinstance(entry.get("search_results"), dict)


def activity_name(entry: dict[str, Any]) -> str:
    return TOOL_TYPES.get(as_str(entry.get("type")), OTHER)


def activity_input(entry: dict[str, Any]) -> dict[str, Any]:
    """What the run was given: its arguments (``query``, ``url``, ``code``), with ``tool`` for
    a type only Groq names."""
    raw = entry.get("arguments")
    arguments = json_arguments(raw) if isinstance(raw, str) and raw else raw
    described: dict[str, Any] = {}
    if activity_name(entry) == OTHER:
        described["tool"] = as_str(entry.get("type")) or as_str(entry.get("name"))
    if isinstance(arguments, dict):
        described.update(arguments)
    elif isinstance(raw, str) and raw:
        described["input"] = raw
    return described


def activities(activity_id: str, entry: dict[str, Any], started: bool) -> list[Activity]:
    """The transitions ``entry`` makes now: ``started`` (unless it already was), then
    ``completed`` when its outcome is in."""
    name, given = activity_name(entry), activity_input(entry)
    out = [] if started else [Activity(activity_id, name, "started", given)]
    if not finished(entry):
        return out
    results = [r for r in as_list(as_dict(entry.get("search_results")).get("results"))
               if isinstance(r, dict)]
    sources = tuple({"url": as_str(r.get("url")), "title": as_str(r.get("title"))}
                    for r in results)
    text = as_str(entry.get("output"))
    if name == "web_search":
        summary = count(len(sources), "result") if sources else ("" if text else "no results")
        output = None
    else:
        summary = ""
        output = {"text": output_text(text)} if text else None
    out.append(Activity(activity_id, name, "completed", given, summary, sources, output=output))
    return out
