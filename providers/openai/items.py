"""What a Responses output item says, read whole: an annotation as a citation, a hosted call's
input and result, and whether a stored item or annotation payload can be read again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.openai.common import char_range, json_arguments
from providers.values import as_dict, as_list, as_str, clip, count, image_output, output_text
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
# Hosted calls: item type -> (its input, its result: summary, sources and output)

_Sources = tuple[dict[str, str], ...]
_Outcome = tuple[str, _Sources, dict[str, Any] | None]  # summary, sources, output


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


def _web_search_result(item: dict[str, Any]) -> _Outcome:
    action = as_dict(item.get("action"))
    kind = action.get("type")
    if kind == "open_page":
        return "page opened", (), None
    if kind == "find_in_page":
        return "page searched", (), None
    raw = action.get("sources")
    if not isinstance(raw, list):
        return "", (), None  # sources are only sent when the request includes them
    sources = []
    for source in raw:
        if not isinstance(source, dict):
            continue
        # "url" sources carry a URL; "api" sources (e.g. oai-sports) only a name.
        sources.append({"url": as_str(source.get("url")), "title": as_str(source.get("name"))})
    return (count(len(sources), "result") if sources else "no results"), tuple(sources), None


def _file_search_input(item: dict[str, Any]) -> dict[str, Any]:
    queries = item.get("queries")
    return {"queries": queries} if isinstance(queries, list) else {}


def _file_search_result(item: dict[str, Any]) -> _Outcome:
    results = item.get("results")
    if not isinstance(results, list):
        return "", (), None  # null unless the request includes file_search_call.results
    sources = tuple(
        {"url": "", "title": as_str(r.get("filename")) or as_str(r.get("file_id"))}
        for r in results
        if isinstance(r, dict)
    )
    return (count(len(results), "result") if results else "no results"), sources, None


def _code_input(item: dict[str, Any]) -> dict[str, Any]:
    described = {}
    for key in ("code", "container_id"):
        if isinstance(item.get(key), str):
            described[key] = item[key]
    return described


def _code_result(item: dict[str, Any]) -> _Outcome:
    outputs = item.get("outputs")
    if not isinstance(outputs, list):
        return "", (), None
    entries = [o for o in outputs if isinstance(o, dict)]
    logs = [as_str(o.get("logs")) for o in entries if o.get("type") == "logs"]
    images = [image_output(as_str(o.get("url"))) for o in entries if o.get("type") == "image"]
    output: dict[str, Any] = {}
    if any(logs):
        output["text"] = output_text("".join(logs))
    if kept := [image for image in images if image]:
        output["images"] = kept
    return (count(len(outputs), "output") if outputs else "no output"), (), output or None


def _mcp_input(item: dict[str, Any]) -> dict[str, Any]:
    """An MCP call (or a request to approve one): which server, which tool, what arguments."""
    described: dict[str, Any] = {"server": as_str(item.get("server_label"))}
    if "name" in item:
        described["tool"] = as_str(item.get("name"))
    if "arguments" in item:
        arguments = item.get("arguments")
        described["arguments"] = (
            json_arguments(arguments) if isinstance(arguments, str) and arguments else arguments
        )
    return described


def _mcp_result(item: dict[str, Any]) -> _Outcome:
    text = item.get("output")
    text = text if isinstance(text, str) else "" if text is None else str(text)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return clip(first), (), {"text": output_text(text)} if text else None


def _tool_names(tools: Any) -> list[str]:
    return [as_str(t.get("name")) for t in as_list(tools) if isinstance(t, dict) and t.get("name")]


def _list_tools_result(item: dict[str, Any]) -> _Outcome:
    names = _tool_names(item.get("tools"))
    return count(len(names), "tool"), (), {"tools": names}


def _image_input(item: dict[str, Any]) -> dict[str, Any]:
    described = {}
    for key, name in (("revised_prompt", "prompt"), ("size", "size"), ("quality", "quality")):
        if isinstance(item.get(key), str) and item[key]:
            described[name] = item[key]
    return described


def image_outcome(item: dict[str, Any], b64: str = "") -> _Outcome:
    """An image generation's image: its ``result`` (or a partial image), as a data: URL."""
    data = as_str(item.get("result")) or b64
    fmt = as_str(item.get("output_format")) or "png"
    image = image_output(b64=data, output_format=fmt) if data else {}
    summary = " ".join(v for v in (as_str(item.get("size")), fmt if data else "") if v)
    return summary, (), {"images": [image]} if image else None


def _tool_search_input(item: dict[str, Any]) -> dict[str, Any]:
    arguments = item.get("arguments")
    return dict(arguments) if isinstance(arguments, dict) else {}


def tool_search_outcome(output_item: dict[str, Any]) -> _Outcome:
    """What a server-run tool search found: the ``tools`` of its ``tool_search_output``."""
    names = _tool_names(output_item.get("tools"))
    return (count(len(names), "tool") if names else "no tools found"), (), {"tools": names}


def _no_result(item: dict[str, Any]) -> _Outcome:
    return "", (), None


_Input = Callable[[dict[str, Any]], dict[str, Any]]
_Result = Callable[[dict[str, Any]], _Outcome]
DESCRIBE: dict[str, tuple[_Input, _Result]] = {
    "web_search_call": (_web_search_input, _web_search_result),
    "file_search_call": (_file_search_input, _file_search_result),
    "code_interpreter_call": (_code_input, _code_result),
    "mcp_call": (_mcp_input, _mcp_result),
    "mcp_list_tools": (_mcp_input, _list_tools_result),
    "mcp_approval_request": (_mcp_input, _no_result),
    "image_generation_call": (_image_input, image_outcome),
    "tool_search_call": (_tool_search_input, _no_result),
}


def terminal_status(item: dict[str, Any]) -> str:
    """"completed", "failed", or "" (still running, or waiting) for a hosted call item.

    ``mcp_list_tools`` items carry no status: an ``error`` says it failed. An MCP call without
    a status says by its ``error`` or ``output``. A tool search call is finished by its
    ``tool_search_output`` item, and an approval request by the host, never by themselves."""
    kind = item.get("type")
    if kind in ("tool_search_call", "mcp_approval_request"):
        return ""
    status = item.get("status")
    if status is None and kind in ("mcp_list_tools", "mcp_call"):
        if item.get("error"):
            return "failed"
        return "completed" if kind == "mcp_list_tools" or item.get("output") is not None else ""
    return status if status in ("completed", "failed") else ""


def item_error(item: dict[str, Any]) -> tuple[str, str]:
    """The error code and message of a failed hosted call (an object, or a bare string)."""
    error = item.get("error")
    if isinstance(error, str):
        return "error", error
    error = as_dict(error)
    code = error.get("code")
    code = str(code) if isinstance(code, str | int) and not isinstance(code, bool) else ""
    return code or as_str(error.get("type")) or "failed", as_str(error.get("message"))


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
    "mcp_call": (("id", str),),
    "mcp_list_tools": (("id", str),),
    "mcp_approval_request": (("id", str),),
    "image_generation_call": (("id", str),),
    "tool_search_call": (("id", str),),
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
