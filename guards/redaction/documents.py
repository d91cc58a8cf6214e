"""Redaction of assembled event records and export documents, keeping every attribution range
pointed at the same characters of the redacted text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from guards.redaction.rules import redact_text, redact_value, redact_with_map


def _any_secret(records: list[Any]) -> bool:
    """Whether any record may hold a credential: two scans over all of them at once (plain texts
    joined by newlines, structured values as one JSON text) instead of a dozen rules per string.
    A false positive only costs the careful walk."""
    texts: list[str] = []
    values: list[Any] = []
    for record in records:
        texts.append(record.text)
        values += (record.body.to_body(), record.payload.value if record.payload else None)
        for a in record.attributions:
            texts += (a.url, a.title, a.excerpt)
            values.append(a.replay.value if a.replay else None)
    joined = "\n".join(texts)
    if redact_text(joined) != joined:
        return True
    return redact_value(values) is not values


def redact_records(records: Iterable[Any]) -> list[Any]:
    """Redact assembled ``EventRecord``s in place (texts, bodies, attributions, payload values),
    keeping every attribution range pointed at the same characters of the redacted text."""
    records = list(records)
    if not _any_secret(records):
        return records
    out = []
    for record in records:
        text, remap = redact_with_map(record.text)
        if text is not record.text:
            record.text = text
            for a in record.attributions:
                if a.start is not None and a.end is not None:
                    a.start, a.end = remap(a.start, False), remap(a.end, True)
        body = record.body.to_body()
        clean = redact_value(body)
        if clean is not body:
            record.body = type(record.body).from_body(clean)
        for a in record.attributions:
            a.url, a.title, a.excerpt = redact_text(a.url), redact_text(a.title), redact_text(
                a.excerpt)
            a.replay = _redact_payload(a.replay)
        record.payload = _redact_payload(record.payload)
        out.append(record)
    return out


def _redact_payload(payload: Any) -> Any:
    if payload is None:
        return None
    value = redact_value(payload.value)
    if value is payload.value:
        return payload
    return type(payload)(payload.provider, payload.format, payload.version, value)


def redact_document(doc: Any) -> Any:
    """An export document (either projection) with credentials redacted; message ranges are
    remapped onto the redacted text. Returns ``doc`` itself when nothing was found."""
    if not isinstance(doc, dict) or not isinstance(doc.get("turns"), list):
        return redact_value(doc)
    turns = doc["turns"]
    new_turns = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("events"), list):
            new_turns.append(redact_value(turn))
            continue
        events = [_redact_event(e) for e in turn["events"]]
        rest = redact_value({k: v for k, v in turn.items() if k != "events"})
        new_turns.append({**rest, "events": events})
    rest = redact_value({k: v for k, v in doc.items() if k != "turns"})
    out = {**rest, "turns": new_turns}
    return doc if out == doc else out


def _redact_event(event: Any) -> Any:
    if not isinstance(event, dict) or event.get("kind") != "message" or not isinstance(
        event.get("text"), str
    ):
        return redact_value(event)
    text, remap = redact_with_map(event["text"])
    attributions = event.get("attributions")
    if text is not event["text"] and isinstance(attributions, list):
        remapped = []
        for a in attributions:
            span = a.get("range") if isinstance(a, dict) else None
            if isinstance(span, dict) and isinstance(span.get("start"), int) and isinstance(
                span.get("end"), int
            ):
                a = {**a, "range": {**span, "start": remap(span["start"], False),
                                    "end": remap(span["end"], True)}}
            remapped.append(a)
        attributions = remapped
    rest = redact_value({k: v for k, v in event.items() if k not in {"text", "attributions"}})
    out = {**rest, "text": text}
    if "attributions" in event:
        out["attributions"] = redact_value(attributions)
    return out
