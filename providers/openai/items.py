"""What a Responses output item says, read whole: an annotation as a citation, a hosted call's
input and result, and whether a stored item or annotation payload can be read again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.openai.common import char_range
from providers.values import as_dict, as_str, count
from streams.parts import Citation, Payload

ITEM = "openai.responses.output_item"  # a Responses output item, verbatim or as streamed so far
ANNOTATION = "openai.responses.annotation"  # one output_text annotation, verbatim
FORMATS = (ITEM, ANNOTATION)


def annotation_citation(
    key: str, annotation: dict[str, Any], offset: int, replay: Payload
) -> Citation | None:
    """A Responses annotation as a Citation on block ``key`` (part text begins at ``offset``)."""
    kind = annotation.get("type")
    if kind == "url_citation":
        start, end = char_range(annotation.get("start_index"), annotation.get("end_index"))
        return Citation(
            key,
            url=as_str(annotation.get("url")),
            title=as_str(annotation.get("title")),
            start=None if start is None else start + offset,
            end=None if end is None else end + offset,
            unit="codepoint",
            replay=replay,
        )
    if kind == "file_citation":
        # A point (`index`), not a span: no range, the whole block is cited (see
        # ``providers.openai.responses``).
        title = as_str(annotation.get("filename")) or as_str(annotation.get("file_id"))
        return Citation(key, url="", title=title, replay=replay)
    if kind == "container_file_citation":
        start, end = char_range(annotation.get("start_index"), annotation.get("end_index"))
        title = as_str(annotation.get("filename")) or as_str(annotation.get("file_id"))
        return Citation(
            key,
            url="",
            title=title,
            start=None if start is None else start + offset,
            end=None if end is None else end + offset,
            replay=replay,
        )
    return None


# ---------------------------------------------------------------------------------------------
# Hosted calls: item type -> (its input, its result summary and sources)


def _web_search_input(item: dict[str, Any]) -> dict[str, Any]:
    action = item.get("action")
    if not isinstance(action, dict):
        return {}
    described: dict[str, Any] = {}
    if isinstance(action.get("type"), str):
        described["action"] = action["type"]
    for key in ("query", "queries", "url", "pattern"):
        if action.get(key) is not None:
            described[key] = action[key]
    return described


def _web_search_result(item: dict[str, Any]) -> tuple[str, tuple[dict[str, str], ...]]:
    action = as_dict(item.get("action"))
    kind = action.get("type")
    if kind == "open_page":
        return "page opened", ()
    if kind == "find_in_page":
        return "page searched", ()
    raw = action.get("sources")
    if not isinstance(raw, list):
        return "", ()  # sources are only sent when the request includes them
    sources = []
    for source in raw:
        if not isinstance(source, dict):
            continue
        # "url" sources carry a URL; "api" sources (e.g. oai-sports) only a name.
        sources.append({"url": as_str(source.get("url")), "title": as_str(source.get("name"))})
    return (count(len(sources), "result") if sources else "no results"), tuple(sources)


def _file_search_input(item: dict[str, Any]) -> dict[str, Any]:
    queries = item.get("queries")
    return {"queries": queries} if isinstance(queries, list) else {}


def _file_search_result(item: dict[str, Any]) -> tuple[str, tuple[dict[str, str], ...]]:
    results = item.get("results")
    if not isinstance(results, list):
        return "", ()  # null unless the request includes file_search_call.results
    sources = tuple(
        {"url": "", "title": as_str(r.get("filename")) or as_str(r.get("file_id"))}
        for r in results
        if isinstance(r, dict)
    )
    return (count(len(results), "result") if results else "no results"), sources


def _code_input(item: dict[str, Any]) -> dict[str, Any]:
    described = {}
    for key in ("code", "container_id"):
        if isinstance(item.get(key), str):
            described[key] = item[key]
    return described


def _code_result(item: dict[str, Any]) -> tuple[str, tuple[dict[str, str], ...]]:
    outputs = item.get("outputs")
    if not isinstance(outputs, list):
        return "", ()
    return (count(len(outputs), "output") if outputs else "no output"), ()


_Input = Callable[[dict[str, Any]], dict[str, Any]]
_Result = Callable[[dict[str, Any]], tuple[str, tuple[dict[str, str], ...]]]
DESCRIBE: dict[str, tuple[_Input, _Result]] = {
    "web_search_call": (_web_search_input, _web_search_result),
    "file_search_call": (_file_search_input, _file_search_result),
    "code_interpreter_call": (_code_input, _code_result),
}


def artifact_summary(item: dict[str, Any]) -> str:
    kind = as_str(item.get("type")) or "item"
    status = as_str(item.get("status"))
    return f"{kind} ({status})" if status else kind


# ---------------------------------------------------------------------------------------------
# Stored payloads


_ITEM_FIELDS: dict[str, tuple[tuple[str, type], ...]] = {
    "message": (("content", list),),
    "reasoning": (("id", str),),
    "function_call": (("call_id", str), ("name", str), ("arguments", str)),
    "custom_tool_call": (("call_id", str), ("name", str)),
    "web_search_call": (("id", str),),
    "file_search_call": (("id", str),),
    "code_interpreter_call": (("id", str),),
}


def check_payload(value: dict[str, Any], format: str) -> None:
    """Raise ValueError when a stored ITEM or ANNOTATION payload cannot be read."""
    if format == ITEM:
        kind = value.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"{format}: needs a string 'type'")
        for name, kind_of in _ITEM_FIELDS.get(kind, ()):
            if not isinstance(value.get(name), kind_of):
                raise ValueError(f"{format}: a {kind} item needs {name!r} ({kind_of.__name__})")
    elif not isinstance(value.get("type"), str):  # ANNOTATION
        raise ValueError(f"{format}: needs a string 'type'")
