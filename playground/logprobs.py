"""A sample's logprobs as flat arrays: what the engine made, without an object per alternative.

At n=256 x 1,000 tokens with a top-5, a TokenLogprob per position and a tuple per alternative
are 1.5 million Python objects: seconds of garbage collection, hundreds of megabytes, and most
of the app's CPU per token. vLLM has the same problem and the same answer (``flat_logprobs``):
``Logprobs`` keeps, per position, the sampled token's id, logprob and rank, and the alternatives'
ids and logprobs, ranked, in ``array``s (float32, as vLLM's logprobs are: a float32 value turns
back into the identical Python float). Texts come from the run's table of token texts, one per id.

It is a sequence of ``TokenLogprob`` (``logprobs[p]`` builds one), so every reader of the record
works as before; the hot paths (the samples feed, the bundle) read the arrays. A sample's logprobs
may also be a plain list of TokenLogprob (a hand-made run, an older bundle, a remote server's):
both read the same, and compare equal when they hold the same.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload


@dataclass
class TokenLogprob:
    """The sampled token's log-probability, its rank, and the top-k alternatives at its position."""

    token_id: int
    logprob: float | None
    rank: int | None = None
    text: str | None = None
    top: list[tuple[int, float, str | None]] = field(default_factory=list)  # by rank


NO_RANK = 0  # vLLM's ranks start at 1


class Logprobs(Sequence[TokenLogprob]):
    """Positions of one sample, appended as they arrive (``add``, ``add_flat``)."""

    __slots__ = ("ids", "rank", "sampled", "starts", "texts", "top_ids", "top_values")

    def __init__(self, texts: dict[int, str]):
        self.texts = texts  # token id -> text: the run's table, shared by its samples
        self.ids = array("i")  # the sampled token per position
        self.sampled = array("f")  # its logprob
        self.rank = array("i")  # its rank (NO_RANK: unknown)
        self.starts = array("i", [0])  # position p's alternatives are [starts[p], starts[p + 1])
        self.top_ids = array("i")  # the alternatives, by rank (1, 2, ...)
        self.top_values = array("f")

    # --- growing ------------------------------------------------------------------------------

    def add(self, token_id: int, logprob: float, rank: int, top_ids, top_values) -> None:
        """One position: the sampled token and the alternatives ranked 1, 2, ..."""
        self.ids.append(token_id)
        self.sampled.append(logprob)
        self.rank.append(rank)
        self.top_ids.extend(top_ids)
        self.top_values.extend(top_values)
        self.starts.append(len(self.top_ids))

    def add_flat(self, flat, first: int, count: int) -> None:
        """``count`` positions from ``first`` of a vLLM ``FlatLogprobs`` (its layout per position:
        the sampled token with its rank, then the top-k ranked 1..k).

        When a consumer falls behind (at a GPU's pace), vLLM merges a request's queued outputs by
        ``FlatLogprobs.extend``, which goes through one ``{id: Logprob}`` dict per position: a
        sampled token in the top-k is then one entry, first, and its rank is missing after it."""
        starts, ends = flat.start_indices, flat.end_indices
        ids, values, ranks = flat.token_ids, flat.logprobs, flat.ranks
        for p in range(first, first + count):
            start, end = starts[p], ends[p]
            rank = ranks[start] or NO_RANK
            top_ids, top_values = ids[start + 1:end], values[start + 1:end]
            if 0 < rank < end - start and ranks[start + rank] != rank:  # merged: back at its rank
                top_ids.insert(rank - 1, ids[start])
                top_values.insert(rank - 1, values[start])
            self.add(ids[start], values[start], rank, top_ids, top_values)

    def add_from(self, other: Logprobs, first: int, count: int) -> None:
        """``count`` positions from ``first`` of another sample's arrays, with their texts (a
        replay of a recorded run streams them again without making an object per position)."""
        stop = first + count
        start, end = other.starts[first], other.starts[stop]
        base = self.starts[-1] - start
        self.ids.extend(other.ids[first:stop])
        self.sampled.extend(other.sampled[first:stop])
        self.rank.extend(other.rank[first:stop])
        self.top_ids.extend(other.top_ids[start:end])
        self.top_values.extend(other.top_values[start:end])
        self.starts.extend(s + base for s in other.starts[first + 1:stop + 1])
        texts, theirs = self.texts, other.texts
        for token_id in (*other.ids[first:stop], *other.top_ids[start:end]):
            if token_id not in texts and token_id in theirs:
                texts[token_id] = theirs[token_id]

    @classmethod
    def of(cls, positions: Sequence[TokenLogprob], texts: dict[int, str]) -> Logprobs | None:
        """TokenLogprobs in arrays, when they fit them exactly (a sampled token with a logprob
        and a rank; alternatives ranked 1..k, the sampled one among them or after them; float32
        values; one text per id); None when they do not."""
        table = dict(texts)
        made = cls(table)
        for lp in positions:
            top, rank = list(lp.top), lp.rank
            if lp.logprob is None or type(rank) is not int or rank < 1 or not _float32(lp.logprob):
                return None
            if rank > len(top) and top and top[-1][0] == lp.token_id:
                top.pop()  # the sampled token after the top-k: it is the sampled entry
            for token_id, value, text in [*top, (lp.token_id, lp.logprob, lp.text)]:
                if table.setdefault(token_id, text) != text or not _float32(value):
                    return None
            made.add(lp.token_id, lp.logprob, rank, [t[0] for t in top], [t[1] for t in top])
            if made[len(made) - 1] != lp:
                return None
        texts.update(table)
        made.texts = texts
        return made

    # --- reading ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> TokenLogprob: ...

    @overload
    def __getitem__(self, index: slice) -> list[TokenLogprob]: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[p] for p in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("logprob position out of range")
        texts = self.texts
        start, end = self.starts[index], self.starts[index + 1]
        top = [(token_id, value, texts.get(token_id)) for token_id, value in
               zip(self.top_ids[start:end], self.top_values[start:end])]
        token_id, logprob, rank = self.ids[index], self.sampled[index], self.rank[index]
        if rank > end - start:  # sampled below the top-k: listed after it, as vLLM's dict has it
            top.append((token_id, logprob, texts.get(token_id)))
        return TokenLogprob(token_id, logprob, rank or None, texts.get(token_id), top)

    def __iter__(self) -> Iterator[TokenLogprob]:
        return (self[p] for p in range(len(self)))

    def ids_from(self, position: int) -> Iterator[int]:
        """Every token id of the positions from ``position`` on: sampled, then alternatives."""
        yield from self.ids[position:]
        yield from self.top_ids[self.starts[position]:]

    def alternatives(self, position: int) -> tuple[array, array]:
        """Position p's alternatives' ids and logprobs, by rank (the sampled one not added)."""
        start, end = self.starts[position], self.starts[position + 1]
        return self.top_ids[start:end], self.top_values[start:end]

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Logprobs):
            same = (self.ids, self.sampled, self.rank, self.starts, self.top_ids, self.top_values) == \
                (other.ids, other.sampled, other.rank, other.starts, other.top_ids, other.top_values)
            if same and all(self.texts.get(t) == other.texts.get(t) for t in {*self.ids, *self.top_ids}):
                return True
            other = list(other)  # the same positions may be laid out two ways (a last sampled alternative)
        if isinstance(other, list):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"Logprobs({len(self)} positions)"


def _float32(value: float) -> bool:
    return isinstance(value, float) and (math.isnan(value) or array("f", [value])[0] == value)
