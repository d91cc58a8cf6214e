from hypothesis import given
from hypothesis import strategies as st

from streams.ranges import DROPPED, EXACT, REPAIRED, place


def test_utf8_offsets_are_converted_to_code_points():
    text = "It is 20°C in Paris today."
    start = len("It is 20°C in ".encode())
    end = start + len("Paris")
    assert place(text, start, end, "utf8", "Paris") == ((14, 19), EXACT)


def test_drifted_offsets_are_repaired_by_searching_for_the_quote():
    text = "alpha beta gamma beta"
    # Two bytes too high, as in the Vertex gemini-3 recording.
    assert place(text, 19 + 2, 23 + 2, "utf8", "beta") == ((17, 21), REPAIRED)
    assert place(text, 8, 12, "utf8", "beta") == ((6, 10), REPAIRED)  # nearest occurrence wins


def test_ranges_that_do_not_match_are_dropped():
    assert place("short", 2, 40) == (None, DROPPED)
    assert place("short", 3, 3) == (None, DROPPED)
    assert place("short", 0, 3, "codepoint", "nope") == (None, DROPPED)
    assert place("é", 1, 2, "utf8") == (None, DROPPED)  # splits a character


def test_no_range_at_all_is_nothing_to_check():
    assert place("short", None, None) == (None, "")


def test_missing_start_means_zero():
    assert place("hello world", None, 5, "utf8", "hello") == ((0, 5), EXACT)


def test_utf16_offsets():
    text = "😀 smile"
    assert place(text, 3, 8, "utf16") == ((2, 7), EXACT)


@given(st.text(), st.integers(-3, 60), st.integers(-3, 60),
       st.sampled_from(["codepoint", "utf8", "utf16"]), st.one_of(st.none(), st.text(max_size=5)))
def test_a_resolved_range_always_addresses_the_text(text, start, end, unit, quote):
    span = place(text, start, end, unit, quote)[0]
    if span is not None:
        s, e = span
        assert 0 <= s < e <= len(text)
        if quote is not None:
            assert text[s:e] == quote


def test_place_says_how_a_range_was_resolved():
    from streams.ranges import place

    text = "héllo wörld"
    assert place(text, None, None) == (None, "")
    assert place(text, 0, 6, "utf8", "héllo") == ((0, 5), "exact")
    assert place(text, 0, 5, "codepoint", "wörld") == ((6, 11), "repaired")
    assert place(text, 3, 1, quote="wörld") == ((6, 11), "repaired")
    assert place(text, 0, 99, quote="absent") == (None, "dropped")
    assert place(text, 0, 99) == (None, "dropped")
