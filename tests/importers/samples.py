"""Hand-written chat-export samples, for what the real fixtures do not show.

* ``chatgpt_tools``: a ChatGPT conversation that browses (``search`` then ``mclick``), runs code
  (the ``python`` tool), and stops at its token limit. Shaped like the 2023-24 fixture
  (``librechat__chatgpt-export.json``): tool calls are assistant ``code`` messages addressed to
  the tool, results are ``tool`` messages from it. Its citation's offsets are 3 code points
  off the marker they name (the trap of offsets that disagree with the text).
* ``chatgpt_plain``: a question answered in one message that finished normally.
* ``claude_blocks``: a Claude.ai conversation in the NEWER export shape (``content`` blocks,
  ``parent_message_uuid``, a named model). No export of that shape under a permissive licence
  was found (the chat-exports README says so), so this one is written by hand in the documented
  content-block shape: ``thinking``, ``tool_use`` / ``tool_result`` for ``web_search`` (results
  of type ``knowledge`` with ``title``/``url``), ``web_fetch`` and ``repl``, and ``text`` blocks
  whose ``citations`` carry ``start_index``/``end_index`` and ``details: {type:
  "web_search_citation", url}``. Offsets are taken to count code points (as ChatGPT's do); no
  real file settles it, so the sample puts a non-ASCII character before a cited span and the
  stream runner checks every range against the text.
"""

from __future__ import annotations

from typing import Any


def _node(node_id: str, parent: str | None, children: list[str], message: dict | None) -> dict:
    return {"id": node_id, "parent": parent, "children": children, "message": message}


def _message(node_id: str, role: str, content: dict, *, name: str | None = None,
             recipient: str = "all", model: str | None = None, finish: str | None = None,
             status: str = "finished_successfully", metadata: dict | None = None,
             created: float = 1_700_000_000.0) -> dict:
    meta = dict(metadata or {})
    if model:
        meta["model_slug"] = model
    if finish:
        meta["finish_details"] = {"type": finish}
    return {"id": node_id, "author": {"role": role, "name": name, "metadata": {}},
            "create_time": created, "content": content, "status": status, "end_turn": None,
            "weight": 1.0, "metadata": meta, "recipient": recipient}


def chatgpt_tools() -> dict[str, Any]:
    text = lambda s: {"content_type": "text", "parts": [s]}  # noqa: E731
    code = lambda s: {"content_type": "code", "language": "unknown", "text": s}  # noqa: E731
    nodes = [
        ("root", None, None),
        ("u1", "root", _message("u1", "user", text("How tall is Mount Everest, squared?"))),
        ("a1", "u1", _message("a1", "assistant", code('search("Mount Everest height")'),
                              recipient="browser", model="gpt-4")),
        ("t1", "a1", _message("t1", "tool", {
            "content_type": "tether_browsing_display",
            "result": "# 【0†Everest†example.org】\n8,849 m\n# 【1†Height†example.com】\n8849"},
            name="browser", metadata={"_cite_metadata": {"metadata_list": [
                {"type": "webpage", "title": "Everest", "url": "https://example.org/everest"},
                {"type": "webpage", "title": "Height", "url": "https://example.com/height"},
                {"type": "webpage", "title": "Search results for query", "url": ""}]},
                "command": "search", "args": ["Mount Everest height"]})),
        ("a2", "t1", _message("a2", "assistant", code("mclick([0])"), recipient="browser",
                              model="gpt-4")),
        ("t2", "a2", _message("t2", "tool", {
            "content_type": "tether_quote", "url": "https://example.org/everest",
            "domain": "example.org", "title": "Everest", "text": "It is 8,849 m high."},
            name="browser")),
        ("a3", "t2", _message("a3", "assistant", code("8849 ** 2"), recipient="python",
                              model="gpt-4")),
        ("t3", "a3", _message("t3", "tool", {"content_type": "execution_output",
                                             "text": "78304801"}, name="python")),
        ("a4", "t3", _message("a4", "assistant", text(
            "Everest is 8,849 m high【6†source】. Squared, that is 78,304,801 and"),
            model="gpt-4", finish="max_tokens", metadata={"citations": [{
                "start_ix": 26, "end_ix": 36, "citation_format_type": "tether_og",
                "metadata": {"type": "webpage", "title": "Everest",
                             "url": "https://example.org/everest", "text": "…",
                             "extra": {"cited_message_idx": 6, "evidence_text": "source"}}}]})),
    ]
    mapping = {}
    for node_id, parent, message in nodes:
        children = [n for n, p, _ in nodes if p == node_id]
        mapping[node_id] = _node(node_id, parent, children, message)
    return {"title": "Everest squared", "create_time": 1_700_000_000.0,
            "update_time": 1_700_000_100.0, "mapping": mapping, "current_node": "a4",
            "conversation_id": "sample-tools", "id": "sample-tools", "default_model_slug": None}


def chatgpt_plain() -> dict[str, Any]:
    """A question and an answer that finished normally (``finish_details: stop``)."""
    text = lambda s: {"content_type": "text", "parts": [s]}  # noqa: E731
    nodes = [
        ("root", None, None),
        ("u1", "root", _message("u1", "user", text("Is the sea salty?"))),
        ("a1", "u1", _message("a1", "assistant", text("Yes."), model="gpt-4o", finish="stop")),
    ]
    mapping = {node_id: _node(node_id, parent, [n for n, p, _ in nodes if p == node_id], message)
               for node_id, parent, message in nodes}
    return {"title": "Salt", "create_time": 1_700_000_000.0, "update_time": 1_700_000_010.0,
            "mapping": mapping, "current_node": "a1", "conversation_id": "sample-plain",
            "id": "sample-plain", "default_model_slug": None}


def claude_blocks() -> dict[str, Any]:
    answer = "Café Central opened in 1876. It is in Vienna."
    cited = "Café Central opened in 1876."
    root = "00000000-0000-4000-8000-000000000000"

    def msg(uuid: str, parent: str, sender: str, content: list[dict], **extra: Any) -> dict:
        return {"uuid": uuid, "text": "", "content": content, "sender": sender,
                "index": 0, "created_at": f"2025-03-01T10:00:0{uuid[-1]}.000000Z",
                "updated_at": f"2025-03-01T10:00:0{uuid[-1]}.000000Z", "attachments": [],
                "files": [], "parent_message_uuid": parent, **extra}

    return {
        "uuid": "sample-claude", "name": "Coffee houses", "model": "claude-3-7-sonnet-20250219",
        "created_at": "2025-03-01T10:00:00.000000Z", "updated_at": "2025-03-01T10:05:00.000000Z",
        "account": {"uuid": "acct"}, "current_leaf_message_uuid": "m4",
        "chat_messages": [
            msg("m1", root, "human", [{"type": "text", "text": "When did Café Central open?"}],
                attachments=[{"file_name": "notes.txt", "file_size": 10, "file_type": "txt",
                              "extracted_content": "see Vienna"}]),
            msg("m2", "m1", "assistant", [
                {"type": "thinking", "thinking": "Search for it.", "summaries": []},
                {"type": "tool_use", "name": "web_search", "input": {"query": "Café Central"}},
                {"type": "tool_result", "name": "web_search", "is_error": False, "content": [
                    {"type": "knowledge", "title": "Café Central – history",
                     "url": "https://example.org/cafe", "text": "Opened 1876."}]},
                {"type": "tool_use", "name": "web_fetch", "input": {"url": "https://x.test/"}},
                {"type": "tool_result", "name": "web_fetch", "is_error": True, "content": []},
                {"type": "tool_use", "name": "repl", "input": {"code": "2025 - 1876"}},
                {"type": "tool_result", "name": "repl", "is_error": False, "content": []},
                {"type": "text", "text": answer, "citations": [
                    {"uuid": "c1", "start_index": 0, "end_index": len(cited),
                     "details": {"type": "web_search_citation",
                                 "url": "https://example.org/cafe"}}]},
            ]),
            # A regenerated answer: the branch the user did not keep.
            msg("m3", "m1", "assistant", [{"type": "text", "text": "In 1876."}]),
            msg("m4", "m2", "human", [{"type": "text", "text": "Thanks!"}]),
        ],
    }
