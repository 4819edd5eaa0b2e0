"""The contract of vLLM's n > 1 output kinds, as rules a recorded run can be checked against.

The rules are what vLLM promises (and its own tests check) a caller of ``generate()`` receives
under CUMULATIVE, DELTA and FINAL_ONLY. "Final" is re-derived
here from the raw events (``assemble``), not taken from the run recorder, so a check can fail
when the events and the samples disagree. The rules of a path's conduct beyond those values (what
it hands out, which id, what the engine counts) are in ``conduct``; ``RULEBOOK`` is both, in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from playground.analysis import first_divergence
from playground.qa import conduct
from playground.qa.rules import Finding, Rulebook, Subject, clip, finished_at, listed
from playground.run import Run

book = Rulebook()


@book.rule("status", "the run finished (not aborted, not failed)")
def status(s: Subject) -> Iterator[Finding]:
    if s.run.status != "finished":
        yield f"the run ended {s.run.status}" + (f": {s.run.error}" if s.run.error else "")


@book.rule("event-count", "FINAL_ONLY yields exactly one event; a streamed kind at least one")
def event_count(s: Subject) -> Iterator[Finding]:
    if not s.events:
        yield "the run has no event"
    elif s.kind == "FINAL_ONLY" and len(s.events) != 1:
        yield f"FINAL_ONLY yielded {len(s.events)} events, expected exactly 1"


@book.rule("event-shape", "FINAL_ONLY's event holds the n samples in index order; an event holds each index at most "
                          "once")
def event_shape(s: Subject) -> Iterator[Finding]:
    for number, event in enumerate(s.events):
        carried = [o.index for o in event.outputs]
        if not carried:
            yield f"event {number} holds no sample"
        twice = sorted({i for i in carried if carried.count(i) > 1})
        if twice:
            yield (f"event {number} holds sample {listed(twice)} more than once "
                   "(queued outputs of one index must be merged)")
    if s.kind == "FINAL_ONLY" and s.events:
        n, carried = s.n, [o.index for o in s.events[-1].outputs]
        if sorted(carried) == list(range(n)) and carried != list(range(n)):
            yield f"the FINAL_ONLY event holds the samples in order {listed(carried)}, expected index order 0..{n - 1}"
        elif sorted(carried) != list(range(n)):
            yield (f"the FINAL_ONLY event holds samples {listed(carried)}, expected all n={n} in index order "
                   f"0..{n - 1}")


@book.rule("finished-flag", "`finished` is set on the last event, and on no other")
def finished_flag(s: Subject) -> Iterator[Finding]:
    if not s.events:
        return
    early = [k for k, e in enumerate(s.events[:-1]) if e.finished]
    if early:
        yield f"event {early[0]} of {len(s.events)} is marked finished, but only the last event may be"
    if not s.events[-1].finished:
        yield f"the last event (event {len(s.events) - 1}) is not marked finished"


@book.rule("after-finish", "no index appears after the event that finished it")
def after_finish(s: Subject) -> Iterator[Finding]:
    finished: dict[int, int] = {}
    reported: set[int] = set()
    for number, event in enumerate(s.events):
        for out in event.outputs:
            if out.index in finished:
                if out.index not in reported:
                    reported.add(out.index)
                    yield (f"sample {out.index} appears in event {number} after it finished in event "
                           f"{finished[out.index]}")
            elif out.finish_reason is not None:
                finished[out.index] = number


@book.rule("finish-reason", "every sample carries a finish_reason")
def finish_reason(s: Subject) -> Iterator[Finding]:
    seen = {o.index for e in s.events for o in e.outputs}
    finished = finished_at(s.events)
    unfinished = [i for i in range(s.n) if i in seen and i not in finished]
    if unfinished:
        yield f"sample {listed(unfinished)} never finished: no event carries its finish_reason"


@book.rule("indices", "indices are 0..n-1: every index appears, none outside")
def indices(s: Subject) -> Iterator[Finding]:
    n = s.n
    recorded = [sample.index for sample in s.run.samples]
    if recorded != list(range(n)):
        yield f"the run records samples {listed(recorded)}, expected 0..{n - 1} (n={n})"
    for index in sorted({o.index for e in s.events for o in e.outputs if not 0 <= o.index < n}):
        number = next(k for k, e in enumerate(s.events) if any(o.index == index for o in e.outputs))
        yield f"event {number} holds index {index}, outside 0..{n - 1}"
    seen = {o.index for e in s.events for o in e.outputs}
    missing = [i for i in range(n) if i not in seen]
    if missing and s.events:
        yield f"sample {listed(missing)} appears in no event"


@book.rule("delta-concat", "DELTA pieces concatenate to the final text and token ids")
def delta_concat(s: Subject) -> Iterator[Finding]:
    if s.kind == "DELTA":
        yield from _assembled(s, "DELTA pieces of sample {i} concatenate to")


@book.rule("cumulative-grows", "each CUMULATIVE value extends the index's previous value")
def cumulative_grows(s: Subject) -> Iterator[Finding]:
    if s.kind != "CUMULATIVE":
        return
    previous: dict[int, tuple[int, list[int], str]] = {}
    for number, event in enumerate(s.events):
        for out in event.outputs:
            if out.index in previous:
                before, ids, text = previous[out.index]
                if out.token_ids[:len(ids)] != ids or not out.text.startswith(text):
                    yield (f"sample {out.index}'s value in event {number} does not extend its value in event {before}: "
                           f"{_difference(ids, out.token_ids)}")
            previous[out.index] = (number, list(out.token_ids), out.text)


@book.rule("cumulative-last", "the last CUMULATIVE value per index is the final text and token ids")
def cumulative_last(s: Subject) -> Iterator[Finding]:
    if s.kind not in ("DELTA", "FINAL_ONLY"):  # an unknown kind is read as CUMULATIVE, vLLM's default
        yield from _assembled(s, "the last CUMULATIVE value of sample {i} is")


@book.rule("final-only-values", "the FINAL_ONLY event's values are the run's samples")
def final_only_values(s: Subject) -> Iterator[Finding]:
    if s.kind == "FINAL_ONLY":
        yield from _assembled(s, "the FINAL_ONLY event's sample {i} is")


@book.rule("seeds", "sample i's seed is seed+i (one seed for all in same-seed mode)")
def seeds(s: Subject) -> Iterator[Finding]:
    seed, mode, n = s.run.request.get("seed"), s.run.request.get("mode"), s.n
    if seed is None:
        return
    expected = [seed] * n if mode == "same-seed" else [seed + i for i in range(n)]  # not child_seeds: re-derived
    for sample in s.run.samples:
        if 0 <= sample.index < n and sample.seed != expected[sample.index]:
            yield (f"sample {sample.index} has seed {sample.seed}, expected {expected[sample.index]}"
                   + (" (same-seed mode)" if mode == "same-seed" else f" (seed {seed} + {sample.index})"))


def _assembled(s: Subject, what: str) -> Iterator[Finding]:
    """The values a consumer assembles from the events, held to the run's samples and, when given,
    to the same path's FINAL_ONLY run (the independent "final value")."""
    assembled = assemble(s.run)
    references = [("the run's sample", {x.index: (x.text, list(x.token_ids)) for x in s.run.samples})]
    if s.final is not None and s.kind != "FINAL_ONLY":
        references.append(("this path's FINAL_ONLY cell", {x.index: (x.text, list(x.token_ids))
                                                            for x in s.final.samples}))
    for name, values in references:
        for index in sorted(set(assembled) & set(values)):
            text, ids = assembled[index]
            final_text, final_ids = values[index]
            if ids != final_ids:
                yield (f"{what.format(i=index)} {len(ids)} tokens, but {name} has {len(final_ids)}: "
                       f"{_difference(ids, final_ids)}")
            elif text != final_text:
                yield f"{what.format(i=index)} the text {clip(text)}, but {name} has {clip(final_text)}"


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


# --- every rule ------------------------------------------------------------------------------------

RULEBOOK = book + conduct.book  # the output kinds' contract first, then the path's conduct
# Every rule a cell is checked against: a short stable name (tests and tools match on it) and what it
# means, read from the rules themselves.
RULES: dict[str, str] = RULEBOOK.table()
