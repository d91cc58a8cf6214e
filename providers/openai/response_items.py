"""What a Responses stream has said of each output item (``Item``, its ``TextPart``s), which
items are calls OpenAI runs itself (``HOSTED_ITEMS``), and the handlers of the items that are
tool calls (``ToolItems``, a part of the ``responses.Responses`` reader, which keeps the state
named there): hosted activities, calls xAI ran itself, and client tool calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.openai import xai
from providers.openai.common import PROVIDER, json_arguments
from providers.openai.items import (
    DESCRIBE,
    ITEM,
    artifact_summary,
    item_error,
    terminal_status,
    tool_search_outcome,
)
from providers.values import as_str, clip
from streams.parts import Activity, Artifact, Part, Payload, ToolCall
from streams.registries import ACTIVITY_NAMES

_PRODUCER = __package__ or __name__  # the adapter package is the producer

# Items OpenAI runs itself -> activity name. A tool search is hosted only with
# ``execution: "server"`` (a client one is the host's to run).
HOSTED_ITEMS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
    "mcp_call": "mcp_call",
    "mcp_list_tools": "mcp_list_tools",
    "mcp_approval_request": "mcp_approval_request",
    "image_generation_call": "image_generation",
    "tool_search_call": "tool_search",
}
for _name in sorted(set(HOSTED_ITEMS.values())):
    ACTIVITY_NAMES.register(_name, producer=_PRODUCER)


def hosted_name(item: dict[str, Any]) -> str | None:
    """The activity name of a hosted call item, or None."""
    kind = as_str(item.get("type"))
    if kind == "tool_search_call" and item.get("execution") != "server":
        return None
    return HOSTED_ITEMS.get(kind)

CLIENT_TOOL_ITEMS = ("function_call", "custom_tool_call")


@dataclass(slots=True)
class TextPart:
    offset: int  # where this part's text begins in the block's text
    chunks: list[str] = field(default_factory=list)  # its text as streamed so far

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class Item:
    """What the stream has said so far about one output item."""

    item: dict[str, Any]
    key: str
    block_open: bool = False
    done: bool = False
    activity_started: bool = False
    length: int = 0  # code points of block text emitted so far
    parts: dict[tuple[str, int], TextPart] = field(default_factory=dict)
    cited: dict[int, set[int]] = field(default_factory=dict)  # content index -> annotation idx
    partial_image: str = ""  # the latest partial image of an image generation (base64)
    searched: bool = False  # a server tool search whose tool_search_output has arrived

    @property
    def type(self) -> str:
        return as_str(self.item.get("type"))


class ToolItems:
    """The tool-call item handlers of ``Responses``."""

    version: str
    items: dict[str, Item]
    xai: bool
    declared: set[str] | None
    servers: dict[str, str]
    client_tool_call: bool
    approval_requested: bool

    def payload(self, format: str, value: Any) -> Payload:
        return Payload(PROVIDER, format, self.version, value)

    def _input(self, item: dict[str, Any]) -> dict[str, Any]:
        described = DESCRIBE[as_str(item.get("type"))][0](item)
        description = self.servers.get(as_str(item.get("server_label")))
        if description:  # an MCP server's own name for itself, for the reader
            described["server_description"] = description
        return described

    def _activity_done(self, state: Item) -> Iterator[Part]:
        item = state.item
        name = hosted_name(item)
        assert name is not None  # only hosted items come here
        describe_result = DESCRIBE[state.type][1]
        activity_input = self._input(item)
        status = terminal_status(item)
        payload = self.payload(ITEM, item)
        if state.type == "mcp_approval_request":
            self.approval_requested = True
        if not state.activity_started:
            state.activity_started = True
            # The payload goes with the last transition this item gets, once. An item that
            # never finished still shows what it produced (an image generated so far).
            output = None if status else describe_result(item)[2]
            yield Activity(
                state.key, name, "started", activity_input,
                payload=None if status else payload, output=output,
            )
        if status == "completed":
            summary, found, output = describe_result(item)
            sources: tuple[dict[str, str], ...] | None = found
            if self.xai and not found:
                # xAI keeps its tools' results to itself: not reported, which is not "none"
                summary, sources = "", None
            # Positional: Activity(activity_id, name, state, input, summary, sources,
            # error_code, payload, output)
            yield Activity(
                state.key, name, "completed", activity_input, summary, sources, "", payload,
                output,
            )
        elif status == "failed":
            code, message = item_error(item)
            yield Activity(
                state.key, name, "failed", activity_input, clip(message) or code, error_code=code,
                payload=payload, output={"error": message} if message else None,
            )
        # any other status (Azure's "searching", an image still "generating", an approval
        # request, a tool search waiting for its output): never completed; leave it started

    def _tool_search_done(self, state: Item) -> Iterator[Part]:
        """A server tool search's output: it completes its call (by ``call_id``, else the
        latest call still waiting), with the tools it found."""
        output = state.item
        call_id = output.get("call_id")
        waiting = [
            s for s in self.items.values()
            if s.type == "tool_search_call" and s.item.get("execution") == "server"
            and not s.searched and (not call_id or s.item.get("call_id") == call_id)
        ]
        if not waiting:
            yield Artifact(type=state.type, summary=artifact_summary(output),
                           payload=self.payload(ITEM, output))
            return
        call = waiting[-1]
        call.searched = True
        summary, sources, found = tool_search_outcome(output)
        yield Activity(
            call.key, "tool_search", "completed", self._input(call.item), summary, sources, "",
            self.payload(ITEM, output), found,
        )

    def _server_call(self, item: dict[str, Any]) -> str | None:
        """The activity name of a tool call item the provider ran itself (xAI's server-side
        tools: ``providers.openai.xai``), or None for a client tool call."""
        if not self.xai or as_str(item.get("type")) not in CLIENT_TOOL_ITEMS:
            return None
        return xai.activity_name(item, self.declared)

    def _server_call_done(self, state: Item, name: str) -> Iterator[Part]:
        """A call xAI ran itself: started, then completed or failed by its ``status`` (its
        output stays on xAI's side: nothing to show but the call)."""
        item = state.item
        activity_input = xai.activity_input(item)
        status = as_str(item.get("status"))
        payload = self.payload(ITEM, item)
        terminal = status in ("completed", "failed", "incomplete")
        if not state.activity_started:
            state.activity_started = True
            yield Activity(state.key, name, "started", activity_input,
                           payload=None if terminal else payload)
        if status == "completed":  # what it found stays on xAI's side: not reported
            yield Activity(state.key, name, "completed", activity_input, sources=None,
                           payload=payload)
        elif terminal:
            code, message = item_error(item)
            yield Activity(state.key, name, "failed", activity_input, clip(message) or code,
                           error_code=code or status, payload=payload)

    def _tool_call_done(self, state: Item) -> Iterator[Part]:
        item = state.item
        self.client_tool_call = True
        if state.type == "function_call":
            arguments = json_arguments(as_str(item.get("arguments")))
        else:  # custom_tool_call: free-form input text
            arguments = as_str(item.get("input"))
        yield ToolCall(
            call_id=as_str(item.get("call_id")) or state.key,
            name=as_str(item.get("name")),
            arguments=arguments,
            payload=self.payload(ITEM, item),
        )
