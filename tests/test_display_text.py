"""How the views draw text a reader cannot see or would see cut: pure functions of
``analysis/display.py`` and, for the token wall's cells, the same rule in ``assets/samples.js``
(run in Chromium over the same pieces)."""

from __future__ import annotations

import regex
from hypothesis import given
from hypothesis import strategies as st

from playground import analysis

PIECES = ["a b", "\u200d", "\u200b", "x\u202eyz", "\u00a0", "\u2066", "\t\r", "\x07", "日本", "\ufeff"]


def test_invisible_characters_take_room_and_say_what_they_are():
    assert [analysis.visible(p, multiline=False) for p in PIECES] == [
        "a·b", "⟨U+200D⟩", "⟨U+200B⟩", "x⟨U+202E⟩yz", "⍽", "⟨U+2066⟩", "→␍", "⟨U+0007⟩", "日本", "⟨U+FEFF⟩"]


@given(st.lists(st.sampled_from(["a", "é", "e\u0301", "🇫🇷", "👩\u200d👩\u200d👧", "क्ष", " "]), max_size=40),
       st.integers(2, 30))
def test_a_cut_text_ends_on_a_whole_character(parts, width):
    text = "".join(parts)
    cut = analysis.truncate(text, width)
    assert len(cut) <= width
    if cut == text:
        return
    kept = cut.removesuffix("…")
    assert text.startswith(kept)
    graphemes = regex.findall(r"\X", text)
    assert kept in {"".join(graphemes[:k]) for k in range(len(graphemes) + 1)}, (text, cut)
