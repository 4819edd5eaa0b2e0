"""The samples area's messages: what one browser holds of a run, and the next message for it.

``SamplesFeed`` turns the growing Run into a reset (everything) or a delta (only what changed since
its previous message); the message format is described in ``samples_area``. ``Told`` is the rule
both it and ``/sample``'s progress snapshots follow a run by. Pure: no Gradio.
"""

from __future__ import annotations

import json
import math
import operator
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from playground import analysis
from playground.analysis import entropy
from playground.analysis.display import alternative, token_name
from playground.analysis.tree import prefix_order
from playground.logprobs import Logprobs
from playground.run import Run, Sample

LOWEST_LOGPROB = -99.0  # JSON has no -inf; the browser shows p as 0 either way
# A logprob's decimals in a message: the page shows p = exp(logprob) to 3 decimals, and a logprob
# rounded to 3 moved one p in thirty to the next thousandth (-0.028575, p 0.9718, read 0.971)
DECIMALS = 4


def encode(message: dict) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def _logprob(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    return round(max(value, LOWEST_LOGPROB), DECIMALS)


def _piece(sample: Sample, pos: int) -> str:
    """The text of the token at ``pos``: its decoded piece, else the logprob's, else its id."""
    if pos < len(sample.token_texts):
        return sample.token_texts[pos]
    lp = sample.logprobs[pos] if sample.logprobs and pos < len(sample.logprobs) else None
    return lp.text if lp is not None and lp.text else token_name(sample.token_ids[pos])


def finish_text(sample: Sample) -> str | None:
    """How a sample ended, as its card and row say it, with the marks the summary uses (✔ ended,
    ■ stopped by Stop or a closed tab) and vLLM's finish reason beside, for a QA reader: "✔ EOS",
    "✔ stop string '\\n'", "✔ length", "■ stopped (abort)". A bare "■ stop" read as stopped."""
    reason, why = sample.finish_reason, sample.stop_reason
    if reason is None:
        return None
    if reason == "abort":
        return "■ stopped (abort)"
    if reason == "stop":
        said = "EOS" if why is None else f"stop token {why}" if isinstance(why, int) else f"stop string {why!r}"
        return f"✔ {said}"
    return f"✔ {reason}" if reason == "length" else f"✖ {reason}"


MAX_PAST = 200  # characters: a longer tail past the text is not a stop string or a special token


def past_text(sample: Sample) -> str:
    """What a sample that stopped sampled past its text: the end-of-sequence token or the stop
    string that ended it, which vLLM leaves out of the text and the token pieces keep. The columns
    show it apart, so that "…paws.<|im_end|>" does not read as words the sample said. "" when
    there is none, or the pieces do not spell the text out (then nothing is shown apart)."""
    if sample.finish_reason != "stop" or len(sample.token_texts) < len(sample.token_ids):
        return ""
    spelled, text = "".join(sample.token_texts[:len(sample.token_ids)]), sample.text
    tail = spelled[len(text):]
    return tail if spelled.startswith(text) and len(tail) <= MAX_PAST else ""


def _entries(grown: list[tuple[Sample, int]], timed: bool = True) -> list[list]:
    """The ``u`` entries of the samples that grew (each from the position the browser lacks); the
    logprobs of all of them read at once from their arrays. ``timed``: with the arrival times a
    card's TTFT and tok/s are read from; not for FINAL_ONLY, whose first output is its last."""
    arrays = _from_arrays([(s, start) for s, start in grown if isinstance(s.logprobs, Logprobs)])
    return [_entry(s, start, arrays.get(s.index), timed) for s, start in grown]


def _entry(sample: Sample, start: int, read: tuple | None, timed: bool = True) -> list:
    """Sample ``sample``'s tokens from ``start`` on, as one ``u`` entry (``read``: its logprobs,
    top-k and entropies, when they came from arrays)."""
    stop = len(sample.token_ids)
    texts = [_piece(sample, p) for p in range(start, stop)]
    logprobs: Any = 0
    tops: Any = 0
    entropies: Any = 0
    if read is not None:
        missing = [None] * (stop - start - len(read[0]))
        logprobs, tops, entropies = read[0] + missing, read[1] + [[]] * len(missing), read[2] + missing
    elif sample.logprobs:
        recorded = sample.logprobs[start:stop]
        missing = [None] * (stop - start - len(recorded))
        logprobs = [_logprob(lp.logprob) for lp in recorded] + missing
        tops = [[x for tid, value, text in lp.top for x in (alternative(text, tid), _logprob(value))]
                for lp in recorded]
        tops += [[]] * len(missing)
        entropies = [None if e is None else round(e, 2) for e in analysis.entropies(recorded, len(recorded))]
        entropies += missing
    times = sample.token_times if timed else []
    last = round(times[min(stop, len(times)) - 1], 3) if times else None
    entry = [sample.index, start, last, texts, logprobs, tops, entropies]
    if start == 0:
        entry.append(round(times[0], 3) if times else None)
    return entry


def _from_arrays(grown: list[tuple[Sample, int]]) -> dict[int, tuple[list, list, list]]:
    """Per sample index: the new positions' logprobs, top-k lists and entropies, computed for all
    the samples at once (numpy over every new position: at a GPU's pace there are thousands a
    second, and a Python loop per alternative costs more than the engine's frontend)."""
    sampled, rank, values, ids = array("f"), array("i"), array("f"), array("i")
    counts: list[int] = []
    spans = []
    for s, start in grown:
        lps = s.logprobs
        stop = min(len(s.token_ids), len(lps))
        if stop <= start:
            continue
        starts = lps.starts[start:stop + 1]
        sampled.extend(lps.sampled[start:stop])
        rank.extend(lps.rank[start:stop])
        values.extend(lps.top_values[starts[0]:starts[-1]])
        ids.extend(lps.top_ids[starts[0]:starts[-1]])
        counts.extend(map(operator.sub, starts[1:], starts[:-1]))
        spans.append((s, start, stop - start))
    if not spans:
        return {}
    count = np.array(counts, dtype=np.int64)
    sampled_np = np.frombuffer(sampled, dtype=np.float32).astype(np.float64)
    rank_np = np.frombuffer(rank, dtype=np.int32)
    block = entropy.of_arrays(sampled_np, rank_np, count, np.frombuffer(values, dtype=np.float32).astype(np.float64))
    bits = np.round(entropy.entropy_matrix(block.logp, block.excluded)[0], 2).tolist()
    shown = _rounded(sampled_np)
    alternatives = _rounded(np.frombuffer(values, dtype=np.float32).astype(np.float64))
    table = spans[0][0].logprobs.texts
    names = [alternative(table.get(t), t) for t in ids]
    result, p, a = {}, 0, 0
    for s, start, length in spans:
        tops = []
        for q in range(p, p + length):
            c = counts[q]
            top = [None] * (2 * c)
            top[::2], top[1::2] = names[a:a + c], alternatives[a:a + c]
            if rank[q] > c:  # the sampled token below the top-k: listed after it
                token_id = s.logprobs.ids[start + q - p]
                top += [alternative(table.get(token_id), token_id), shown[q]]
            tops.append(top)
            a += c
        result[s.index] = (shown[p:p + length], tops, bits[p:p + length])
        p += length
    return result


def _rounded(values: np.ndarray) -> list[float | None]:
    """Logprobs as the browser gets them: ``DECIMALS`` decimals, -99 for -inf (JSON has none), None for NaN."""
    rounded = np.round(np.maximum(values, LOWEST_LOGPROB), DECIMALS)
    listed = rounded.tolist()
    if np.isnan(rounded).any():
        listed = [None if math.isnan(v) else v for v in listed]
    return listed


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


LEAD_CHARS = 80  # the end of a branch's shared start, shown above each sample's new text


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
        self.known: dict[tuple[int, int], int] = {}  # shared prefixes of neighbours found so far
        self.status: str | None = None

    def matches(self, run: Run) -> bool:
        return run is self.run and self.n == run.n

    def reset(self, run: Run, seq: int) -> dict:
        """Everything about the run, from the first token."""
        self.told = Told(finish_text)
        self.order = self.shared = self.status = None
        self.known = {}
        message = {"k": "r", "s": seq, "r": self.key, "id": self.request_id, "n": run.n,
                   "sd": [s.seed for s in run.samples]}
        if lead := analysis.continued_text(run):  # a branch's samples continue it
            message["pf"] = lead if len(lead) <= LEAD_CHARS else "…" + lead[-LEAD_CHARS:]
        message.update(self._changes(run))
        return message

    def delta(self, run: Run, seq: int) -> dict | None:
        """What changed since the previous message; None when nothing did."""
        changes = self._changes(run)
        return {"k": "d", "s": seq, "r": self.key, **changes} if changes else None

    def _changes(self, run: Run) -> dict:
        """What the browser lacks, read while no output is being recorded (``Run.changing``: the
        recording may run on another thread, and a sample's ids must come with their texts)."""
        with run.changing:
            return self._read_changes(run)

    def _read_changes(self, run: Run) -> dict:
        out: dict[str, Any] = {}
        grown, finished = [], []
        for s, before, ended in self.told.news(run):
            if len(s.token_ids) > before:
                grown.append((s, before))
            if ended:
                finished.append([s.index, self.told.reasons[s.index], *filter(None, [past_text(s)])])
        if grown:
            out["u"] = _entries(grown, timed=run.output_kind != "FINAL_ONLY")
            order, shared = empty_last(*prefix_order([s.token_ids for s in run.samples], self.known), run.samples)
            if order != self.order or shared != self.shared:
                out["o"], out["c"] = order, shared
                self.order, self.shared = order, shared
        if finished:
            out["f"] = finished
        if run.status != self.status:
            out["st"] = self.status = run.status
        return out


def empty_last(order: list[int], shared: list[int], samples) -> tuple[list[int], list[int]]:
    """The wall's order: the tree's (``prefix_order``), but the samples with no token yet last. The
    tree's order puts them first (the empty sequence sorts first), and while a run of n=256 is
    admitted in waves the wall's top rows were empty ones, the streaming rows below the fold."""
    kept = [(i, k) for i, k in zip(order, shared) if len(samples[i].token_ids)]
    if len(kept) == len(order):
        return order, shared
    if kept:
        kept[0] = (kept[0][0], 0)  # the first row shares nothing with a row above
    kept += [(i, 0) for i in order if not len(samples[i].token_ids)]
    return [i for i, _ in kept], [k for _, k in kept]
