"""What a hosted activity shows beyond its name and state: a label in the reader's words for the
activities that need more than their name (MCP calls, tool lookups, image generation, the
advisor), and what it produced (a run's code, output and return code, an error message,
images, the tools it found). Pure: an activity's grouped fields in, plain cleaned strings out.

Images are shown only as ``data:`` URLs of a raster type (``streams.bodies.IMAGE_MEDIA_TYPES``),
valid base64, within ``MAX_IMAGE_URL_CHARS``: the page's and the HTML export's CSP allow
``img-src data:`` and nothing else outside the app; anything else is not an image we show.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streams.bodies import IMAGE_MEDIA_TYPES, MAX_IMAGE_URL_CHARS

from .text import clean_block_text, clean_text
from .urls import shown_url

LabelPart = tuple[str, bool]  # (text, shown as code)

_IMAGE_URL = re.compile(r"data:(image/[a-z]+);base64,[A-Za-z0-9+/]+={0,2}")


@dataclass(frozen=True, slots=True)
class ActivityDetails:
    """What the activity ran and produced, as plain cleaned text (empty: nothing to show)."""

    code: str = ""  # the code or command it ran
    code_language: str = ""
    output: str = ""  # what it returned: stdout or logs, an MCP result, advice, a file
    stderr: str = ""
    return_code: int | None = None
    error: str = ""  # the provider's error message
    images: tuple[str, ...] = ()  # data: URLs, checked (``safe_image_url``)
    tools: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.code or self.output or self.stderr or self.return_code is not None
                    or self.error or self.images or self.tools)


NO_DETAILS = ActivityDetails()


def safe_image_url(value: object) -> str | None:
    """``value`` when it is a base64 ``data:`` URL of an allowed raster type and size."""
    if not isinstance(value, str) or len(value) > MAX_IMAGE_URL_CHARS:
        return None
    match = _IMAGE_URL.fullmatch(value)
    if match is None or match.group(1) not in IMAGE_MEDIA_TYPES:
        return None
    return value


def _strings(value: object, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(s for s in (clean_text(v, limit=limit) for v in value) if s)[:200]


def activity_details(inputs: Mapping[str, Any] | None, output: Mapping[str, Any] | None
                     ) -> ActivityDetails:
    """The code an activity ran (its input's ``code``, or a shell ``command``) and what it
    produced (its ``output``: ``streams.bodies.ACTIVITY_OUTPUT``)."""
    inputs = inputs if isinstance(inputs, Mapping) else {}
    output = output if isinstance(output, Mapping) else {}
    code, language = "", ""
    if isinstance(inputs.get("code"), str):
        code = inputs["code"]
        language = clean_text(inputs.get("language"), limit=40).lower() or "python"
    elif isinstance(inputs.get("command"), str) and "path" not in inputs:
        code, language = inputs["command"], "shell"  # a bash run
    elif isinstance(inputs.get("file_text"), str):
        code = inputs["file_text"]  # what the text editor wrote
    return_code = output.get("return_code")
    images = tuple(u for u in (safe_image_url(i.get("url")) for i in output.get("images", ())
                               if isinstance(i, Mapping)) if u) \
        if isinstance(output.get("images"), list | tuple) else ()
    return ActivityDetails(
        code=clean_block_text(code, limit=20_000),
        code_language=language,
        output=clean_block_text(output.get("text"), limit=20_000),
        stderr=clean_block_text(output.get("stderr"), limit=20_000),
        return_code=return_code if isinstance(return_code, int)
        and not isinstance(return_code, bool) else None,
        error=clean_block_text(output.get("error"), limit=5_000),
        images=images[:20],
        tools=_strings(output.get("tools"), 200),
    )


def _server(inputs: Mapping[str, Any]) -> str:
    return (clean_text(inputs.get("server_description"), limit=100)
            or clean_text(inputs.get("server"), limit=100))


def activity_label(name: str, state: str, inputs: Mapping[str, Any] | None,
                   details: ActivityDetails) -> tuple[LabelPart, ...]:
    """The reader's label for the activities whose name says too little; () for the others
    (they show their name)."""
    inputs = inputs if isinstance(inputs, Mapping) else {}
    if name in ("mcp_call", "mcp_approval_request"):
        tool = clean_text(inputs.get("tool"), limit=100)
        server = _server(inputs)
        parts: list[LabelPart] = [("MCP call", False)]
        if tool:
            parts += [(" ", False), (tool, True)]
        if server:
            parts.append((f" on {server}", False))
        return tuple(parts)
    if name == "mcp_list_tools":
        server = _server(inputs)
        return (("Listed MCP tools" + (f" on {server}" if server else ""), False),)
    if name == "tool_search":
        if state != "completed":
            return (("Tool search", False),)
        found = ", ".join(details.tools) if details.tools else "none found"
        return (("Looked up tools: ", False), (found, True) if details.tools else (found, False))
    if name == "web_search" and inputs.get("action") in ("open_page", "find_in_page"):
        # OpenAI's browsing actions are web_search calls too; say what they did.
        url = clean_text(shown_url(inputs.get("url")), limit=300)
        if inputs["action"] == "open_page":
            return (("Page opened: " + (url or "(no address given)"), False),)
        pattern = clean_text(inputs.get("pattern"), limit=200)
        where = f" (in {url})" if url else ""
        return ((f"Searched the page for: {pattern or '(no pattern given)'}{where}", False),)
    if name == "image_generation":
        return (("Image generation", False),)
    if name in ("x_search", "view_media", "server_tool"):
        # xAI's and Groq's own tools: say which of them ran (its function name, as code)
        what = {"x_search": "X search", "view_media": "Viewed media with",
                "server_tool": "Provider tool"}[name]
        tool = clean_text(inputs.get("tool"), limit=100)
        return ((what, False), (" ", False), (tool, True)) if tool else ((what, False),)
    if name == "advisor":
        return (("Asked the advisor", False),)
    return ()


def state_label(name: str, state: str, error_code: str, *, never_finished: bool,
                running: bool) -> str:
    """How the activity stands, in words: "completed", "failed: 500", "never finished",
    "running…", or for an MCP approval request (the host answers it, not the provider)
    "waiting for approval"."""
    if name == "mcp_approval_request" and state == "started":
        return "waiting for approval"
    if never_finished:
        return "never finished"
    if running:
        return "running…"
    if state == "failed" and error_code:
        return f"failed: {error_code}"
    return state


def label_text(parts: tuple[LabelPart, ...]) -> str:
    """A label as Markdown-ish plain text: code parts in backticks."""
    return "".join(f"`{text}`" if code else text for text, code in parts)
