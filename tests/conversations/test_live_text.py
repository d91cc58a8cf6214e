"""``redaction.LiveText``: the text a viewer sees while a block streams never shows a piece of a
credential split across deltas, and prose is never held back."""

from __future__ import annotations

import re

import pytest

from guards import redaction
from tests.split_secrets import SPLIT_SECRETS, leaks, sentence


def _marks(text: str) -> str:
    # A key's own prefix may go out before the rest ("A" of "AKIA…"): that is no secret.
    return re.sub(r"[^\s\[]*\[REDACTED\]", "[REDACTED]", text)


@pytest.mark.parametrize("secret", SPLIT_SECRETS)
def test_a_secret_split_in_three_at_any_offsets_never_shows(secret):
    text = sentence(secret)
    start = text.index(secret)
    whole = redaction.redact_text(text)
    for a in range(start + 1, start + len(secret)):
        for b in range(a + 1, start + len(secret) + 1, 3):
            live = redaction.LiveText()
            shown = [live.take(text[:a]), live.take(text[a:b]), live.take(text[b:], final=True)]
            assert not leaks("".join(shown), f"split at {a}, {b}")
            assert _marks("".join(shown)) == _marks(whole)


def test_prose_goes_out_at_once_even_mid_word():
    live = redaction.LiveText()
    assert live.take("The tide turns tw") == "The tide turns tw"
    assert not live.holding
    assert live.take("ice a day.") == "ice a day."


def test_what_could_be_a_key_waits_for_the_rest_then_goes_out_redacted():
    live = redaction.LiveText()
    # The last two words wait ("Bearer" and its token are two).
    assert live.take("my key sk-ant-api03-Q7xK") == "my "
    assert live.holding
    assert live.take("3AnthropicKeyZZZZ and") == "key "
    assert live.take(" more.\n") == "[REDACTED] and more.\n"
    assert not live.holding


def test_a_header_line_waits_for_its_end():
    live = redaction.LiveText()
    assert live.take("ok\nAuthorization: xyz-") == "ok\n"
    assert live.take("opaque-value\nnext") == "Authorization: [REDACTED]\nnext"


def test_a_header_line_after_other_lines_waits_for_its_end_whatever_its_value():
    live = redaction.LiveText()
    assert live.take("intro\nCookie: session=abc; other=") == "intro\n"
    assert live.take("xyz123 tail\nnext") == "Cookie: [REDACTED]\nnext"
