"""The bundle is exact by construction: over runs hypothesis makes up (every output kind, texts of
any characters, stop strings cutting text, pieces that end inside a character, samples of
different lengths, missing logprobs, fields left None, NaN and infinite logprobs), what
``to_json`` writes reads back as the very run, compared by type and value (1 is not 1.0, -0.0 is
not 0.0, a NaN is itself), and every bundle written is valid under the published JSON Schema."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import math
import weakref
from types import SimpleNamespace
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground import bundle_format
from playground.backends.recorder import Observation, RunRecorder
from playground.bundle_events import compact
from playground.bundle_format import SCHEMA_PATH
from playground.event_output import SpanOutput
from playground.logprobs import Logprobs
from playground.run import Event, EventOutput, LiveBundle, Run, Sample, TokenLogprob

KINDS = ("CUMULATIVE", "DELTA", "FINAL_ONLY")
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))

# A small vocabulary: ids spread wide, pieces of any characters, some empty (a token that ends
# inside a character), one the replacement character, two that spell the stop string together.
texts = st.text(max_size=4)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
logprob_values = st.one_of(st.none(), st.floats(width=32), st.floats(), st.just(-0.0))  # NaN and infinities too
maybe_int = st.one_of(st.none(), st.integers(-2, 2**63 - 1))
seeds = st.one_of(st.none(), st.integers(0, 2**63 - 1))  # vLLM's range (none: a run written by hand)
json_values = st.recursive(st.one_of(st.none(), st.booleans(), floats, st.integers(), texts),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=6)


def canonical(value: Any) -> Any:
    """A value whose == is by type and by value: floats by their digits (NaN is itself)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, (bool, int, str)) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canonical(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(canonical(k), canonical(v)) for k, v in value.items()])
    if isinstance(value, EventOutput):
        return ("output", [canonical(getattr(value, name)) for name in EventOutput.FIELDS])
    if isinstance(value, Logprobs):  # arrays: compared as the positions (with their texts) they give
        return ("positions", [canonical(dataclasses.asdict(lp)) for lp in value])
    raise TypeError(type(value))


@st.composite
def token_logprobs(draw, token_id: int, vocab: list[int]) -> TokenLogprob:
    top = [(t, draw(logprob_values), draw(st.one_of(st.none(), texts)))
           for t in draw(st.lists(st.sampled_from(vocab), max_size=4, unique=True))]
    if draw(st.booleans()) and top:  # the sampled token among its alternatives, as vLLM gives it
        place = draw(st.integers(0, len(top) - 1))
        top[place] = (token_id, top[place][1], top[place][2])
        if draw(st.booleans()):
            return TokenLogprob(token_id, top[place][1], place + 1, top[place][2], top)
    return TokenLogprob(draw(st.sampled_from([token_id, *vocab])), draw(logprob_values),
                        draw(st.one_of(st.none(), st.integers(1, 60))), draw(st.one_of(st.none(), texts)), top)


@st.composite
def runs(draw) -> Run:
    kind = draw(st.sampled_from(KINDS))
    n = draw(st.integers(1, 4))
    vocab = draw(st.lists(st.integers(0, 200_000), min_size=1, max_size=8, unique=True))
    piece = {t: draw(st.one_of(texts, st.sampled_from(["", "\ufffd", " E", "ND", "é", "\n"]))) for t in vocab}
    stop = draw(st.sampled_from(["END", "\n", "é"]))
    ids = [draw(st.lists(st.sampled_from(vocab), max_size=7)) for _ in range(n)]
    samples, events, done, said = [], [], [0] * n, [""] * n
    t = draw(floats)
    # The engine: each step some samples get one or more tokens, in one event or several.
    for _ in range(12):
        if all(done[i] == len(ids[i]) for i in range(n)):
            break
        outputs = []
        for i in draw(st.permutations(range(n))):
            if done[i] >= len(ids[i]) or not draw(st.booleans()):
                continue
            step = draw(st.integers(1, len(ids[i]) - done[i]))
            before, done[i] = done[i], done[i] + step
            text = "".join(piece[x] for x in ids[i][:done[i]])
            last = done[i] == len(ids[i])
            if last and stop in text and draw(st.booleans()):
                text = text[:text.index(stop)]  # a stop string cut it
            elif draw(st.integers(0, 9)) == 0:
                text = draw(texts)  # what no piece says: text held back, odd detokenizing
            finish = draw(st.sampled_from(["stop", "length", "abort"])) if last else None
            new = ids[i][before:done[i]] if kind == "DELTA" else list(ids[i][:done[i]])
            shown = text[len(said[i]):] if kind == "DELTA" and text.startswith(said[i]) else text
            said[i] = text
            if draw(st.integers(0, 19)) == 0:
                new = draw(st.lists(st.sampled_from(vocab), max_size=3))  # not the sample's: written whole
            outputs.append(EventOutput(i, shown, new, finish, stop if finish == "stop" and draw(st.booleans())
                                       else draw(st.one_of(st.none(), st.integers(0, 9)))))
        if outputs and not (kind == "FINAL_ONLY" and any(done[i] < len(ids[i]) for i in range(n))):
            t += draw(st.floats(0, 1))
            events.append(Event(t, draw(st.booleans()), outputs, draw(maybe_int), draw(st.one_of(st.none(), texts)),
                                draw(maybe_int)))
    times = _arrivals(events, n, kind == "DELTA")
    for i in range(n):
        seen = [o for e in events for o in e.outputs if o.index == i]
        by_recorder = draw(st.integers(0, 4)) > 0  # else a sample built by hand, its fields its own
        own_times = draw(st.sampled_from(["drawn", "as ints", "sign"]))
        drawn_times = draw(st.lists(floats, max_size=len(ids[i])))
        text = ("".join(o.text for o in seen) if kind == "DELTA" else seen[-1].text if seen else "") \
            if by_recorder else draw(texts)
        pieces = [piece[x] for x in ids[i]]
        if draw(st.integers(0, 5)) == 0:
            pieces = draw(st.lists(texts, max_size=len(ids[i]) + 1))  # pieces of its own, maybe too few
        lps = None if draw(st.booleans()) else [draw(token_logprobs(x, vocab)) for x in ids[i][:draw(
            st.integers(0, len(ids[i]) + 1))]]
        samples.append(Sample(
            index=i if draw(st.integers(0, 9)) else draw(st.integers(0, 9)), seed=draw(seeds), text=text,
            token_ids=list(ids[i]), token_texts=pieces,
            token_times=times[i] if by_recorder else drawn_times if own_times == "drawn" else [
                int(x) if own_times == "as ints" and x.is_integer() else -x if x == 0 else x for x in times[i]],
            logprobs=lps, finish_reason=seen[-1].finish_reason if seen and by_recorder else
            draw(st.one_of(st.none(), st.just("length"))),
            stop_reason=draw(st.one_of(st.none(), st.just(stop), st.integers(0, 5))),
            num_cached_tokens=draw(maybe_int), metrics=draw(st.one_of(st.none(), st.dictionaries(texts, floats,
                                                                                                 max_size=2))),
            queued_at=draw(st.one_of(st.none(), floats)), decode_s=draw(st.one_of(st.none(), floats))))
    if kind != "DELTA" and draw(st.booleans()):  # as the recorder keeps them: held as their sample's prefix
        for e in events:
            e.outputs = [EventOutput.prefix(o.index, samples[o.index], len(o.text), len(o.token_ids),
                                            o.finish_reason, o.stop_reason)
                         if samples[o.index].text.startswith(o.text)
                         and samples[o.index].token_ids[:len(o.token_ids)] == o.token_ids else o for o in e.outputs]
    request = {"prompt": draw(texts), "n": n, "output_kind": kind, "request_id": draw(st.one_of(st.none(), texts)),
               "seed": draw(seeds), "stop": [stop]}
    status = draw(st.sampled_from(["running", "finished", "aborted", "error"]))
    return Run(request=request, samples=samples, events=events, engine=draw(st.dictionaries(texts, json_values,
                                                                                             max_size=2)),
               started_at=draw(st.one_of(floats, st.integers(0, 2**40))), wall_time=draw(st.one_of(st.none(), floats)),
               status=status,  # a run that failed says why (Recording.fail)
               error=draw(st.text(min_size=1, max_size=4) if status == "error" else st.one_of(st.none(), texts)),
               usage=draw(st.one_of(st.none(), st.dictionaries(texts, st.integers(), max_size=2))),
               mutated_events=draw(st.one_of(st.none(), st.lists(st.integers(0, 12), max_size=2))))


def _arrivals(events: list[Event], n: int, delta: bool) -> list[list[float]]:
    """Token times as the recorder stamps them: each new token at its event's time."""
    times: list[list[float]] = [[] for _ in range(n)]
    had = [0] * n
    for e in events:
        for o in e.outputs:
            new = len(o.token_ids) if delta else max(0, len(o.token_ids) - had[o.index])
            had[o.index] = len(o.token_ids)
            times[o.index] += [e.t] * new
    return times


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_every_run_reads_back_as_it_was_written_and_its_bundle_is_valid(run):
    text = run.to_json()
    again = Run.from_json(text)
    assert canonical(dataclasses.asdict(again)) == canonical(dataclasses.asdict(run))
    if "NaN" not in text:
        assert again == run
    assert again.to_json() == text
    data = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(AssertionError(f"{name} in JSON")))
    VALIDATOR.validate(data)
    for s, written in zip(run.samples, data["samples"]):  # each sample's plain fields, as they are
        assert (written["index"], written["seed"], written["text"], written["token_ids"], written["finish_reason"],
                written["stop_reason"]) == (s.index, s.seed, s.text, s.token_ids, s.finish_reason, s.stop_reason)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.lists(st.fixed_dictionaries({
    "index": st.integers(0, 2**70), "seed": maybe_int, "text": st.one_of(st.none(), st.text()),
    "token_ids": st.lists(st.integers(0, 2**65), max_size=4), "finish_reason": st.one_of(st.none(), texts),
    "stop_reason": st.one_of(st.none(), st.integers(-2, 2**64 + 1), texts, floats),
    "token_texts": st.one_of(st.lists(st.one_of(st.none(), st.text()), max_size=3),
                             st.dictionaries(st.text(max_size=2), st.text(), max_size=2))}), max_size=3))
def test_the_fast_writing_of_samples_is_the_plain_one(run, entries):
    """``samples_json_parts`` (orjson where a sample holds no float) writes what ``compact`` writes: for
    the samples of any run, and for made-up ones with any characters, ints past 64 bits and floats."""
    samples = bundle_format.encode(run)["samples"]
    assert "".join(bundle_format.samples_json_parts(samples)) == compact(samples)
    assert "".join(bundle_format.samples_json_parts(entries)) == compact(entries)


def test_the_canonical_form_tells_apart_what_json_would_not():
    assert canonical([1]) != canonical([1.0]) and canonical(-0.0) != canonical(0.0)
    assert canonical(math.nan) == canonical(float("nan")) and canonical((1, 2)) != canonical([1, 2])


def flat_logprobs(ids: list[int], tops: list[list[int]]) -> SimpleNamespace:
    """vLLM's FlatLogprobs layout: per position the sampled token (rank 1), then the alternatives."""
    flat = SimpleNamespace(start_indices=[], end_indices=[], token_ids=[], logprobs=[], ranks=[])
    for token_id, top in zip(ids, tops):
        flat.start_indices.append(len(flat.token_ids))
        flat.token_ids += [token_id, *top]
        flat.logprobs += [-0.5] + [-1.0 - r for r in range(len(top))]
        flat.ranks += [1, *range(1, len(top) + 1)]
        flat.end_indices.append(len(flat.token_ids))
    return flat


@st.composite
def recorded(draw) -> tuple[Run, list[str], str]:
    """A run as the recorder grows it, its LiveBundle advanced at random moments between outputs:
    DELTA or CUMULATIVE outputs, texts that are not their pieces, and now and then a CUMULATIVE
    output that does not extend what its sample had (the recorder replaces the sample's lists),
    and finish reasons, on a sample's last output or not (a stop string cuts the text it ends with).
    With logprobs (half the runs), as vLLM's flat arrays: the sampled token and up to two
    alternatives per position, their texts a token's text alone, which for some ids is not the
    piece a sample's text has (the table's gathering finds them, or gives up when such an id is
    also an alternative). The table is gathered at every write of the events, or less often.
    Returns the run, and what it wrote: through its LiveBundle (twice: a run is saved more than
    once) and whole."""
    kind = draw(st.sampled_from(("DELTA", "CUMULATIVE")))
    n = draw(st.integers(1, 3))
    vocab = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=6, unique=True))
    piece = {t: draw(st.one_of(texts, st.just("é"))) for t in vocab}
    alone = {t: piece[t] if draw(st.integers(0, 3)) else "~" + piece[t] for t in vocab}  # a token's text alone
    with_logprobs = draw(st.booleans())
    recorder = RunRecorder({"prompt": "p", "n": n, "output_kind": kind, "request_id": "run-1"}, list(range(n)),
                           texts=alone.get)
    bundle = recorder.run.live_bundle = LiveBundle(recorder.run, table_every=draw(st.sampled_from((1, 2, 16))),
                                               write_every=draw(st.sampled_from((1, 2, 8, 32))))
    had = [([], "") for _ in range(n)]  # per sample: its ids and text so far, as the engine said them
    for _ in range(draw(st.integers(1, 10))):
        outputs, pieces, logprobs = [], {}, {}
        for i in draw(st.permutations(range(n))):
            if not draw(st.booleans()):
                continue
            new = draw(st.lists(st.sampled_from(vocab), min_size=1, max_size=3))
            ids, text = had[i]
            said = "".join(piece[t] for t in new) if draw(st.integers(0, 5)) else draw(texts)
            if kind == "CUMULATIVE" and ids and draw(st.integers(0, 7)) == 0:
                ids, text = ids[:-1], text[:-1]  # it takes back what it said: not an extension
            ids, text = ids + new, text + said
            had[i] = (ids, text)
            pieces[i] = [piece[t] for t in new]
            finish = draw(st.sampled_from((None, None, None, "stop", "length")))
            if kind == "DELTA":
                outputs.append(EventOutput(i, said, new, finish))
            else:
                pieces[i] = [piece[t] for t in ids[len(recorder.run.samples[i].token_ids):]]  # what it adds
                outputs.append(EventOutput(i, text, list(ids), finish))
            if with_logprobs:  # DELTA: the new positions; CUMULATIVE: every one so far
                positions = new if kind == "DELTA" else ids
                tops = [draw(st.lists(st.sampled_from(vocab), max_size=2, unique=True)) for _ in positions]
                logprobs[i] = (flat_logprobs(positions, tops), 0)
        if outputs:
            recorder.observe(Observation(Event(recorder.t0 + len(recorder.run.events), False, outputs),
                                         token_texts=pieces, logprobs=logprobs))
        if draw(st.booleans()):
            bundle.advance()
        if draw(st.integers(0, 7)) == 0:  # saved while it streams (an export): the run so far
            so_far = recorder.run
            assert canonical(dataclasses.asdict(Run.from_json(so_far.to_json()))) == \
                canonical(dataclasses.asdict(so_far))
    run = recorder.finish(draw(st.sampled_from(["finished", "aborted"])))
    first = run.to_json()
    whole = dataclasses.replace(run)  # the same record, without the bundle written while it grew
    return run, [first, run.to_json(), whole.to_json()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recorded())
def test_a_bundle_written_while_its_run_is_recorded_reads_back_as_the_run(case):
    run, written = case
    assert written[0] == written[1] == written[2]  # as it streamed, again, and whole: one text
    for text in written:
        again = Run.from_json(text)
        assert canonical(dataclasses.asdict(again)) == canonical(dataclasses.asdict(run))
        VALIDATOR.validate(json.loads(text))


def test_a_run_saved_after_it_was_recorded_writes_only_what_was_left_and_the_same_each_time():
    recorder = RunRecorder({"prompt": "p", "n": 2, "output_kind": "DELTA", "request_id": "run-1"}, [0, 1])
    run = recorder.run
    bundle = run.live_bundle = LiveBundle(run, write_every=1)
    for step in range(4):
        outputs = [EventOutput(i, f" w{step}{i}", [10 * step + i]) for i in range(2)]
        recorder.observe(Observation(Event(recorder.t0 + step, False, outputs),
                                     token_texts={i: [f" w{step}{i}"] for i in range(2)}))
        bundle.advance()
    recorder.finish()
    saved = bundle.to_json(run)
    assert saved is not None and run.to_json() == saved == run.to_json()  # kept once the run ended
    assert Run.from_json(saved).samples[1].text == " w01 w11 w21 w31"
    copied = copy.deepcopy(run)  # a copy is written whole, and alike
    assert copied.live_bundle is None and copied.to_json() == Run.from_json(saved).to_json()
    run.samples[0].token_ids = list(run.samples[0].token_ids)  # replaced, not grown: what it wrote may be stale
    assert bundle.to_json(run) is None and Run.from_json(run.to_json()) == run


def _delta_run(steps: int = 3, write_every: int = 1) -> Run:
    """A DELTA run of two samples grown by the recorder, two tokens per output, its bundle written as it grows."""
    recorder = RunRecorder({"prompt": "p", "n": 2, "output_kind": "DELTA", "request_id": "run-1"}, [0, 1])
    recorder.run.live_bundle = LiveBundle(recorder.run, write_every=write_every)
    for step in range(steps):
        outputs = [EventOutput(i, f" w{step}{i}", [10 * step + i, 100 + step]) for i in range(2)]
        recorder.observe(Observation(Event(recorder.t0 + step, False, outputs),
                                     token_texts={i: [f" w{step}{i}", ""] for i in range(2)}))
        recorder.run.live_bundle.advance()
    return recorder.finish()


def test_a_delta_output_is_held_as_the_span_of_its_samples_ids_and_reads_as_it_came():
    run = _delta_run()
    out = run.events[1].outputs[1]
    assert isinstance(out, SpanOutput) and out.span_of(run.samples[1]) == 2
    assert (out.index, out.text, out.token_ids, out.carried) == (1, " w11", [11, 101], 2)
    assert out == EventOutput(1, " w11", [11, 101])
    copied = copy.deepcopy(run)  # a copy's spans are over the copy's samples
    assert copied.events == run.events and copied.events[1].outputs[1].span_of(copied.samples[1]) == 2
    assert Run.from_json(run.to_json()).events == run.events
    out.token_ids = [7]  # set: it keeps the value itself from then on
    assert (out.token_ids, out.carried, out.span_of(run.samples[1])) == ([7], 1, None)
    assert run.samples[1].token_ids[2:4] == [11, 101]


def test_a_recorded_run_and_its_bundle_are_freed_with_their_last_reference_without_the_collector():
    """The run holds the bundle written while it was recorded. Were the bundle to hold the run, the
    two would wait for a full collection, which walks all their objects every time until then."""
    gc.disable()
    try:
        run = _delta_run()
        assert run.live_bundle is not None and run.live_bundle.run is run and run.to_json()
        gone = weakref.ref(run), weakref.ref(run.samples[0]), weakref.ref(run.live_bundle)
        del run
        assert all(ref() is None for ref in gone)
    finally:
        gc.enable()
