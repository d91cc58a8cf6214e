"""Claude.ai data export: ``conversations.json`` (an array of conversations with
``chat_messages``).

Two shapes are read:

* October 2024 (the fixtures): a flat ``chat_messages`` list with ``text`` only — no parent link,
  no content blocks, no model. The list is not in time order, so messages are sorted by
  ``created_at`` with a ``human`` message before an ``assistant`` one at the same instant (a
  human message and its reply share one timestamp). Artifacts and hidden reasoning are inline
  tags: ``<antThinking>`` becomes reasoning, an ``<antArtifact>`` a fenced code block in the
  message, titled.
* Newer exports: ``content`` blocks (``text`` with ``citations``, ``thinking``, ``tool_use`` /
  ``tool_result`` such as ``web_search``) and ``parent_message_uuid`` links. The thread ending at
  ``current_leaf_message_uuid`` (else the latest leaf) is the conversation; other leaves are kept
  as forks. A web search is a hosted activity (query in, results as its sources), never a
  client tool call; a text block's citations become attributions (offsets taken as code points
  and checked by the stream runner against the text).

Every message is its own turn (``human`` a user turn, ``assistant`` an agent turn). ``files``
and ``attachments`` are listed by name. The model is recorded only where the export names one
(provider ``anthropic``). The conversation object is kept whole as the payload.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from importers.base import (
    ImportedConversation,
    ImportedFork,
    ImportedTurn,
    Item,
    PartsResponse,
    Problem,
    exported_conversations,
    text_of,
    timestamp,
)
from importers.jsonstream import Readable
from streams import parts
from streams.registries import ACTIVITY_NAMES, END_REASONS

FORMAT = "claude_ai"
PROVIDER = "anthropic"
PAYLOAD_PROVIDER, PAYLOAD_FORMAT, PAYLOAD_VERSION = "claude_ai", "claude_ai.export", "1"
ROOT_PARENT = "00000000-0000-4000-8000-000000000000"

WEB_SEARCH, WEB_FETCH, CODE_EXECUTION = "web_search", "web_fetch", "code_execution"
HOSTED_TOOLS = {"web_search": WEB_SEARCH, "web_fetch": WEB_FETCH, "repl": CODE_EXECUTION}
for _name in sorted(set(HOSTED_TOOLS.values())):
    ACTIVITY_NAMES.register(_name, producer=__name__)
END_REASONS.register("end_turn", producer=__name__)

_TAG = re.compile(
    r"<antThinking>(?P<thinking>.*?)(?:</antThinking>|\Z)"
    r"|<antArtifact\b(?P<attrs>[^>]*)>(?P<artifact>.*?)(?:</antArtifact>|\Z)",
    re.DOTALL,
)
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
LANGUAGES = {
    "text/html": "html", "image/svg+xml": "svg", "application/vnd.ant.mermaid": "mermaid",
    "application/vnd.ant.react": "jsx", "text/markdown": "markdown",
}
SUMMARY_LIMIT = 200


def read(stream: Readable, source: str) -> Iterator[Item]:
    """Every conversation of an export, streamed: one element of the array at a time."""
    return exported_conversations(stream, source, convert)


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "chat_messages" in obj


def convert(obj: Any, source: str, line: int | None = None) -> ImportedConversation | Problem:
    if not isinstance(obj, dict):
        return Problem(source, "a conversation must be a JSON object", line)
    key = text_of(obj.get("uuid"))
    title = text_of(obj.get("name"), 300)
    messages = obj.get("chat_messages")
    if not isinstance(messages, list):
        return Problem(source, f"conversation {title or key or '?'!r} has no chat_messages: "
                       "skipped", line, key)
    messages = [m for m in messages if isinstance(m, dict)]
    model = text_of(obj.get("model"), 200)
    notes: list[str] = []
    forks: list[ImportedFork] = []
    if any(text_of(m.get("parent_message_uuid")) for m in messages):
        main, branches = _threads(messages, text_of(obj.get("current_leaf_message_uuid")))
        main_turns = _turns(main, source, model)
        for leaf, thread in branches:
            branch = _turns(thread, source, model)
            shared = 0
            for (a, _), (b, _) in zip(main_turns, branch, strict=False):
                if a != b:
                    break
                shared += 1
            own = [turn for _, turn in branch[shared:]]
            if own:
                forks.append(ImportedFork(leaf, shared - 1 if shared else None, own))
    else:
        ordered = sorted(
            enumerate(messages),
            key=lambda im: (_sort_time(im[1]), text_of(im[1].get("sender")) != "human", im[0]),
        )
        if [i for i, _ in ordered] != list(range(len(messages))):
            notes.append("messages put in time order (the export's list is not)")
        main_turns = _turns([m for _, m in ordered], source, model)
    if not main_turns:
        return Problem(source, f"conversation {title or key!r} has no message", line, key)
    payload = parts.Payload(PAYLOAD_PROVIDER, PAYLOAD_FORMAT, PAYLOAD_VERSION,
                            orjson.Fragment(orjson.dumps(obj)))
    return ImportedConversation(
        source=source, format=FORMAT, key=key, title=title,
        turns=[turn for _, turn in main_turns], created_at=timestamp(obj.get("created_at")),
        payload=payload, forks=forks, notes=notes, line=line,
    )


def _sort_time(message: dict[str, Any]) -> str:
    # ISO 8601 in UTC with a fixed width sorts as text; a missing time sorts first.
    return text_of(message.get("created_at"))


def _threads(messages: list[dict[str, Any]], current: str
             ) -> tuple[list[dict[str, Any]], list[tuple[str, list[dict[str, Any]]]]]:
    """The main thread and the other leaves' threads, following ``parent_message_uuid``."""
    by_id = {text_of(m.get("uuid")): m for m in messages if text_of(m.get("uuid"))}
    has_child = {text_of(m.get("parent_message_uuid")) for m in messages}

    def path(leaf: str) -> list[dict[str, Any]]:
        out, seen, node = [], set(), leaf
        while node in by_id and node not in seen:
            seen.add(node)
            out.append(by_id[node])
            node = text_of(by_id[node].get("parent_message_uuid"))
        out.reverse()
        return out

    leaves = [uuid for uuid in by_id if uuid not in has_child]
    if current not in by_id:
        current = max(leaves, key=lambda u: (_sort_time(by_id[u]), leaves.index(u)),
                      default="")
    main = path(current)
    on_main = {text_of(m.get("uuid")) for m in main}
    return main, [(leaf, path(leaf)) for leaf in leaves if leaf not in on_main]


def _turns(messages: list[dict[str, Any]], source: str, model: str
           ) -> list[tuple[str, ImportedTurn]]:
    out: list[tuple[str, ImportedTurn]] = []
    for message in messages:
        uuid = text_of(message.get("uuid")) or f"m{len(out)}"
        sender = text_of(message.get("sender"))
        name = f"{source}#{uuid}"
        created = timestamp(message.get("created_at"))
        if sender == "human":
            turn_parts = _user_parts(uuid, message)
            if turn_parts:
                out.append((uuid, ImportedTurn("user", [PartsResponse(name, turn_parts)],
                                               created)))
        elif sender == "assistant":
            agent_parts = _agent_parts(uuid, message, model)
            if agent_parts:
                out.append((uuid, ImportedTurn("agent", [PartsResponse(name, agent_parts)],
                                               created)))
    return out


def _file_names(message: dict[str, Any]) -> list[str]:
    names = []
    for entry in [*(message.get("attachments") or ()), *(message.get("files") or ())]:
        if isinstance(entry, dict):
            names.append(text_of(entry.get("file_name"), 200) or "file")
    return names


def _attachments(names: list[str]) -> parts.Artifact:
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return parts.Artifact("attachments", f"Attached: {shown}"[:SUMMARY_LIMIT * 2])


def _user_parts(uuid: str, message: dict[str, Any]) -> tuple[parts.Part, ...]:
    text = _message_text(message)
    out: list[parts.Part] = []
    if text.strip():
        out += [parts.BlockStart(uuid, "message"), parts.TextDelta(uuid, text),
                parts.BlockEnd(uuid)]
    names = _file_names(message)
    if names:
        out.append(_attachments(names))
    return tuple(out)


def _message_text(message: dict[str, Any]) -> str:
    blocks = message.get("content")
    if isinstance(blocks, list) and blocks:
        texts = [text_of(b.get("text")) for b in blocks
                 if isinstance(b, dict) and b.get("type") == "text"]
        if any(texts):
            return "\n\n".join(t for t in texts if t)
    return text_of(message.get("text"))


def _agent_parts(uuid: str, message: dict[str, Any], model: str
                 ) -> tuple[parts.Part, ...] | None:
    model = model or text_of(message.get("model"), 200)
    out: list[parts.Part] = [parts.ResponseStart(PROVIDER, model)] if model else []
    blocks = message.get("content")
    if isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") for b in blocks):
        shown = _blocks(uuid, blocks, out)
    else:
        shown = _tagged_text(uuid, text_of(message.get("text")), out)
    names = _file_names(message)
    if names:
        out.append(_attachments(names))
        shown = True
    if not shown:
        return None
    out.append(parts.ResponseEnd("end_turn"))
    return tuple(out)


# -- October 2024: inline tags --------------------------------------------------------------------


def _tagged_text(uuid: str, text: str, out: list[parts.Part]) -> bool:
    message: list[str] = []
    count = 0
    shown = False

    def flush() -> None:
        nonlocal count, shown
        body = "".join(message).strip()
        message.clear()
        if body:
            key = f"{uuid}:{count}"
            count += 1
            shown = True
            out.extend((parts.BlockStart(key, "message"), parts.TextDelta(key, body),
                        parts.BlockEnd(key)))

    last = 0
    for match in _TAG.finditer(text):
        message.append(text[last:match.start()])
        last = match.end()
        if match.group("thinking") is not None:
            thinking = match.group("thinking").strip()
            if thinking:
                flush()
                key = f"{uuid}:{count}"
                count += 1
                shown = True
                out.extend((parts.BlockStart(key, "reasoning"), parts.TextDelta(key, thinking),
                            parts.BlockEnd(key)))
        else:
            attrs = dict(_ATTR.findall(match.group("attrs") or ""))
            message.append(artifact_markdown(attrs, match.group("artifact") or ""))
    message.append(text[last:])
    flush()
    return shown


def artifact_markdown(attrs: dict[str, str], content: str) -> str:
    """An artifact as a titled fenced code block (its source is what the export holds)."""
    kind = attrs.get("type", "")
    language = attrs.get("language") or LANGUAGES.get(kind, "")
    title = attrs.get("title") or attrs.get("identifier") or "Artifact"
    detail = " · ".join(x for x in (attrs.get("identifier", ""), kind) if x)
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    body = content.strip("\n")
    heading = f"**Artifact: {title}**" + (f" ({detail})" if detail else "")
    return f"\n\n{heading}\n\n{fence}{language}\n{body}\n{fence}\n\n"


# -- newer exports: content blocks ----------------------------------------------------------------


def _blocks(uuid: str, blocks: list[Any], out: list[parts.Part]) -> bool:
    shown = False
    open_calls: list[tuple[str, str]] = []  # (activity id, tool name), awaiting their results
    titles: dict[str, str] = {}  # url -> title, from search results (citations name a url only)
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        kind = text_of(block.get("type"))
        key = f"{uuid}:{index}"
        if kind == "text":
            text = text_of(block.get("text"))
            if not text.strip():
                continue
            shown = True
            out.extend((parts.BlockStart(key, "message"), parts.TextDelta(key, text)))
            for cite in block.get("citations") or ():
                citation = _citation(key, cite, titles)
                if citation is not None:
                    out.append(citation)
            out.append(parts.BlockEnd(key))
        elif kind == "thinking":
            thinking = text_of(block.get("thinking"))
            if thinking.strip():
                shown = True
                out.extend((parts.BlockStart(key, "reasoning"), parts.TextDelta(key, thinking),
                            parts.BlockEnd(key)))
        elif kind == "tool_use":
            tool = text_of(block.get("name"))
            tool_input = block.get("input")
            if not isinstance(tool_input, dict):
                tool_input = {}
            shown = True
            if tool == "artifacts":
                body = artifact_markdown(
                    {k: text_of(v) for k, v in tool_input.items() if k != "content"},
                    text_of(tool_input.get("content")),
                ).strip()
                if body:
                    out.extend((parts.BlockStart(key, "message"), parts.TextDelta(key, body),
                                parts.BlockEnd(key)))
            elif tool in HOSTED_TOOLS:
                activity_id = text_of(block.get("id")) or key
                name = HOSTED_TOOLS[tool]
                activity_input = ({"query": text_of(tool_input.get("query"))}
                                  if name == WEB_SEARCH and tool_input.get("query")
                                  else dict(tool_input))
                open_calls.append((activity_id, tool))
                out.append(parts.Activity(activity_id, name, "started", activity_input))
            else:
                out.append(parts.Artifact("claude_ai.tool_use", f"{tool or 'tool'}"[:200]))
        elif kind == "tool_result":
            tool = text_of(block.get("name"))
            shown = True
            if tool not in HOSTED_TOOLS:
                out.append(parts.Artifact("claude_ai.tool_result", f"{tool or 'tool'} result"))
                continue
            match = next((c for c in reversed(open_calls) if c[1] == tool), None)
            if match is None:  # a result without its call in this message: start it here
                match = (text_of(block.get("tool_use_id")) or key, tool)
                out.append(parts.Activity(match[0], HOSTED_TOOLS[tool], "started"))
            else:
                open_calls.remove(match)
            sources = []
            for entry in block.get("content") or ():
                if isinstance(entry, dict) and text_of(entry.get("url")):
                    title = text_of(entry.get("title"), 500)
                    sources.append({"url": entry["url"], "title": title})
                    titles.setdefault(entry["url"], title)
            failed = bool(block.get("is_error"))
            summary = ("failed" if failed else
                       f"{len(sources)} result{'s' if len(sources) != 1 else ''}")
            out.append(parts.Activity(match[0], HOSTED_TOOLS[tool],
                                      "failed" if failed else "completed", summary=summary,
                                      sources=tuple(sources)))
        elif kind:
            shown = True
            out.append(parts.Artifact(f"claude_ai.{kind}"[:100], f"Claude.ai {kind} block"))
    return shown


def _citation(key: str, cite: Any, titles: dict[str, str]) -> parts.Citation | None:
    if not isinstance(cite, dict):
        return None
    details = cite.get("details")
    if not isinstance(details, dict):
        details = {}
    url = text_of(details.get("url")) or text_of(cite.get("url"))
    if not url:
        return None
    title = text_of(details.get("title"), 500) or text_of(cite.get("title"), 500) or \
        titles.get(url, "")
    start, end = cite.get("start_index"), cite.get("end_index")
    if not (isinstance(start, int) and isinstance(end, int)):
        start = end = None
    return parts.Citation(key, url, title, start=start, end=end)
