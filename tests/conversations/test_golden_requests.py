"""Golden requests: where a recorded cassette holds a request that sends an earlier response
back (a ``pause_turn`` continuation, the next question, a tool round), the earlier interactions
are imported into Turnscope and the request built from the stored turns must carry the same
blocks as the one the client really sent: same types, ids, encrypted_content,
encrypted_index, signatures, in the same order.

The cassettes are the shared pydantic-ai recordings (``../shared/fixtures``, read in place).
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import yaml

from conversations import uploads
from conversations.models import Conversation
from conversations.next_request import request_for_continuation, request_for_next_turn
from providers import served
from providers.requests import TurnRequest
from tests.support import shared_path

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Golden:
    fixture_set: str
    provider: str
    name: str
    upto: int  # the interactions imported; the request of interaction ``upto`` is the golden
    kind: str  # "continuation" (pause_turn) or "next" (the next request of the conversation)
    compared: tuple[int | None, int | None] = (None, None)  # the messages / contents compared

    @property
    def id(self) -> str:
        return self.name.removeprefix("pydantic-ai__").removesuffix(".yaml")


GOLDEN = [
    Golden("providers-more", "anthropic", "pydantic-ai__test_pause_turn_web_search_streaming_vcr"
           ".yaml", 1, "continuation"),
    Golden("providers-more", "anthropic", "pydantic-ai__test_pause_turn_web_search_vcr.yaml", 1,
           "continuation"),
    Golden("providers", "google", "pydantic-ai__test_google_model_web_search_tool.yaml", 1,
           "next"),
    Golden("providers", "google", "pydantic-ai__test_google_model_web_search_tool_stream.yaml",
           1, "next"),
    # A client tool round: the host's functionResponse is not Turnscope's to know; the model
    # content before it (a functionCall with its id and thoughtSignature) is.
    Golden("providers", "google", "pydantic-ai__test_google_vertex_tool_combination_omits_"
           "include_server_side_tool_invocations.yaml", 1, "next", (0, 2)),
]


def cassette(golden: Golden) -> dict[str, Any]:
    path = shared_path("fixtures", golden.fixture_set, golden.provider, golden.name)
    return yaml.safe_load(path.read_bytes())


def import_prefix(doc: dict[str, Any], upto: int, owner: Any) -> Conversation:
    """The cassette's first ``upto`` interactions imported through the VCR importer."""
    raw = yaml.safe_dump({**doc, "interactions": doc["interactions"][:upto]}).encode()
    results = list(uploads.import_files(
        [uploads.Upload("prefix.yaml", lambda: io.BytesIO(raw), len(raw))], owner=owner))
    [imported] = [r for r in results if isinstance(r, uploads.Imported)]
    return imported.conversation


def turn_request(provider: str, body: dict[str, Any], uri: str, prompt: str) -> TurnRequest:
    """The TurnRequest that asks for what the golden request asked for, of the service the
    recorded request went to (Vertex AI, for some)."""
    host = served.by_host(uri)
    host = "" if host == provider else host
    if provider == "anthropic":
        tools = body.get("tools") or []
        thinking = body.get("thinking") or {}
        return TurnRequest(
            provider, body["model"], prompt,
            web_search=any(t.get("name") == "web_search" for t in tools),
            max_tokens=body.get("max_tokens"), thinking=thinking.get("budget_tokens"),
            host=host)
    model = uri.split("/models/")[1].split(":")[0]
    search = any("googleSearch" in t or "google_search" in t for t in body.get("tools") or [])
    return TurnRequest(provider, model, prompt, web_search=search, host=host)


def canonical(value: Any) -> Any:
    """A block as the API reads it: absent and null fields are the same, and Gemini's
    ``thoughtSignature`` is bytes (clients re-encode it as base64url)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item is None:
                continue
            if key == "thoughtSignature" and isinstance(item, str):
                out[key] = base64.urlsafe_b64decode(item.replace("+", "-").replace("/", "_")
                                                    + "=" * (-len(item) % 4))
            else:
                out[key] = canonical(item)
        return out
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def without_client_changes(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for block in blocks:
        block = {k: v for k, v in block.items() if k != "caller"}
        if isinstance(block.get("content"), list):
            block["content"] = [{k: v for k, v in r.items() if k != "title"}
                                if isinstance(r, dict) else r for r in block["content"]]
        out.append(block)
    return out


def messages_of(provider: str, body: dict[str, Any]) -> list[Any]:
    return body["messages"] if provider == "anthropic" else body["contents"]


def last_user_text(provider: str, body: dict[str, Any]) -> str:
    for message in reversed(messages_of(provider, body)):
        if message.get("role") == "user":
            blocks = message.get("content") if provider == "anthropic" else message["parts"]
            texts = [b["text"] for b in blocks if isinstance(b, dict) and "text" in b]
            if texts:
                return texts[-1]
    return ""


def replay_fingerprint(blocks: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What exact replay is judged by: each block's type, id, signature, encrypted content
    and the encrypted index of each of its citations, in order."""
    out = []
    for block in blocks:
        results = block.get("content") if isinstance(block.get("content"), list) else []
        out.append((
            block.get("type") or next(iter(k for k in block if k != "thoughtSignature"), ""),
            block.get("id") or block.get("tool_use_id")
            or (block.get("functionCall") or {}).get("id"),
            block.get("signature") or block.get("data"),
            canonical(block).get("thoughtSignature"),
            tuple(r.get("encrypted_content") for r in results if isinstance(r, dict)),
            tuple(c.get("encrypted_index") for c in block.get("citations") or ()),
        ))
    return out


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda g: g.id)
def test_the_request_built_from_stored_turns_is_the_recorded_one(golden, django_user_model):
    doc = cassette(golden)
    recorded = doc["interactions"][golden.upto]["request"]
    expected = recorded.get("parsed_body") or orjson.loads(recorded["body"])
    owner = django_user_model.objects.create(username="golden")
    conversation = import_prefix(doc, golden.upto, owner)
    turns = list(conversation.turns.order_by("index"))
    if golden.kind == "continuation":
        # The turn that paused is continued; its prompt is the user turn stored before it.
        asked = turn_request(golden.provider, expected, recorded["uri"], "")
        built = request_for_continuation(conversation, asked, turns[-1].index)
    else:
        prompt = last_user_text(golden.provider, expected)
        asked = turn_request(golden.provider, expected, recorded["uri"], prompt)
        built = request_for_next_turn(conversation, asked)
    sent = messages_of(golden.provider, built.body)[slice(*golden.compared)]
    wanted = messages_of(golden.provider, expected)[slice(*golden.compared)]
    assert [m["role"] for m in sent] == [m["role"] for m in wanted]
    key = "content" if golden.provider == "anthropic" else "parts"
    for ours, theirs in zip(sent, wanted, strict=True):
        assert replay_fingerprint(ours[key]) == replay_fingerprint(theirs[key])
        # And every other field of every block, as the API reads it, but what the recording
        # client itself changed in what it was served: pydantic-ai leaves out a
        # server_tool_use's ``caller`` (the API takes it back) and folds some punctuation in
        # search result titles (the wire has "–", it sent "-").
        assert without_client_changes(canonical(ours[key])) == without_client_changes(
            canonical(theirs[key]))
    if golden.provider == "anthropic":
        for field in ("model", "max_tokens", "thinking"):
            assert built.body[field] == expected[field], field
        assert built.body["stream"] is True  # live calls always stream
        assert [(t["type"], t["name"]) for t in built.body["tools"]] == [
            (t["type"], t["name"]) for t in expected["tools"]]

