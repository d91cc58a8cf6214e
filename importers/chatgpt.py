"""ChatGPT data export: ``conversations.json`` (or the split ``conversations-NNN.json``).

Each conversation's ``mapping`` is a tree of message nodes. The thread the user last saw is the
path from the root to ``current_node`` (sibling order says nothing); it becomes the conversation.
Every other leaf is a branch (an edited question, a regenerated answer, an A/B comparison), kept
as a fork of it at the last turn the two share.

Along a thread, a user message is a user turn; the assistant and tool messages up to the next
user message are one agent turn, made into stream parts here and run through the one stream
runner like any provider response:

* ``tool`` messages from the browsing / search / code tools complete the hosted activity the
  assistant's call to that tool started (the query as input, a result summary and the pages as
  its sources), never a client tool call. A ``tool`` message may also carry a reasoning summary
  (o-series models): that is reasoning. Tools this reader does not know are kept as artifacts.
* Hidden and system messages, empty placeholders and custom instructions are not shown; they
  stay in the exported object, which is kept whole as the conversation's payload.
* Citations (``metadata.citations``, 2023-24, and ``metadata.content_references``, 2025) become
  attributions: their markers are removed from the text and the ranges remapped
  (``importers.chatgpt_citations``). The message tree is read by ``importers.chatgpt_tree``.
* ``metadata.model_slug`` names the model (provider ``openai``); none named, none recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from importers import chatgpt_citations
from importers.base import (
    ImportedConversation,
    ImportedFork,
    ImportedTurn,
    Item,
    PartsResponse,
    Problem,
    dict_of,
    exported_conversations,
    text_of,
    timestamp,
)
from importers.chatgpt_tree import MessageTree, shared_turns
from importers.jsonstream import Readable
from streams import parts
from streams.registries import ACTIVITY_NAMES, END_REASONS

FORMAT = "chatgpt"
PROVIDER = "openai"  # who served the models the export names
PAYLOAD_PROVIDER, PAYLOAD_FORMAT, PAYLOAD_VERSION = "chatgpt", "chatgpt.export", "1"

WEB_SEARCH, WEB_FETCH, CODE_EXECUTION = "web_search", "web_fetch", "code_execution"
for _name in (WEB_SEARCH, WEB_FETCH, CODE_EXECUTION):
    ACTIVITY_NAMES.register(_name, producer=__name__)
for _reason in ("end_turn", "max_tokens"):
    END_REASONS.register(_reason, producer=__name__)

WEB_TOOLS = ("browser", "web")  # and "web.run", "web.search", ...
CODE_TOOLS = ("python",)
_CALL = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\((.*)\)\s*$", re.DOTALL)
_RESULT_LINE = re.compile(r"^#\s*【(\d+)†([^†】]*)(?:†([^】]*))?】", re.MULTILINE)
SUMMARY_LIMIT = 200


def read(stream: Readable, source: str) -> Iterator[Item]:
    """Every conversation of an export, streamed: one element of the array at a time."""
    return exported_conversations(stream, source, convert)


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and ("mapping" in obj or "current_node" in obj)


def convert(obj: Any, source: str, line: int | None = None) -> ImportedConversation | Problem:
    """One exported conversation object."""
    if not isinstance(obj, dict):
        return Problem(source, "a conversation must be a JSON object", line)
    key = text_of(obj.get("conversation_id")) or text_of(obj.get("id"))
    title = text_of(obj.get("title"), 300)
    mapping = obj.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        return Problem(source, f"conversation {title or key or '?'!r} has no message tree "
                       "(no mapping): skipped", line, key)
    tree = MessageTree(mapping)
    notes: list[str] = []
    current = obj.get("current_node")
    main_leaf: str | None
    if isinstance(current, str) and current in tree.nodes:
        main_leaf = current
    else:
        main_leaf = tree.latest_leaf()
        if main_leaf is None:
            return Problem(source, f"conversation {title or key!r} has no messages", line, key)
        roots = tree.orphan_roots()
        notes.append(
            "current_node is not in the message tree: imported the thread ending at its latest "
            f"message ({len(roots)} node{'s' if len(roots) != 1 else ''} whose parent is "
            "missing, imported as orphans)"
        )
    main_path = tree.path(main_leaf)
    main_turns = _turns(tree, main_path, source)
    forks = []
    for leaf in tree.leaves():
        if leaf in main_path:
            continue
        branch = _turns(tree, tree.path(leaf), source)
        shared = shared_turns(main_turns, branch)
        own = [turn for _, turn in branch[shared:]]
        if own:
            forks.append(ImportedFork(leaf, shared - 1 if shared else None, own))
    if not main_turns and not forks:
        return Problem(source, f"conversation {title or key!r} has no visible message", line,
                       key)
    payload = parts.Payload(PAYLOAD_PROVIDER, PAYLOAD_FORMAT, PAYLOAD_VERSION,
                            orjson.Fragment(orjson.dumps(obj)))
    return ImportedConversation(
        source=source, format=FORMAT, key=key, title=title,
        turns=[turn for _, turn in main_turns], created_at=timestamp(obj.get("create_time")),
        payload=payload, forks=forks, notes=notes, line=line,
    )


# -- messages to turns ---------------------------------------------------------------------------



def _role(message: dict[str, Any]) -> str:
    return text_of(dict_of(message.get("author")).get("role"))


def _hidden(message: dict[str, Any]) -> bool:
    metadata = dict_of(message.get("metadata"))
    return bool(metadata.get("is_visually_hidden_from_conversation")
                or metadata.get("is_user_system_message"))


def _turns(tree: MessageTree, path: list[str], source: str
           ) -> list[tuple[tuple[str, ...], ImportedTurn]]:
    """The turns of one thread, each with the node ids it is made of (its identity)."""
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    for node_id in path:
        message = tree.message(node_id)
        if message is None:
            continue
        role = _role(message)
        if role == "user":
            if _hidden(message) or not _user_content(message):
                continue  # custom instructions, an empty message
            groups.append(("user", [message]))
        elif role in ("assistant", "tool"):
            if groups and groups[-1][0] == "agent":
                groups[-1][1].append(message)
            else:
                groups.append(("agent", [message]))
        # system messages are never shown; they stay in the payload
    out = []
    for role, messages in groups:
        ids = tuple(text_of(m.get("id")) for m in messages)
        name = f"{source}#{ids[0] or '?'}"
        created = timestamp(messages[0].get("create_time"))
        if role == "user":
            out.append((ids, ImportedTurn("user", [PartsResponse(name, _user_parts(messages[0]))],
                                          created)))
            continue
        agent_parts = _Agent(messages).parts()
        if agent_parts is None:
            continue  # only placeholders and hidden messages: nothing to show
        out.append((ids, ImportedTurn("agent", [PartsResponse(name, agent_parts)], created)))
    return out


def _content_text(content: dict[str, Any]) -> str:
    pieces = [p for p in content.get("parts") or () if isinstance(p, str)]
    if not pieces and isinstance(content.get("text"), str):
        pieces = [content["text"]]
    return "\n\n".join(pieces) if len(pieces) > 1 else (pieces[0] if pieces else "")


def _attachments(message: dict[str, Any]) -> list[str]:
    metadata = dict_of(message.get("metadata"))
    names = [text_of(dict_of(a).get("name"), 200) or "file"
             for a in metadata.get("attachments") or () if isinstance(a, dict)]
    if not names:
        content = dict_of(message.get("content"))
        names = ["image" for p in content.get("parts") or ()
                 if isinstance(p, dict) and "asset_pointer" in p]
    return names


def _user_content(message: dict[str, Any]) -> bool:
    content = dict_of(message.get("content"))
    if text_of(content.get("content_type")) == "user_editable_context":
        return False
    return bool(_content_text(content).strip() or _attachments(message))


def _user_parts(message: dict[str, Any]) -> tuple[parts.Part, ...]:
    key = text_of(message.get("id")) or "user"
    text = _content_text(dict_of(message.get("content")))
    out: list[parts.Part] = []
    if text:
        out += [parts.BlockStart(key, "message"), parts.TextDelta(key, text),
                parts.BlockEnd(key)]
    names = _attachments(message)
    if names:
        out.append(_attachment_artifact(names))
    return tuple(out)


def _attachment_artifact(names: list[str]) -> parts.Artifact:
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return parts.Artifact("attachments", f"Attached: {shown}"[:SUMMARY_LIMIT * 2])


@dataclass
class _Call:
    """A hosted activity the assistant started by addressing a tool, awaiting its results."""

    activity_id: str
    name: str
    tool: str
    input: dict[str, Any]
    sources: list[dict[str, str]] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    results: int = 0


class _Agent:
    """One agent turn's messages as one response's stream parts."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.out: list[parts.Part] = []
        self.call: _Call | None = None
        self.shown = False  # anything besides the response frame

    def parts(self) -> tuple[parts.Part, ...] | None:
        model = next((m for m in (self._model(msg, "assistant") for msg in self.messages) if m),
                     "") or next((m for m in (self._model(msg, "tool")
                                              for msg in self.messages) if m), "")
        if model:
            self.out.append(parts.ResponseStart(PROVIDER, model))
        last = self._last_assistant()
        for message in self.messages:
            self._message(message, cut=message is last and _cut(message))
        self._close_call()
        if not self.shown:
            return None
        if last is None or not _cut(last):
            self.out.append(parts.ResponseEnd(_end_reason(last)))
        return tuple(self.out)

    @staticmethod
    def _model(message: dict[str, Any], role: str) -> str:
        if _role(message) != role:
            return ""
        return text_of(dict_of(message.get("metadata")).get("model_slug"), 200)

    def _last_assistant(self) -> dict[str, Any] | None:
        for message in self.messages[::-1]:
            if _role(message) == "assistant":
                return message
        return None

    def _message(self, message: dict[str, Any], *, cut: bool) -> None:
        content = dict_of(message.get("content"))
        ctype = text_of(content.get("content_type"))
        if _role(message) == "tool":
            self._tool_message(message, content, ctype)
            return
        recipient = text_of(message.get("recipient")) or "all"
        if recipient != "all":
            self._call(message, recipient, content)
            return
        if _hidden(message):
            return
        if ctype == "thoughts":
            self._thoughts(message, content)
        elif ctype == "reasoning_recap":
            return  # "Thought for 8s": the thoughts themselves are their own message
        elif ctype in ("text", "multimodal_text"):
            self._text(message, _content_text(content), cut=cut)
        elif ctype == "code":
            code = text_of(content.get("text"))
            if code.strip():
                language = text_of(content.get("language"))
                language = "" if language == "unknown" else language
                fence = _fence(code)
                self._text(message, f"{fence}{language}\n{code}\n{fence}", cut=cut)
        else:
            text = _content_text(content)
            if text.strip():
                self._text(message, text, cut=cut)
            else:
                self.shown = True
                self.out.append(parts.Artifact(f"chatgpt.{ctype or 'content'}",
                                               f"ChatGPT {ctype or 'content'} (not shown)"))

    # -- text ---------------------------------------------------------------------------------

    def _text(self, message: dict[str, Any], text: str, *, cut: bool) -> None:
        metadata = dict_of(message.get("metadata"))
        if self.call is not None:
            if not self.call.sources and metadata.get("search_result_groups"):
                # 2025 search: the results ride on the answer, not on the tool message.
                groups = metadata["search_result_groups"]
                self.call.sources = chatgpt_citations.group_sources(groups)
                self.call.results = len(self.call.sources)
            self._close_call()
        if not text.strip():
            return  # a placeholder before the real answer
        key = text_of(message.get("id")) or f"m{len(self.out)}"
        clean, citations = chatgpt_citations.citations(key, text, metadata)
        self.shown = True
        self.out.append(parts.BlockStart(key, "message"))
        self.out.append(parts.TextDelta(key, clean))
        self.out.extend(citations)
        if not cut:
            self.out.append(parts.BlockEnd(key))

    def _thoughts(self, message: dict[str, Any], content: dict[str, Any]) -> None:
        pieces = []
        for thought in content.get("thoughts") or ():
            thought = dict_of(thought)
            summary, body = text_of(thought.get("summary")), text_of(thought.get("content"))
            pieces.append(f"**{summary}**\n\n{body}" if summary and body else summary or body)
        self._reasoning(message, "\n\n".join(p for p in pieces if p))

    def _reasoning(self, message: dict[str, Any], text: str) -> None:
        if not text.strip():
            return
        key = text_of(message.get("id")) or f"r{len(self.out)}"
        self.shown = True
        self.out += [parts.BlockStart(key, "reasoning"), parts.TextDelta(key, text),
                     parts.BlockEnd(key)]

    # -- tools --------------------------------------------------------------------------------

    def _call(self, message: dict[str, Any], recipient: str, content: dict[str, Any]) -> None:
        self._close_call()
        code = text_of(content.get("text")) or _content_text(content)
        activity_id = text_of(message.get("id")) or f"call{len(self.out)}"
        tool = recipient.split(".")[0]
        self.shown = True
        if tool in WEB_TOOLS:
            command, argument = _command(code)
            name = WEB_SEARCH if command in ("search", "") and argument else WEB_FETCH
            activity_input = {"query": argument} if name == WEB_SEARCH else {"command": code}
        elif tool in CODE_TOOLS:
            name, activity_input = CODE_EXECUTION, {"code": code}
        else:
            # A plugin, an action, image generation: no hosted activity this reader knows.
            self.out.append(parts.Artifact(
                "chatgpt.tool_call", f"{recipient}: {_clip(code)}" if code else recipient))
            return
        self.call = _Call(activity_id, name, tool, activity_input)
        self.out.append(parts.Activity(activity_id, name, "started", activity_input))

    def _tool_message(self, message: dict[str, Any], content: dict[str, Any], ctype: str
                      ) -> None:
        author = dict_of(message.get("author"))
        tool = text_of(author.get("name")).split(".")[0]
        metadata = dict_of(message.get("metadata"))
        if tool in WEB_TOOLS:
            call = self.call
            if call is None or call.tool not in WEB_TOOLS:
                call = self._call_from_result(message, metadata)
            _web_results(call, content, ctype, metadata)
            return
        if tool in CODE_TOOLS:
            call = self.call
            if call is None or call.name != CODE_EXECUTION:
                self._close_call()
                call = self.call = _Call(text_of(message.get("id")) or "code", CODE_EXECUTION,
                                         tool, {})
                self.out.append(parts.Activity(call.activity_id, CODE_EXECUTION, "started"))
            output = text_of(content.get("text")) or _content_text(content)
            call.results += 1
            if output.strip():
                call.summaries.append(_clip(output.strip().splitlines()[0]))
            self.shown = True
            return
        text = _content_text(content)
        if ctype in ("text", "thoughts") and (
            "finished_text" in metadata or "initial_text" in metadata or ctype == "thoughts"
        ):
            # o-series reasoning summaries arrive as tool messages: they are reasoning.
            if ctype == "thoughts":
                self._thoughts(message, content)
            else:
                self._reasoning(message, text)
            return
        if ctype == "reasoning_recap":
            return
        if _hidden(message) and not text.strip():
            return
        self._close_call()
        self.shown = True
        label = text_of(author.get("name"), 100) or "tool"
        self.out.append(parts.Artifact("chatgpt.tool_result",
                                       f"{label}: {_clip(text)}" if text.strip() else label))

    def _call_from_result(self, message: dict[str, Any], metadata: dict[str, Any]) -> _Call:
        """A web result with no call before it in this thread (a cut tree): the activity is
        started from what the result says it ran."""
        self._close_call()
        command = text_of(metadata.get("command"))
        args = metadata.get("args")
        argument = text_of(args[0]) if isinstance(args, list) and args else ""
        name = WEB_SEARCH if command == "search" else WEB_FETCH
        activity_input = ({"query": argument} if name == WEB_SEARCH
                          else {"command": f"{command}({argument})" if command else "open"})
        call = self.call = _Call(text_of(message.get("id")) or "web", name, "web", activity_input)
        self.shown = True
        self.out.append(parts.Activity(call.activity_id, name, "started", activity_input))
        return call

    def _close_call(self) -> None:
        call, self.call = self.call, None
        if call is None:
            return
        if call.name == WEB_SEARCH:
            summary = (f"{call.results} result{'s' if call.results != 1 else ''}"
                       if call.results else "no results in the export")
        elif call.name == WEB_FETCH:
            titles = [s["title"] or s["url"] for s in call.sources]
            summary = (_clip(titles[0]) if len(titles) == 1 else
                       f"{len(titles)} pages" if titles else "no page in the export")
        else:
            summary = call.summaries[-1] if call.summaries else (
                "ran" if call.results else "no output in the export")
        self.out.append(parts.Activity(call.activity_id, call.name, "completed",
                                       summary=summary, sources=tuple(call.sources)))


def _web_results(call: _Call, content: dict[str, Any], ctype: str, metadata: dict[str, Any]
                 ) -> None:
    if ctype == "tether_browsing_display":
        listed = chatgpt_citations.cite_sources(metadata)
        if listed:
            call.sources.extend(listed)
            call.results += len(listed)
        else:
            result = text_of(content.get("result"))
            call.results += len(_RESULT_LINE.findall(result))
    elif ctype == "tether_quote":
        url, title = text_of(content.get("url")), text_of(content.get("title"), 500)
        if url:
            call.sources.append({"url": url, "title": title})
        call.results += 1
    else:
        listed = chatgpt_citations.cite_sources(metadata)
        call.sources.extend(listed)
        call.results += len(listed)


def _command(code: str) -> tuple[str, str]:
    """``search("q")`` -> ("search", "q"); ``mclick([0, 3])`` -> ("mclick", "[0, 3]")."""
    match = _CALL.match(code)
    if not match:
        return "", code.strip()
    name, argument = match.group(1), match.group(2).strip()
    if len(argument) >= 2 and argument[0] == argument[-1] and argument[0] in "\"'":
        try:
            argument = orjson.loads(argument) if argument[0] == '"' else argument[1:-1]
        except orjson.JSONDecodeError:
            argument = argument[1:-1]
    return name.split(".")[-1], str(argument)


def _cut(message: dict[str, Any]) -> bool:
    """Whether the message stopped before it finished (the user stopped it, the app failed)."""
    finish = dict_of(dict_of(message.get("metadata")).get("finish_details"))
    return message.get("status") == "in_progress" or finish.get("type") == "interrupted"


def _end_reason(message: dict[str, Any] | None) -> str:
    if message is None:
        return "end_turn"
    finish = dict_of(dict_of(message.get("metadata")).get("finish_details"))
    return "max_tokens" if finish.get("type") in ("max_tokens", "length") else "end_turn"


def _clip(text: str, limit: int = SUMMARY_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fence(code: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    return "`" * max(3, longest + 1)
