"""How texts are compared wherever a person's words meet a model's: one fold, used by History's
search, the Set tab's answers and the sample graph's words alike, so that what one view counts as
the same text the others do too.

Unicode compatibility form (NFKC: a full-width "ＣＡＦＥ" is "CAFE", an accent typed as a
combining mark is the accented letter) then case folding (which knows "É", "Г" and "Σ", where
SQLite's ``lower`` knows only ASCII)."""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()
