"""A bundle's table of token texts (``texts``: token id -> its text in the run), which the samples'
token texts and logprobs refer to instead of repeating them; found at the run's end, or gathered
while it is recorded.

Nearly always an id has one text in a run (its piece in the tokenizer's table), and the table is
then every (id, text) pair the run holds. ``table_of`` finds it at the end, and counts the pairs
when some id has two texts. ``TableWriter`` gathers it while the run is recorded (``LiveBundle``
in playground/run.py), looking only at what each sample added since its last look: at n=256 x
1,000 tokens with a top-5 the run names 1.5 million ids, and looking at them all at the end was
a third of saving it. At the first id with a second text, or a sample it cannot follow (its
lists replaced, logprobs that are not arrays), it gives up, and the end counts them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from playground.bundle_events import int_list, pieces_of
from playground.bundle_logprobs import distinct
from playground.logprobs import Logprobs


def table_of(samples: list) -> dict[int, str]:
    """Each token id's most frequent text in the run (the first seen among equals). Nearly always
    an id has one text in a run (its piece in the tokenizer's table): that is checked first, a
    list at a time, and the texts are counted only when it is not so."""
    plain = [s for s in samples if int_list(s.token_ids) and pieces_of(s.token_ids, s.token_texts) is not None]
    seen = list(texts_seen(samples))
    table = dict(seen)
    for s in plain:
        table.update(zip(s.token_ids, s.token_texts))
    if all(list(map(table.get, s.token_ids)) == s.token_texts for s in plain) and \
            all(table[token_id] == text for token_id, text in seen):
        return table
    votes: Counter = Counter()
    for s in plain:
        votes.update(zip(s.token_ids, s.token_texts))
    votes.update(seen)
    table = {}
    for (token_id, text), _ in sorted(votes.items(), key=lambda item: -item[1]):
        table.setdefault(token_id, text)
    return table


def texts_seen(samples: Iterable[Any]) -> Iterator[tuple[int, str]]:
    """(token id, text) of every alternative the samples' logprobs name: votes for the table."""
    for s in samples:
        if isinstance(s.logprobs, Logprobs):
            table = s.logprobs.texts
            yield from ((t, table[t]) for t in distinct(s.logprobs.top_ids) if type(table.get(t)) is str)
            continue
        for lp in s.logprobs or ():
            for alternative in lp.top:
                if len(alternative) == 3 and type(alternative[0]) is int and type(alternative[2]) is str:
                    yield alternative[0], alternative[2]


@dataclass(slots=True)
class _Followed:
    """One sample as ``TableWriter`` follows it: its lists, and how far into them it has looked."""

    ids: list
    texts: list
    logprobs: Logprobs | None = None
    tokens: int = 0
    positions: int = 0
    alternatives: int = 0


class TableWriter:
    """``table_of`` a run's samples, gathered while they grow: ``add`` looks at what each added
    since its last look. While ``whole``, ``table`` is what ``table_of`` gives for the samples as
    they were at the last look, every sample's token texts are the table's texts of its ids, and
    ``differ(k)`` is what sample k's logprobs name with a text other than the table's (their
    sampled tokens' pieces, where a token's text in the sample is not its piece). A sample saved
    while it grows may hold tokens the last look did not see: ``differ`` then says so (None)."""

    def __init__(self, samples: list):
        self.samples = samples
        self.table: dict[int, str] = {}
        self.whole = True
        self._texts: dict[int, str] | None = None  # the one table of texts every sample's logprobs use
        self._followed: list[_Followed | None] = [None] * len(samples)
        self._differing: set[int] = set()  # sampled ids whose piece is not the table's text
        self._checked: set[int] = set()  # sampled ids compared so far

    def add(self) -> bool:
        """Look at what the samples added since the last look; False once it has given up."""
        if self.whole and not self._add():
            self.whole, self.table = False, {}
        return self.whole

    def _add(self) -> bool:
        table, alternatives, sampled = self.table, [], []
        for k, s in enumerate(self.samples):
            ids, texts, lps = s.token_ids, s.token_texts, s.logprobs
            followed = self._followed[k]
            if followed is None:
                followed = self._followed[k] = _Followed(ids, texts)
            if followed.ids is not ids or followed.texts is not texts or type(ids) is not list or \
                    type(texts) is not list:
                return False
            done = followed.tokens
            new_ids = ids[done:]
            end = done + len(new_ids)
            new_texts = texts[done:end]
            # a sample always has one text per token (one that does not yet, mid-append, is given up on)
            if not (len(new_texts) == len(new_ids) and len(texts) == end and int_list(new_ids)
                    and set(map(type, new_texts)) <= {str}):
                return False
            for token_id, text in zip(new_ids, new_texts):
                if table.setdefault(token_id, text) != text:
                    return False
            followed.tokens = end
            if lps is None:
                continue
            if followed.logprobs is None:
                followed.logprobs = lps
            if followed.logprobs is not lps or not isinstance(lps, Logprobs) or \
                    (self._texts is not None and lps.texts is not self._texts):
                return False
            self._texts = lps.texts
            # copies, not views: a view would keep the arrays from growing
            new_sampled, new_alternatives = lps.ids[followed.positions:], lps.top_ids[followed.alternatives:]
            sampled.append(new_sampled)
            alternatives.append(new_alternatives)
            followed.positions += len(new_sampled)
            followed.alternatives += len(new_alternatives)
        pieces = self._texts
        for token_id in distinct(*alternatives) if alternatives else ():
            text = pieces.get(token_id)
            if type(text) is not str or table.setdefault(token_id, text) != text:
                return False
        for token_id in distinct(*sampled) if sampled else ():
            if token_id not in self._checked:
                if token_id not in table:  # a sampled token that is not among the sample's ids
                    return False
                self._checked.add(token_id)
                if pieces.get(token_id) != table[token_id]:
                    self._differing.add(token_id)
        return True

    def differ(self, k: int) -> dict[str, Any] | None:
        """Sample k's logprobs' texts that are not the table's, as ``write_arrays`` writes them;
        None when the sample has grown since the last look (a run saved while it streams)."""
        s, followed = self.samples[k], self._followed[k]
        lps = s.logprobs
        if not self.whole or followed is None or followed.tokens != len(s.token_ids) or \
                lps is not None and (lps is not followed.logprobs or followed.positions != len(lps.ids)):
            return None
        if not self._differing or lps is None:
            return {}
        return {str(t): lps.texts.get(t) for t in sorted(self._differing.intersection(lps.ids))}
