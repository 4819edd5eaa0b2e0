"""One sample's part of an event, and the two ways a recorder holds it without copying it.

At a GPU's pace a run has hundreds of thousands of outputs: a CUMULATIVE one repeats everything
its sample said so far, and a DELTA one's ids are already its sample's. Held as lengths into its
sample's own text and ids, an output costs neither the copies nor, for the garbage collector, a
list of its own. Plain data, like the run record it belongs to (playground/run.py).
"""

from __future__ import annotations

from typing import Protocol


class SampleSoFar(Protocol):
    """What a held output reads of its sample (``run.Sample``): lists that a recorder only grows."""

    index: int
    text: str
    token_ids: list[int]


class EventOutput:
    """One sample's part of an event, as yielded: its text and token ids (all so far, in every
    output_kind but DELTA), and its finish.

    A CUMULATIVE output repeats its sample's whole text and ids so far; kept as they came, a run of
    n=256 x 1,000 tokens would hold 128 million ids and as many characters again. So while a run
    is recorded such an output is held as the lengths of its sample's text and ids at that moment
    (``so_far``, a ``HeldOutput``); a recorded DELTA output is held as the span of its sample's ids
    it added (``SpanOutput``). Any other output keeps its text and ids as plain fields."""

    __slots__ = ("finish_reason", "index", "stop_reason", "text", "token_ids")
    FIELDS = ("index", "text", "token_ids", "finish_reason", "stop_reason")
    held = False  # whether the output is held as a prefix of its sample's own text and ids

    def __init__(self, index: int, text: str, token_ids: list[int], finish_reason: str | None = None,
                 stop_reason: str | int | None = None):
        self.index, self.text, self.token_ids = index, text, token_ids
        self.finish_reason, self.stop_reason = finish_reason, stop_reason

    @classmethod
    def so_far(cls, sample: SampleSoFar, finish_reason: str | None = None,
               stop_reason: str | int | None = None) -> HeldOutput:
        """The sample's text and ids as they are now, held as their lengths."""
        return HeldOutput(sample.index, sample, len(sample.text), len(sample.token_ids), finish_reason, stop_reason)

    @classmethod
    def prefix(cls, index: int, sample: SampleSoFar, text_length: int, ids_length: int,
               finish_reason: str | None = None, stop_reason: str | int | None = None) -> HeldOutput:
        """Index ``index``'s output that is the first ``text_length`` characters and ``ids_length``
        token ids of ``sample``, held."""
        return HeldOutput(index, sample, text_length, ids_length, finish_reason, stop_reason)

    @property
    def carried(self) -> int:
        """How many token ids the output carries (without reading them)."""
        return len(self.token_ids)

    def held_length(self, sample: SampleSoFar) -> int | None:
        """The length of its text while it is held as a prefix of ``sample``'s (None otherwise): a
        writer reads what it added from the sample, without copying the prefix."""
        return None

    def span_of(self, sample: SampleSoFar) -> int | None:
        """Where its token ids start in ``sample``'s while it is held as a span of them (None
        otherwise): a writer knows they are there without comparing them."""
        return None

    def hold(self) -> None:
        """Keep the value itself from now on (an output that is not held already does)."""

    def _values(self) -> tuple:
        return self.index, self.text, self.token_ids, self.finish_reason, self.stop_reason

    def __eq__(self, other: object) -> bool:
        return self._values() == other._values() if isinstance(other, EventOutput) else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return "EventOutput(" + ", ".join(f"{name}={value!r}" for name, value in zip(self.FIELDS, self._values())) + ")"


class HeldOutput(EventOutput):
    """A CUMULATIVE output held as the first characters and token ids of its sample, which grow in
    place: ``text`` and ``token_ids`` read the prefix back. An output that does not extend its
    sample's text is written whole, after the held ones are fixed (``hold``): from then on they
    keep their values themselves."""

    __slots__ = ("_of", "_text", "_token_ids")

    def __init__(self, index: int, sample: SampleSoFar, text_length: int, ids_length: int,
                 finish_reason: str | None = None, stop_reason: str | int | None = None):
        self.index, self.finish_reason, self.stop_reason = index, finish_reason, stop_reason
        self._of, self._text, self._token_ids = sample, text_length, ids_length

    @property
    def text(self) -> str:
        return self._of.text[:self._text] if self._of is not None else self._text

    @text.setter
    def text(self, value: str) -> None:
        self.hold()
        self._text = value

    @property
    def token_ids(self) -> list[int]:
        return self._of.token_ids[:self._token_ids] if self._of is not None else self._token_ids

    @token_ids.setter
    def token_ids(self, value: list[int]) -> None:
        self.hold()
        self._token_ids = value

    @property
    def held(self) -> bool:
        return self._of is not None

    @property
    def carried(self) -> int:
        return self._token_ids if self._of is not None else len(self._token_ids)

    def held_length(self, sample: SampleSoFar) -> int | None:
        return self._text if self._of is sample else None

    def hold(self) -> None:
        if self._of is not None:
            self._text, self._token_ids, self._of = self.text, self.token_ids, None

    # A copy (a page's state, a pickle) takes the held form as it is: the slots under ``text`` and
    # ``token_ids`` are the plain output's, unused here.
    def __getstate__(self) -> tuple:
        return self.index, self.finish_reason, self.stop_reason, self._of, self._text, self._token_ids

    def __setstate__(self, state: tuple) -> None:
        self.index, self.finish_reason, self.stop_reason, self._of, self._text, self._token_ids = state


class SpanOutput(EventOutput):
    """A DELTA output held as the span of its sample's token ids that it added: a DELTA sample's
    ids only grow, so the output's are the sample's from where they were appended. At a GPU's
    pace a run holds hundreds of thousands of outputs, and a list of ids for each would be as
    many more objects for the garbage collector to walk, again at every full collection. Its text
    stays its own (a DELTA output's text need not be its tokens' pieces)."""

    __slots__ = ("_at", "_ids", "_of")

    def __init__(self, index: int, sample: SampleSoFar, at: int, count: int, text: str,
                 finish_reason: str | None = None, stop_reason: str | int | None = None):
        self.index, self.text, self.finish_reason, self.stop_reason = index, text, finish_reason, stop_reason
        self._of, self._at, self._ids = sample, at, count

    @property
    def token_ids(self) -> list[int]:
        return self._of.token_ids[self._at:self._at + self._ids] if self._of is not None else self._ids

    @token_ids.setter
    def token_ids(self, value: list[int]) -> None:
        self._of, self._ids = None, value

    @property
    def carried(self) -> int:
        return self._ids if self._of is not None else len(self._ids)

    def span_of(self, sample: SampleSoFar) -> int | None:
        return self._at if self._of is sample else None

    def __getstate__(self) -> tuple:  # a copy keeps the span, over the copy of its sample
        return self.index, self.text, self.finish_reason, self.stop_reason, self._of, self._at, self._ids

    def __setstate__(self, state: tuple) -> None:
        self.index, self.text, self.finish_reason, self.stop_reason, self._of, self._at, self._ids = state
