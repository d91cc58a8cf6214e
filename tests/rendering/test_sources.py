"""Source registry: normalisation, numbering by first citation, "also consulted"."""

from __future__ import annotations

import pytest

from conversations.rendering.sources import normalise_url, number_sources


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("HTTPS://Example.COM:443/a?b=1#frag", "https://example.com/a?b=1"),
        ("http://example.com:80", "http://example.com/"),
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("https://example.com/?utm_source=openai", "https://example.com/?utm_source=openai"),
        ("  https://example.com/a b\n", "https://example.com/a%20b"),
        ("https://user:pass@example.com@evil.example/", "https://evil.example/"),
        ("https://bücher.example/", "https://xn--bcher-kva.example/"),
    ],
)
def test_normalise_url(raw: str, key: str) -> None:
    assert normalise_url(raw).key == key
    # OpenAI's own tracking parameter is kept in the identity, not in the link or the text
    shown = key.replace("?utm_source=openai", "")
    assert normalise_url(raw).href == shown
    assert "utm_source" not in normalise_url(raw).display


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("https://a.example/x?utm_source=openai", "https://a.example/x"),
        ("https://a.example/x?q=1&utm_source=openai#f", "https://a.example/x?q=1"),
        ("https://a.example/x?utm_source=other", "https://a.example/x?utm_source=other"),
        ("https://a.example/x?utm_source=openaiX", "https://a.example/x?utm_source=openaiX"),
    ],
)
def test_shown_url_drops_only_openais_parameter(raw: str, shown: str) -> None:
    assert normalise_url(raw).href == shown


@pytest.mark.parametrize(
    "raw",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "java\tscript:alert(1)",
        "javascript:123",
        "vbscript:msgbox(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "file:///etc/passwd",
        "//evil.example/path",
        "mailto:a@example.com",
        "ws://evil.example/",
        "/relative",
        "https://example.com/" + "a" * 70_000,
        "http://[::1",
    ],
)
def test_non_http_urls_get_no_href(raw: str) -> None:
    assert normalise_url(raw).href is None


def test_domain_is_the_real_host() -> None:
    assert normalise_url("https://user:pass@example.com@evil.example/").domain == "evil.example"
    assert normalise_url("https://xn--pple-43d.com/").domain == "xn--pple-43d.com"


def message(seq: int, text: str, *attributions: dict) -> dict:
    return {"id": f"m{seq}", "seq": seq, "kind": "message", "text": text,
            "attributions": list(attributions)}  # fmt: skip


def attribution(url: str, start: int | None = None, end: int | None = None, **kw: object) -> dict:
    out: dict = {"source": {"url": url, "title": kw.pop("title", "")}, **kw}
    if start is not None:
        out["range"] = {"start": start, "end": end}
    return out


def test_same_url_same_number_in_first_citation_order() -> None:
    turn = {
        "id": "t",
        "events": [
            # seq order, not list order, decides
            message(5, "later text", attribution("https://c.example/")),
            message(
                2,
                "0123456789",
                attribution("https://b.example/x", 6, 9, title="B"),
                attribution("HTTPS://A.example:443/#top", 0, 3),
                attribution("https://a.example/", 4, 5, title="A title"),
            ),
        ],
    }
    registry = number_sources(turn)
    assert [(s.number, s.key, s.title) for s in registry.cited] == [
        (1, "https://a.example/", "A title"),
        (2, "https://b.example/x", "B"),
        (3, "https://c.example/", ""),
    ]
    assert registry.number_for({"url": "https://A.EXAMPLE"}) == 1


def test_also_consulted_are_unnumbered_and_exclude_cited() -> None:
    turn = {
        "id": "t",
        "events": [
            {
                "id": "s",
                "seq": 1,
                "kind": "hosted_activity",
                "activity": {
                    "id": "a",
                    "name": "web_search",
                    "state": "completed",
                    "sources": [
                        {"url": "https://a.example/", "title": "A"},
                        {"url": "https://b.example/", "title": "B"},
                    ],
                },
            },
            message(2, "text", attribution("https://b.example")),
        ],
    }
    registry = number_sources(turn)
    assert [(s.number, s.title) for s in registry.cited] == [(1, "B")]
    assert [(s.number, s.title) for s in registry.consulted] == [(None, "A")]


def test_untrusted_shapes_do_not_crash() -> None:
    turn = {"id": 5, "events": [None, {"kind": "message", "text": 3, "attributions": [None, 1]},
                               {"kind": "hosted_activity", "activity": "x"}]}  # fmt: skip
    registry = number_sources(turn)
    assert registry.cited == [] and registry.turn_id == ""


def test_pages_cited_of_a_source_are_gathered_and_labelled():
    from conversations.rendering.sources import pages_label

    def cite(pages):
        return {"source": {"url": "", "title": "Report.pdf"}, "excerpt": "", "pages": pages}

    turn = {"id": "t", "events": [{"kind": "message", "seq": 1, "text": "a", "attributions": [
        cite({"first": 3, "last": 4}), cite({"first": 9, "last": 9}),
        cite({"first": 3, "last": 4}), cite({"first": 5, "last": 2}), cite(None)]}]}
    (source,) = number_sources(turn).cited
    assert source.pages == [(3, 4), (9, 9)]
    assert pages_label(source.pages) == "p. 3–4, 9"
    assert pages_label([]) == ""
