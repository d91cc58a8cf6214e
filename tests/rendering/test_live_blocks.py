"""Streaming text split at stable markdown block boundaries (a blank line outside a code
fence), each finished block rendered once; the rest raw (DESIGN "Live turns")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from conversations.rendering.live import BlockSplitter, render_block, split_finished

ANSWER = ("**Feeding.** Feed it once a day.\n\n"
          "```python\nx = 1\n\ny = 2\n```\n\n"
          "- a [site](https://example.org/)\n- b\n\n"
          "Still open")


def test_blocks_end_at_a_blank_line_outside_a_fence():
    finished, rest = split_finished(ANSWER)
    assert finished == ["**Feeding.** Feed it once a day.\n\n",
                        "```python\nx = 1\n\ny = 2\n```\n\n",
                        "- a [site](https://example.org/)\n- b\n\n"]
    assert rest == "Still open"
    assert "<strong>Feeding.</strong>" in render_block(finished[0])
    assert 'href="https://example.org/"' in render_block(finished[2])


@given(st.lists(st.integers(min_value=0, max_value=len(ANSWER)), max_size=12))
def test_fed_in_any_pieces_it_splits_as_the_whole(cuts):
    splitter, found, last = BlockSplitter(), [], 0
    for cut in [*sorted(cuts), len(ANSWER)]:
        found += splitter.feed(ANSWER[last:cut])
        last = cut
    assert (found, splitter.pending) == split_finished(ANSWER)


def test_leading_blank_lines_are_no_block():
    assert split_finished("\n\n\nText\n\nMore") == (["\n\n\nText\n\n"], "More")
