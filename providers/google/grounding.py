"""What Gemini's candidate metadata says, for ``generate.Generate``: the hosted Google Search
behind ``groundingMetadata`` (its queries, sources and entry point), URL context fetches,
File Search results, and citations (grounding supports and ``citationMetadata``), landing on
the open message block. ``Grounding`` is the part of the reader that handles them; the state
it reads and writes is the reader's own (declared here, kept by ``Generate``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.google.common import (
    FILE_SEARCH,
    METADATA,
    PROVIDER,
    WEB_FETCH,
    WEB_SEARCH,
    entry_point_artifact,
    search_summary,
)
from providers.values import as_dict, as_int, as_list, as_str, count
from streams.parts import Activity, Artifact, BlockKind, Citation, Part, Payload

_RETRIEVAL_NAMES = ("title", "documentName", "fileSearchStore", "ragCorpus")
_URL_STATUS_OK = "URL_RETRIEVAL_STATUS_SUCCESS"


@dataclass
class TextBlock:
    """The open text block of a candidate: its parts, text length and grounding."""

    key: str
    kind: BlockKind
    parts: list[dict[str, Any]] = field(default_factory=list)
    nbytes: int = 0  # UTF-8 length of the text so far: body supports are shifted by it
    metadata: dict[str, Any] = field(default_factory=dict)
    cited: set[tuple[str, str, int | None, int | None]] = field(default_factory=set)


def source_of(chunk: Any) -> dict[str, str]:
    """url/title (and excerpt) of a groundingChunk: web, maps, or retrieved context. File
    Search chunks name no URL: they are cited by the document's title, else the store's
    name, with the chunk's text as the excerpt (a source without a link)."""
    chunk = as_dict(chunk)
    for kind in ("web", "retrievedContext", "maps"):
        source = as_dict(chunk.get(kind))
        if as_str(source.get("uri")):
            return {"url": source["uri"], "title": as_str(source.get("title")),
                    "excerpt": as_str(source.get("text"))}
    retrieved = as_dict(chunk.get("retrievedContext"))
    title = next((as_str(retrieved.get(k)) for k in _RETRIEVAL_NAMES if as_str(retrieved.get(k))),
                 "")
    if title:
        return {"url": "", "title": title, "excerpt": as_str(retrieved.get("text"))}
    return {}


_RETRIEVAL_NAMES = ("title", "documentName", "fileSearchStore", "ragCorpus")


def supports_by_part(
    grounding: dict[str, Any], parts: list[dict[str, Any]]
) -> tuple[dict[int, list[Any]], list[Any]]:
    """Body mode: the message part each support addresses (``partIndex``, 0 when absent).
    A support naming a part that is not message text goes to the nearest message part."""
    message_parts = [  # parts that hold message text (an empty one makes no message)
        i for i, p in enumerate(parts) if as_str(p.get("text")) and not p.get("thought")
    ]
    by_part: dict[int, list[Any]] = {}
    stray: list[Any] = []
    for support in as_list(grounding.get("groundingSupports")):
        wanted = as_int(as_dict(as_dict(support).get("segment")).get("partIndex")) or 0
        target = (
            wanted
            if wanted in message_parts
            else next(
                (i for i in message_parts if i >= wanted),
                message_parts[-1] if message_parts else None,
            )
        )
        if target is None:
            stray.append(support)
        else:
            by_part.setdefault(target, []).append(support)
    return by_part, stray


class Grounding:
    """The metadata handlers of ``Generate`` (which keeps the state named here)."""

    version: str
    response_id: str
    block: TextBlock | None
    searched: bool
    fetched: set[str]
    file_searches: list[tuple[str, dict[str, Any]]]
    entry_points: list[Artifact]
    shown_entry_points: set[str]

    def payload(self, fmt: str, value: Any) -> Payload:
        return Payload(PROVIDER, fmt, self.version, value)

    def search(self, grounding: dict[str, Any]) -> Iterator[Part]:
        """The hosted Google Search behind the grounding, once per response."""
        entry = as_dict(grounding.get("searchEntryPoint"))
        html = as_str(entry.get("renderedContent"))
        if html and html not in self.shown_entry_points:
            self.shown_entry_points.add(html)
            self.entry_points.append(entry_point_artifact(entry, html, self.version))
        queries = [
            q for q in as_list(grounding.get("webSearchQueries")) if isinstance(q, str) and q
        ]
        if not queries or self.searched:
            return
        self.searched = True
        search_id = f"{self.response_id or 'response'}:search"
        chunks = as_list(grounding.get("groundingChunks"))
        sources = tuple(
            {"url": as_str(web.get("uri")), "title": as_str(web.get("title"))}
            for web in (as_dict(as_dict(c).get("web")) for c in chunks)
            if as_str(web.get("uri"))
        )
        yield Activity(search_id, WEB_SEARCH, "started", input={"queries": queries})
        yield Activity(
            search_id,
            WEB_SEARCH,
            "completed",
            input={"queries": queries},
            summary=search_summary(len(queries), len(sources)),
            sources=sources,
        )

    def url_context(self, metadata: dict[str, Any], grounding: dict[str, Any]) -> Iterator[Part]:
        """URL context: one ``web_fetch`` per URL Gemini retrieved, with how that went."""
        titles = {
            as_str(web.get("uri")): as_str(web.get("title"))
            for web in (as_dict(as_dict(c).get("web")) for c in as_list(
                grounding.get("groundingChunks")))
        }
        for entry in map(as_dict, as_list(metadata.get("urlMetadata"))):
            url, status = as_str(entry.get("retrievedUrl")), as_str(entry.get("urlRetrievalStatus"))
            if not url or url in self.fetched:
                continue
            self.fetched.add(url)
            fetch_id = f"{self.response_id or 'response'}:url_context:{len(self.fetched) - 1}"
            yield Activity(fetch_id, WEB_FETCH, "started", input={"url": url})
            if status == _URL_STATUS_OK:
                source = {"url": url, "title": titles.get(url, "")}
                yield Activity(fetch_id, WEB_FETCH, "completed", {"url": url}, "retrieved",
                               (source,))
            elif status and status != "URL_RETRIEVAL_STATUS_UNSPECIFIED":
                code = status.removeprefix("URL_RETRIEVAL_STATUS_").lower()
                yield Activity(fetch_id, WEB_FETCH, "failed", {"url": url},
                               code.replace("_", " "), error_code=code)

    def file_search_results(self, grounding: dict[str, Any]) -> Iterator[Part]:
        """Retrieved-context grounding is what the File Search shown as code found."""
        sources = [
            source_of(c) for c in as_list(grounding.get("groundingChunks"))
            if as_dict(as_dict(c).get("retrievedContext"))
        ]
        if not sources:
            return
        found = tuple({"url": s["url"], "title": s["title"]} for s in sources if s)
        for run_id, query in self.file_searches:
            yield Activity(run_id, FILE_SEARCH, "completed", query,
                           count(len(found), "result"), found)
        self.file_searches = []

    def cite(
        self, block: TextBlock, supports: Any, grounding: dict[str, Any], base: int
    ) -> Iterator[Part]:
        chunks = as_list(grounding.get("groundingChunks"))
        # Supports cite the same few chunks over and over: read each chunk's source once.
        sources: dict[int, dict[str, str]] = {}
        cited = block.cited
        for support in supports:
            support = as_dict(support)
            segment = as_dict(support.get("segment"))
            start = base + (as_int(segment.get("startIndex")) or 0)
            end = as_int(segment.get("endIndex"))
            end = None if end is None else base + end
            quote = segment.get("text") if isinstance(segment.get("text"), str) else None
            for index in as_list(support.get("groundingChunkIndices")):
                index = as_int(index)
                if index is None or not 0 <= index < len(chunks):
                    # An index with no chunk: the citation names no source. Kept (with no
                    # URL and no title) so the reader is told, not silently dropped.
                    if ("", "", start, end) not in cited:
                        cited.add(("", "", start, end))
                        yield Citation(block.key, "", start=start, end=end, unit="utf8",
                                       quote=quote)
                    continue
                source = sources.get(index)
                if source is None:
                    source = sources[index] = source_of(chunks[index])
                if not source or (source["url"], source["title"], start, end) in cited:
                    continue  # a chunk with no source, or the same citation already sent
                cited.add((source["url"], source["title"], start, end))
                yield Citation(
                    block.key,
                    source["url"],
                    source["title"],
                    source["excerpt"],
                    start=start,
                    end=end,
                    unit="utf8",
                    quote=quote,
                )

    def stream_metadata(self, metadata: dict[str, Any]) -> Iterator[Part]:
        """Streamed grounding lands on the open message block (offsets address its text)."""
        block = self.block
        if block is None or block.kind != "message":
            supports = as_list(as_dict(metadata.get("groundingMetadata")).get("groundingSupports"))
            sources = as_list(as_dict(metadata.get("citationMetadata")).get("citationSources"))
            if supports or sources:
                yield self.stray_metadata(metadata, len(supports) + len(sources))
            return
        block.metadata.update(metadata)
        grounding = as_dict(metadata.get("groundingMetadata"))
        yield from self.cite(block, as_list(grounding.get("groundingSupports")), grounding, 0)
        yield from self.recitations(metadata)

    def stray_metadata(self, metadata: dict[str, Any], cited: int) -> Artifact:
        # Citations must land on an open block; with none open they are kept whole instead.
        return Artifact(
            type="google.candidate_metadata",
            summary=f"{count(cited, 'citation')} with no text block to attach to",
            payload=self.payload(METADATA, metadata),
        )

    def recitations(self, metadata: dict[str, Any]) -> Iterator[Part]:
        block = self.block
        sources = as_list(as_dict(metadata.get("citationMetadata")).get("citationSources"))
        if block is None or block.kind != "message":
            return  # stays in the payload of the candidate's message block, if any
        block.metadata.update({k: v for k, v in metadata.items() if k == "citationMetadata"})
        for source in map(as_dict, sources):
            url = as_str(source.get("uri"))
            start, end = as_int(source.get("startIndex")) or 0, as_int(source.get("endIndex"))
            if not url or (url, "", start, end) in block.cited:
                continue
            block.cited.add((url, "", start, end))
            yield Citation(block.key, url, start=start, end=end, unit="utf8")
