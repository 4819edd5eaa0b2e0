"""The contract of vLLM's n > 1 output kinds, as rules a recorded run can be checked against.

The rules are those of ../shared/notes/vllm-parallel-sampling.md (and of vLLM's own tests): what a
caller of ``generate()`` receives under CUMULATIVE, DELTA and FINAL_ONLY. "Final" is re-derived
here from the raw events (``assemble``), not taken from the run recorder, so a check can fail
when the events and the samples disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from playground.analysis import first_divergence
from playground.run import Run

# Every rule a cell is checked against: a short stable name (tests and tools match on it) and what it
# means. "run-error" is the cell's own: its path raised instead of returning a Run.
RULES = {
    "status": "the run finished (not aborted, not failed)",
    "event-count": "FINAL_ONLY yields exactly one event; a streamed kind at least one",
    "event-shape": "FINAL_ONLY's event holds the n samples in index order; an event holds each index at most once",
    "finished-flag": "`finished` is set on the last event, and on no other",
    "after-finish": "no index appears after the event that finished it",
    "finish-reason": "every sample carries a finish_reason",
    "indices": "indices are 0..n-1: every index appears, none outside",
    "delta-concat": "DELTA pieces concatenate to the final text and token ids",
    "cumulative-grows": "each CUMULATIVE value extends the index's previous value",
    "cumulative-last": "the last CUMULATIVE value per index is the final text and token ids",
    "final-only-values": "the FINAL_ONLY event's values are the run's samples",
    "seeds": "sample i's seed is seed+i (one seed for all in same-seed mode)",
    "run-error": "the path returned a run instead of raising",
}
_ASSEMBLED = {"DELTA": ("delta-concat", "DELTA pieces of sample {i} concatenate to"),
              "CUMULATIVE": ("cumulative-last", "the last CUMULATIVE value of sample {i} is"),
              "FINAL_ONLY": ("final-only-values", "the FINAL_ONLY event's sample {i} is")}


@dataclass
class Violation:
    rule: str  # a key of RULES
    message: str  # for people: which sample, which event

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


def check(run: Run, final: Run | None = None) -> list[Violation]:
    """Every contract rule ``run`` breaks, in RULES order; [] when it holds them all.

    ``final``: the same request's FINAL_ONLY run on the same path, when it ran in the same
    conditions (alone on the same engine). A streamed kind's assembled values must equal it: that
    is the independent "final value"; without it they are compared with the run's samples only.
    """
    found: list[Violation] = []

    def broke(rule: str, message: str) -> None:
        found.append(Violation(rule, message))

    n = int(run.request.get("n", run.n))
    kind = run.output_kind
    events = run.events
    if run.status != "finished":
        broke("status", f"the run ended {run.status}" + (f": {run.error}" if run.error else ""))
    recorded = [s.index for s in run.samples]
    if recorded != list(range(n)):
        broke("indices", f"the run records samples {_list(recorded)}, expected 0..{n - 1} (n={n})")

    if not events:
        broke("event-count", "the run has no event")
    elif kind == "FINAL_ONLY" and len(events) != 1:
        broke("event-count", f"FINAL_ONLY yielded {len(events)} events, expected exactly 1")

    for number, event in enumerate(events):
        carried = [o.index for o in event.outputs]
        if not carried:
            broke("event-shape", f"event {number} holds no sample")
        twice = sorted({i for i in carried if carried.count(i) > 1})
        if twice:
            broke("event-shape", f"event {number} holds sample {_list(twice)} more than once "
                                 "(queued outputs of one index must be merged)")
    if kind == "FINAL_ONLY" and events:
        carried = [o.index for o in events[-1].outputs]
        if sorted(carried) == list(range(n)) and carried != list(range(n)):
            broke("event-shape", f"the FINAL_ONLY event holds the samples in order {_list(carried)}, "
                                 f"expected index order 0..{n - 1}")
        elif sorted(carried) != list(range(n)):
            broke("event-shape", f"the FINAL_ONLY event holds samples {_list(carried)}, expected all n={n} "
                                 f"in index order 0..{n - 1}")

    if events:
        early = [k for k, e in enumerate(events[:-1]) if e.finished]
        if early:
            broke("finished-flag", f"event {early[0]} of {len(events)} is marked finished, but only the last "
                                   f"event may be")
        if not events[-1].finished:
            broke("finished-flag", f"the last event (event {len(events) - 1}) is not marked finished")

    outside = sorted({o.index for e in events for o in e.outputs if not 0 <= o.index < n})
    for index in outside:
        number = next(k for k, e in enumerate(events) if any(o.index == index for o in e.outputs))
        broke("indices", f"event {number} holds index {index}, outside 0..{n - 1}")
    seen = {o.index for e in events for o in e.outputs}
    missing = [i for i in range(n) if i not in seen]
    if missing and events:
        broke("indices", f"sample {_list(missing)} appears in no event")

    finished_at: dict[int, int] = {}
    reported: set[int] = set()
    for number, event in enumerate(events):
        for out in event.outputs:
            if out.index in finished_at:
                if out.index not in reported:
                    reported.add(out.index)
                    broke("after-finish", f"sample {out.index} appears in event {number} after it finished in "
                                          f"event {finished_at[out.index]}")
            elif out.finish_reason is not None:
                finished_at[out.index] = number
    unfinished = [i for i in range(n) if i in seen and i not in finished_at]
    if unfinished:
        broke("finish-reason", f"sample {_list(unfinished)} never finished: no event carries its finish_reason")

    if kind == "CUMULATIVE":
        previous: dict[int, tuple[int, list[int], str]] = {}
        for number, event in enumerate(events):
            for out in event.outputs:
                if out.index in previous:
                    before, ids, text = previous[out.index]
                    if out.token_ids[:len(ids)] != ids or not out.text.startswith(text):
                        broke("cumulative-grows", f"sample {out.index}'s value in event {number} does not extend "
                                                  f"its value in event {before}: {_difference(ids, out.token_ids)}")
                previous[out.index] = (number, list(out.token_ids), out.text)

    rule, what = _ASSEMBLED.get(kind, _ASSEMBLED["CUMULATIVE"])
    assembled = assemble(run)
    samples = {s.index: (s.text, list(s.token_ids)) for s in run.samples}
    references = [("the run's sample", samples)]
    if final is not None and kind != "FINAL_ONLY":
        references.append(("this path's FINAL_ONLY cell", {s.index: (s.text, list(s.token_ids))
                                                            for s in final.samples}))
    for name, values in references:
        for index in sorted(set(assembled) & set(values)):
            text, ids = assembled[index]
            final_text, final_ids = values[index]
            if ids != final_ids:
                broke(rule, f"{what.format(i=index)} {len(ids)} tokens, but {name} has {len(final_ids)}: "
                            f"{_difference(ids, final_ids)}")
            elif text != final_text:
                broke(rule, f"{what.format(i=index)} the text {_clip(text)}, but {name} has {_clip(final_text)}")

    seed, mode = run.request.get("seed"), run.request.get("mode")
    if seed is not None:
        expected = [seed] * n if mode == "same-seed" else [seed + i for i in range(n)]  # not child_seeds: re-derived
        for s in run.samples:
            if 0 <= s.index < n and s.seed != expected[s.index]:
                broke("seeds", f"sample {s.index} has seed {s.seed}, expected {expected[s.index]}"
                               + (" (same-seed mode)" if mode == "same-seed" else f" (seed {seed} + {s.index})"))
    order = list(RULES)
    return sorted(found, key=lambda v: order.index(v.rule) if v.rule in order else len(order))


def assemble(run: Run) -> dict[int, tuple[str, list[int]]]:
    """Each index's (text, token ids) as a consumer of the run's output_kind must assemble them
    from the raw events: DELTA concatenates, CUMULATIVE keeps the latest, FINAL_ONLY reads its
    (last) event. Independent of RunRecorder, which does the same for the record."""
    values: dict[int, tuple[str, list[int]]] = {}
    events = run.events[-1:] if run.output_kind == "FINAL_ONLY" else run.events
    for event in events:
        for out in event.outputs:
            if run.output_kind == "DELTA" and out.index in values:
                text, ids = values[out.index]
                values[out.index] = (text + out.text, ids + list(out.token_ids))
            else:
                values[out.index] = (out.text, list(out.token_ids))
    return values


def _difference(a: Sequence[int], b: Sequence[int]) -> str:
    k = first_divergence(a, b)
    if k is None:
        return "same token ids"
    return f"first difference at token {k} ({_token(a, k)} vs {_token(b, k)})"


def _token(ids: Sequence[int], k: int) -> str:
    return f"id {ids[k]}" if k < len(ids) else "end"


def _list(items) -> str:
    return ", ".join(map(str, items))


def _clip(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[:width] + "…")
