"""Gemini as the recorded stand-in serves it (``providers.standin``).

What the client holds: the parts of every chunk's first candidate (a stream with no
``finishReason`` was cut: nothing is checked). Consecutive text parts of one kind (thought or
not) are one run: a client may send them merged or as received, so runs are compared by their
text and the signatures they carry; an empty run carries nothing. A function call whose
arguments stream (``willContinue``, ``partialArgs``) is the whole call its pieces make.

After a cut ("Thought signatures", ai.google.dev: a signature goes back exactly where it came;
only function calls are validated strictly): its first runs as served, then at most a prefix of
the run it was cut in, with the signatures that had arrived.

A ``streamGenerateContent`` asked for without ``alt=sse`` is sent as one JSON array.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from providers.google.common import PROVIDER
from providers.standin import BaseStandIn, Served, Unit, clean, dumps, keys


class GoogleStandIn(BaseStandIn):
    def serves_path(self, path: str) -> bool:
        return "/models/" in path and (":generateContent" in path
                                       or ":streamGenerateContent" in path)

    def json_array(self, path: str, params: dict[str, list[str]]) -> bool:
        return ":streamGenerateContent" in path and "sse" not in params.get("alt", [])

    def served(self, rows: list[Any]) -> Served | None:
        finished = any(_finish_reason(row) for row in rows)
        parts = _calls([part for row in rows for part in _parts(row)])
        return Served(PROVIDER, tuple(parts)) if parts and finished else None

    def text(self, block: dict[str, Any]) -> str:
        return "" if block.get("thought") else str(block.get("text") or "")

    def sent_back(self, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
        return [[p for p in c.get("parts") or () if isinstance(p, dict)]
                for c in body.get("contents") or ()
                if isinstance(c, dict) and c.get("role") == "model"]

    def units(self, blocks: Iterable[dict[str, Any]]) -> list[Unit]:
        out = []
        for run in _runs(blocks):
            if isinstance(run, dict) and "run" in run:
                found = frozenset(f"thoughtSignature:{s}" for s in run["signatures"])
                text = "" if run["run"] else run["text"]
            else:
                found, text = frozenset(keys(run)), self.text(run)
            out.append(Unit(dumps(run), found, text, run))
        return out

    def cut_piece(self, piece: Unit, served: Unit) -> bool:
        run, whole = piece.block, served.block
        return (isinstance(run, dict) and isinstance(whole, dict) and "run" in run
                and run.get("run") == whole.get("run") and bool(run["text"] or run["signatures"])
                and whole["text"].startswith(run["text"])
                and whole["signatures"][:len(run["signatures"])] == run["signatures"])


def _finish_reason(row: Any) -> bool:
    candidates = row.get("candidates") if isinstance(row, dict) else None
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return isinstance(first, dict) and bool(first.get("finishReason"))


def _calls(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed function-call arguments put together: the call with its ``args``."""
    out: list[dict[str, Any]] = []
    open_call: dict[str, Any] | None = None
    for part in parts:
        call = part.get("functionCall")
        if not isinstance(call, dict):
            out.append(part)
            continue
        if open_call is None and call.get("willContinue") and "args" not in call:
            open_call = {k: v for k, v in part.items() if k != "functionCall"}
            open_call["functionCall"] = {k: v for k, v in call.items() if k != "willContinue"}
            open_call["functionCall"]["args"] = {}
            out.append(open_call)
            continue
        if open_call is not None:
            args = open_call["functionCall"]["args"]
            for piece in call.get("partialArgs") or ():
                _put(args, str(piece.get("jsonPath", "")), piece)
            if not call.get("willContinue"):
                open_call = None
            continue
        out.append(part)
    return out


def _put(args: dict[str, Any], path: str, piece: dict[str, Any]) -> None:
    steps = path.removeprefix("$.").split(".") if path.startswith("$.") else [path]
    target = args
    for key in steps[:-1]:
        target = target.setdefault(key, {})
    last = steps[-1]
    if "stringValue" in piece:
        target[last] = str(target.get(last, "")) + piece["stringValue"]
    else:
        for name in ("numberValue", "boolValue", "nullValue"):
            if name in piece:
                target[last] = None if name == "nullValue" else piece[name]


def _parts(row: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(row, dict):
        return
    candidates = row.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        return
    content = candidates[0].get("content") if isinstance(candidates[0], dict) else None
    for part in (content or {}).get("parts") or ():
        if isinstance(part, dict):
            yield part


def _runs(parts: Iterable[dict[str, Any]]) -> list[Any]:
    """Gemini parts with consecutive text parts of one kind merged into one run: (thought,
    text, the signatures in it); other parts as they are."""
    runs: list[Any] = []
    for part in parts:
        if isinstance(part.get("text"), str) and set(part) <= {"text", "thought",
                                                                "thoughtSignature"}:
            thought = bool(part.get("thought"))
            signature = part.get("thoughtSignature")
            last = runs[-1] if runs else None
            if isinstance(last, dict) and last.get("run") == thought:
                last["text"] += part["text"]
                if signature:
                    last["signatures"].append(signature)
                continue
            runs.append({"run": thought, "text": part["text"],
                         "signatures": [signature] if signature else []})
        else:
            runs.append(clean(part))
    return [r for r in runs if not (isinstance(r, dict) and r.get("run") is not None
                                    and not r["text"] and not r["signatures"])]
