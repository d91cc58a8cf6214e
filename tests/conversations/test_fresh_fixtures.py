"""The third recording set (``../shared/fixtures/providers-fresh``) through the store: what
ingest keeps of each wire feature that set brought, decided from the wire and the providers'
documentation."""

from __future__ import annotations

import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.projections import export_json, import_document
from conversations.rendering import render_export
from conversations.schema import validate_export
from tests.conversations.test_projections import _purge
from tests.support import recorded

pytestmark = pytest.mark.django_db

FRESH = "providers-fresh"
PDF = "rig__pdf_document_citations_decode_as_page_locations.json"


def ingest_fresh(provider: str, name: str):
    (rec,) = recorded(provider, name, FRESH)
    return ingest(provider, [ResponseFile(name, rec.raw, rec.context)])


def test_a_page_location_citation_keeps_its_pages_in_every_projection() -> None:
    # The wire: start_page_number 1, end_page_number 2, and Anthropic documents the end as
    # exclusive: the passage is on page 1 (the whitepaper's abstract is).
    summary = ingest_fresh("anthropic", PDF)
    for projection in ("portable", "native"):
        doc = orjson.loads(export_json(summary.conversation, projection))
        validate_export(doc)
        (message,) = [e for e in doc["turns"][0]["events"] if e["kind"] == "message"]
        (attribution,) = message["attributions"]
        assert attribution["source"] == {"url": "", "title": "Bitcoin Whitepaper"}
        assert attribution["pages"] == {"first": 1, "last": 1}
        assert "range" not in attribution
    markdown = render_export(doc, "markdown")
    assert "Bitcoin Whitepaper, p. 1 — “In" in markdown
    html = render_export(doc, "html")
    assert '<bdi>Bitcoin Whitepaper</bdi> <span class="pages">p. 1</span>' in html
    # Export -> import -> export keeps them, byte for byte.
    first = export_json(summary.conversation, "native")
    _purge(summary.conversation)
    again = import_document(orjson.loads(first))
    assert export_json(again, "native") == first


def test_a_document_with_impossible_pages_is_refused() -> None:
    from conversations.schema import InvalidDocument

    summary = ingest_fresh("anthropic", PDF)
    doc = orjson.loads(export_json(summary.conversation, "portable"))
    _purge(summary.conversation)
    (message,) = [e for e in doc["turns"][0]["events"] if e["kind"] == "message"]
    for pages in ({"first": 4, "last": 3}, {"first": 0, "last": 1}, {"first": 1}):
        message["attributions"][0]["pages"] = pages
        with pytest.raises(InvalidDocument, match="pages"):
            import_document(doc)
