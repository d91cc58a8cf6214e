"""xAI's server-side tools in its Responses API.

xAI runs its built-in tools itself (web search, X search, code execution, collections search,
viewing images and X videos) and reports each call in the response's output; the outputs stay on
its side ("only the tool call invocations are shown", xAI's tool usage documentation).
Web searches come as ``web_search_call`` items, read like OpenAI's. The others come as
``custom_tool_call`` (or ``function_call``) items, the item types a client tool call has, named
by the function xAI ran (``x_keyword_search``, ``view_x_video``, ``browse_page``...), already
``completed``, with ``xs_call_`` call ids; ``usage.num_server_side_tools_used`` counts them.

Such an item is xAI's own call, a hosted activity and never a client tool call, when the
request (or the response, which repeats it) declares no client tool (``function`` / ``custom``)
of that name: a client tool the model calls is always one the request declared. Where neither
the request nor the response lists the tools, only the function names xAI documents for its
built-in tools (``SERVER_TOOLS``) are taken as its own.
"""

from __future__ import annotations

from typing import Any

from providers.openai.common import CLIENT_TOOL_TYPES, json_arguments
from providers.values import as_str
from streams.registries import ACTIVITY_NAMES

PROVIDER = "xai"

# The function names xAI's tool documentation lists per built-in tool -> the activity name.
SERVER_TOOLS = {
    "web_search": "web_search",
    "web_search_with_snippets": "web_search",
    "browse_page": "web_fetch",
    "x_user_search": "x_search",
    "x_keyword_search": "x_search",
    "x_semantic_search": "x_search",
    "x_thread_fetch": "x_search",
    "code_execution": "code_execution",
    "code_interpreter": "code_execution",
    "collections_search": "file_search",
    "file_search": "file_search",
    "view_image": "view_media",
    "view_x_video": "view_media",
}
# A server-side call of a function this table does not name yet (the tools were declared, so it
# is not the client's): kept as a hosted activity under its own function name in ``tool``.
OTHER = "server_tool"
_PRODUCER = __package__ or __name__  # the adapter package is the producer
for _name in sorted({*SERVER_TOOLS.values(), OTHER}):
    ACTIVITY_NAMES.register(_name, producer=_PRODUCER)


def client_tools(tools: Any) -> set[str]:
    """The names of the client tools (``function`` / ``custom``) a tool list declares."""
    names = set()
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict) and tool.get("type") in CLIENT_TOOL_TYPES:
            name = tool.get("name")
            if not isinstance(name, str):  # Chat Completions' shape, {"function": {"name"}}
                function = tool.get("function")
                name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str):
                names.add(name)
    return names


def activity_name(item: dict[str, Any], declared: set[str] | None) -> str | None:
    """The hosted activity a ``custom_tool_call`` / ``function_call`` item of an xAI response
    is, or None when it is a client tool call. ``declared``: the client tools the request or
    response declares (None when neither lists its tools)."""
    name = as_str(item.get("name"))
    if declared is None:
        return SERVER_TOOLS.get(name)
    if name in declared:
        return None
    return SERVER_TOOLS.get(name, OTHER)


def activity_input(item: dict[str, Any]) -> dict[str, Any]:
    """What the call was given, with the function xAI ran as ``tool``: its JSON arguments
    (a query, a URL, a video URL), or the text as sent when it is not a JSON object."""
    raw = item.get("input") if item.get("type") == "custom_tool_call" else item.get("arguments")
    text = as_str(raw)
    arguments = json_arguments(text) if text else raw if isinstance(raw, dict) else {}
    described: dict[str, Any] = {"tool": as_str(item.get("name"))}
    if isinstance(arguments, dict):
        described.update((k, v) for k, v in arguments.items() if k != "tool")
    elif text:
        described["input"] = text
    return described
