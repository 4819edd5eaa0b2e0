"""The samples area's messages: what one browser holds of a run, and the next message for it.

``SamplesFeed`` turns the growing Run into a reset (everything) or a delta (only what changed since
its previous message); the message format is described in ``samples_area``. ``Told`` is the rule
both it and ``/sample``'s progress snapshots follow a run by. Pure: no Gradio.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from playground.analysis.tree import prefix_order
from playground.analysis.uncertainty import entropy_at, entropy_of_listed
from playground.logprobs import Logprobs
from playground.run import Run, Sample

LOWEST_LOGPROB = -99.0  # JSON has no -inf; the browser shows p as 0 either way


def encode(message: dict) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def _logprob(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    return round(max(value, LOWEST_LOGPROB), 3)


def _piece(sample: Sample, pos: int) -> str:
    """The text of the token at ``pos``: its decoded piece, else the logprob's, else its id."""
    if pos < len(sample.token_texts):
        return sample.token_texts[pos]
    lp = sample.logprobs[pos] if sample.logprobs and pos < len(sample.logprobs) else None
    return lp.text if lp is not None and lp.text else f"⟨id {sample.token_ids[pos]}⟩"


def finish_text(sample: Sample) -> str | None:
    """The finish reason as the column header says it (a stop string in quotes)."""
    reason = sample.finish_reason
    if reason and sample.stop_reason is not None and reason == "stop":
        reason += f" ({sample.stop_reason!r})"
    return reason


def _entry(sample: Sample, start: int) -> list:
    """Sample ``sample``'s tokens from ``start`` on, as one ``u`` entry."""
    stop = len(sample.token_ids)
    texts = [_piece(sample, p) for p in range(start, stop)]
    logprobs: Any = 0
    tops: Any = 0
    entropies: Any = 0
    if isinstance(sample.logprobs, Logprobs) and len(sample.logprobs):
        logprobs, tops, entropies = _arrays(sample.logprobs, start, stop)
    elif sample.logprobs:
        recorded = sample.logprobs[start:stop]
        missing = [None] * (stop - start - len(recorded))
        logprobs = [_logprob(lp.logprob) for lp in recorded] + missing
        tops = [[x for tid, value, text in lp.top for x in (text if text is not None else f"⟨id {tid}⟩",
                                                              _logprob(value))] for lp in recorded]
        tops += [[]] * len(missing)
        entropies = [None if (e := entropy_at(lp)) is None else round(e, 2) for lp in recorded] + missing
    times = sample.token_times
    last = round(times[min(stop, len(times)) - 1], 2) if times else None
    entry = [sample.index, start, last, texts, logprobs, tops, entropies]
    if start == 0:
        entry.append(round(times[0], 2) if times else None)
    return entry


def _arrays(lps: Logprobs, start: int, stop: int) -> tuple[list, list, list]:
    """The ``u`` entry's logprobs, top-k and entropies, read from the arrays (no TokenLogprob made)."""
    logprobs, tops, entropies = [], [], []
    table, starts, ids, values = lps.texts, lps.starts, lps.top_ids, lps.top_values
    for p in range(start, min(stop, len(lps))):
        a, b = starts[p], starts[p + 1]
        listed = list(zip(ids[a:b], values[a:b]))
        token_id, rank, value = lps.ids[p], lps.rank[p], lps.sampled[p]
        if rank > b - a:  # sampled below the top-k: listed after it
            listed.append((token_id, value))
        logprobs.append(_logprob(value))
        tops.append([x for tid, v in listed for x in (table.get(tid) or f"⟨id {tid}⟩", _logprob(v))])
        entropies.append(round(entropy_of_listed(listed, token_id, rank or None)[0], 2))
    missing = stop - start - len(logprobs)
    return logprobs + [None] * missing, tops + [[]] * missing, entropies + [None] * missing


class Told:
    """What a reader has been told of a run so far, per sample: how many tokens and which finish
    reason (as ``reason`` words it), so that each message says only what is new."""

    def __init__(self, reason: Callable[[Sample], str | None] = lambda s: s.finish_reason):
        self.reason = reason
        self.tokens: dict[int, int] = {}
        self.reasons: dict[int, str | None] = {}

    def news(self, run: Run) -> Iterator[tuple[Sample, int, bool]]:
        """Each sample with something new: ``(sample, tokens told before, whether its finish
        reason is new)``; from then on it counts as told."""
        for s in run.samples:
            before, reason = self.tokens.get(s.index, 0), self.reason(s)
            ended = reason != self.reasons.get(s.index)
            if len(s.token_ids) > before or ended:
                self.tokens[s.index], self.reasons[s.index] = len(s.token_ids), reason
                yield s, before, ended


class SamplesFeed:
    """What the browser holds of one run; turns the growing Run into the next message."""

    def __init__(self, run: Run, key: int):
        self.key = key
        self.run = run  # the very Run: a stream's record grows in place
        self.request_id = run.request.get("request_id")
        self.n = run.n
        self.told = Told(finish_text)  # what the browser has
        self.order: list[int] | None = None
        self.shared: list[int] | None = None
        self.status: str | None = None

    def matches(self, run: Run) -> bool:
        return run is self.run and self.n == run.n

    def reset(self, run: Run, seq: int) -> dict:
        """Everything about the run, from the first token."""
        self.told = Told(finish_text)
        self.order = self.shared = self.status = None
        message = {"k": "r", "s": seq, "r": self.key, "id": self.request_id, "n": run.n,
                   "sd": [s.seed for s in run.samples]}
        message.update(self._changes(run))
        return message

    def delta(self, run: Run, seq: int) -> dict | None:
        """What changed since the previous message; None when nothing did."""
        changes = self._changes(run)
        return {"k": "d", "s": seq, "r": self.key, **changes} if changes else None

    def _changes(self, run: Run) -> dict:
        out: dict[str, Any] = {}
        grown, finished = [], []
        for s, before, ended in self.told.news(run):
            if len(s.token_ids) > before:
                grown.append(_entry(s, before))
            if ended:
                finished.append([s.index, self.told.reasons[s.index]])
        if grown:
            out["u"] = grown
            order, shared = prefix_order([s.token_ids for s in run.samples])
            if order != self.order or shared != self.shared:
                out["o"], out["c"] = order, shared
                self.order, self.shared = order, shared
        if finished:
            out["f"] = finished
        if run.status != self.status:
            out["st"] = self.status = run.status
        return out
