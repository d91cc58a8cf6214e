"""A ChatGPT export's sources and citations: the pages a browsing or search tool listed, and
the citations of an answer (``metadata.citations``, 2023-24, and ``content_references``, 2025)
with their markers taken out of the text and their ranges remapped onto what is left (see
``importers.markers``). Both count offsets in code points (Python ``str`` indexes)."""

from __future__ import annotations

from typing import Any

from importers import markers
from importers.base import dict_of, text_of
from streams import parts


def cite_sources(metadata: dict[str, Any]) -> list[dict[str, str]]:
    cite = dict_of(metadata.get("_cite_metadata"))
    out = []
    for entry in cite.get("metadata_list") or ():
        entry = dict_of(entry)
        url = text_of(entry.get("url"))
        if url:  # the "Search results for query" entry has none
            out.append({"url": url, "title": text_of(entry.get("title"), 500)})
    return out


def group_sources(groups: Any) -> list[dict[str, str]]:
    out = []
    for group in groups if isinstance(groups, list) else ():
        for entry in dict_of(group).get("entries") or ():
            entry = dict_of(entry)
            url = text_of(entry.get("url"))
            if url:
                out.append({"url": url, "title": text_of(entry.get("title"), 500)})
    return out


def citations(key: str, text: str, metadata: dict[str, Any]
               ) -> tuple[str, list[parts.Citation]]:
    """The text without its citation markers, and its citations with remapped ranges."""
    anchors: list[tuple[int, int, list[dict[str, str]], tuple[int, int] | None]] = []
    removals: list[tuple[int, int]] = []
    for cite in metadata.get("citations") or ():
        cite = dict_of(cite)
        source = dict_of(cite.get("metadata"))
        url = text_of(source.get("url"))
        if not url:
            continue  # 2025 echoes of content_references ({start_ix, end_ix, invalid_reason})
        span = _marker_span(text, cite.get("start_ix"), cite.get("end_ix"))
        if span is None:
            continue
        removals.append(span)
        anchors.append((*span, [{"url": url, "title": text_of(source.get("title"), 500)}],
                        None))
    for ref in metadata.get("content_references") or ():
        ref = dict_of(ref)
        matched = text_of(ref.get("matched_text"))
        span = _reference_span(text, ref.get("start_idx"), ref.get("end_idx"), matched)
        if span is None:
            continue
        if markers.PRIVATE_USE.search(matched) or markers.TETHER_MARKER.fullmatch(matched) or (
            matched.startswith("【") and matched.endswith("】")
        ):
            removals.append(span)
        sources = _reference_sources(ref)
        if sources:
            anchors.append((*span, sources, markers.marked_sentence_before(text, span[0])))
    # Any marker no reference names (they would show as stray private-use glyphs).
    removals.extend(m.span() for m in markers.PRIVATE_USE.finditer(text))
    removal = markers.Removal(text, removals)
    clean = removal.text
    out = []
    for start, _end, sources, sentence in anchors:
        if sentence is not None:
            span = (removal.position(sentence[0]), removal.position(sentence[1]))
        else:
            span = markers.sentence_before(clean, removal.position(start))
        for source in sources:
            if span and span[0] < span[1]:
                out.append(parts.Citation(key, source["url"], source["title"],
                                          source.get("excerpt", ""), span[0], span[1],
                                          quote=clean[span[0]:span[1]]))
            else:
                out.append(parts.Citation(key, source["url"], source["title"],
                                          source.get("excerpt", "")))
    return clean, out


def _marker_span(text: str, start: Any, end: Any) -> tuple[int, int] | None:
    """Where a 2023-24 citation's marker is: its offsets when they cover a marker, else the
    marker nearest to them (offsets that disagree with the text are repaired, never kept)."""
    if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text) \
            and markers.TETHER_MARKER.fullmatch(text, start, end):
        return start, end
    hint = start if isinstance(start, int) else 0
    found = [m.span() for m in markers.TETHER_MARKER.finditer(text)]
    if not found:
        return None
    return min(found, key=lambda span: abs(span[0] - hint))


def _reference_span(text: str, start: Any, end: Any, matched: str) -> tuple[int, int] | None:
    if not (isinstance(start, int) and isinstance(end, int)) or end <= start:
        return None  # an empty span (sources_footnote) addresses nothing
    if start >= 0 and end <= len(text) and text[start:end] == matched:
        return start, end
    position = markers.nearest(text, matched, start)
    return (position, position + len(matched)) if position is not None else None


def _reference_sources(ref: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    items = ref.get("items")
    if isinstance(items, list):
        for item in items:
            item = dict_of(item)
            url = text_of(item.get("url"))
            if url:
                out.append({"url": url, "title": text_of(item.get("title"), 500),
                            "excerpt": text_of(item.get("snippet"), 1000)})
    elif text_of(ref.get("url")) and ref.get("type") in ("webpage", "webpage_extended"):
        out.append({"url": ref["url"], "title": text_of(ref.get("title"), 500),
                    "excerpt": text_of(ref.get("snippet"), 1000)})
    return out
