"""Why two records may differ, the per-child phases, and bundle versions: engine-free, on small
hand-made runs."""

from __future__ import annotations

import json

import pytest

from playground import analysis as A
from playground import bundle_format
from playground.errors import InvalidBundle
from playground.run import BUNDLE_VERSION, Event, EventOutput, Run, Sample

CONDITIONS = {"dtype": "float32", "vllm_version": "0.32.0", "device": "CPU", "max_num_seqs": 256,
              "environment": {"VLLM_CPU_OMP_THREADS_BIND": "auto", "VLLM_BATCH_INVARIANT": None}}


def run(n=2, mode="wrapper", counts=(1, 0), conditions=CONDITIONS, **request) -> Run:
    """n samples that finish one per event, with the engine's request count as each event arrived
    (the children that finished in it have left the engine by then)."""
    samples = [Sample(index=i, seed=5 + i, token_ids=[1, 2], token_times=[0.1, 0.2]) for i in range(n)]
    events = [Event(t=0.1 * (k + 1), finished=k == n - 1, outputs=[EventOutput(k, "x", [1, 2], "length")],
                    engine_requests=count) for k, count in zip(range(n), counts)]
    req = {"request_id": "run-1", "n": n, "mode": mode, "seed": 5, "prompt_token_ids": [7, 8],
           "temperature": 1.0, **request}
    return Run(request=req, samples=samples, events=events, engine={"conditions": dict(conditions)},
               status="finished")


def test_a_run_alone_has_no_other_requests_and_a_crowded_one_says_how_many():
    assert A.other_requests(run(counts=(1, 0))) == 0, "1 unfinished, then none: only its own children"
    assert A.other_requests(run(counts=(4, 3))) == 3
    assert A.other_requests(run(counts=(None, None))) is None


def test_why_different_names_each_condition_that_changed():
    same = A.why_different(run(), run())
    assert same == []
    other_engine = run(conditions={**CONDITIONS, "dtype": "bfloat16",
                                   "environment": {**CONDITIONS["environment"], "VLLM_CPU_OMP_THREADS_BIND": "0-1"}})
    reasons = A.why_different(run(), other_engine)
    assert reasons == ["the engine differed: dtype: 'float32' vs 'bfloat16'; VLLM_CPU_OMP_THREADS_BIND='auto' vs '0-1'"]
    replay = run(n=1, counts=(0,))
    crowded = run(counts=(5, 4))
    reasons = A.why_different(crowded, replay)
    assert reasons == ["the batch differed: 2 vs 1 samples shared a batch; other requests were in flight on the "
                       "engine (up to 4 beside the first run, 0 beside the second)"]
    assert "sampler settings differed: temperature 1.0 vs 0.7" in A.why_different(run(), run(temperature=0.7))
    assert "the children were added by the wrapper's fan-out vs vLLM's own fan-out" in \
        A.why_different(run(), run(mode="native"))[0]
    unknown = A.why_different(run(), run(conditions={}))
    assert unknown[0].startswith("the engine's conditions were not recorded for both runs")


def test_children_the_engine_took_in_different_steps_are_named():
    """vLLM's per-request stats say when the engine first scheduled each child: children that
    came in one step apart ran in other batches than children that came together."""
    def stepped(*stamps) -> Run:
        r = run(n=len(stamps), counts=tuple(range(len(stamps) - 1, -1, -1)))  # alone on the engine
        for sample, t in zip(r.samples, stamps):
            sample.metrics = {"scheduled_ts": t, "first_token_ts": t + 0.5}
        return r

    apart, together = stepped(10.0, 12.0, 12.0), stepped(20.0, 20.0, 20.0)
    assert A.admission(apart) == [[0], [1, 2]] and A.admission(together) == [[0, 1, 2]]
    assert A.why_different(apart, together) == [
        "the batch differed: the engine took the children in different steps ([0] then [1, 2] in the first run, "
        "all 3 at once in the second): a run's children reach the engine one by one, in vLLM's own fan-out as "
        "in the wrapper's, and a step may start before the last has arrived"]
    assert A.why_different(together, stepped(30.0, 30.0, 30.0)) == []  # the same steps: nothing to name
    alone = A.why_different(together, stepped(40.0))  # one sample run again alone: its steps follow from n
    assert alone == ["the batch differed: 3 vs 1 samples shared a batch"], alone
    assert A.admission(run()) is None  # no stats: nothing is claimed


def test_phases_and_the_child_timeline():
    r = run()
    r.samples[0].queued_at, r.samples[0].queued_s, r.samples[0].prefill_s, r.samples[0].decode_s = 0.01, 0.02, 0.03, 0.1
    frame = A.phases_frame(r)
    row = frame.iloc[0]
    assert (row.scheduled_at, row.first_token_at) == pytest.approx((0.03, 0.06))
    assert row.last_token_at == pytest.approx(0.16)
    assert frame.iloc[1].isna()["queued_at"], "a child the engine did not report stays empty"
    figure = A.child_timeline_figure(r)
    # In milliseconds, the axis of the token arrivals.
    assert list(figure.data[0].base)[0] == pytest.approx(10) and list(figure.data[2].x)[0] == pytest.approx(100)
    remote = run()
    assert "not known on this backend" in A.child_timeline_figure(remote).layout.annotations[0].text


def test_bundles_say_what_is_wrong_with_them():
    good = run().to_dict()
    assert good["bundle_version"] == BUNDLE_VERSION
    assert Run.from_dict(good) == run()
    old = bundle_format.decode(run().to_dict())  # version 1: the record as plain data, no bundle_version
    assert Run.from_dict(old) == run()
    with pytest.raises(InvalidBundle, match=f"has version {BUNDLE_VERSION + 1}, newer than this playground reads"):
        Run.from_dict({**good, "bundle_version": BUNDLE_VERSION + 1})
    with pytest.raises(InvalidBundle, match="this is not a run bundle"):
        Run.from_json(json.dumps({"prompt": "hello"}))
    with pytest.raises(InvalidBundle, match="not valid JSON"):
        Run.from_json("{nope")
    with pytest.raises(InvalidBundle, match="damaged"):
        Run.from_dict({**good, "samples": [{"index": 0, "seed": 1, "colour": "red"}]})


def test_a_replay_that_parts_names_the_two_tokens_where_it_parts():
    from playground.ui.repro_tab import as_text, parted_at

    run_sample = Sample(index=0, seed=1, token_ids=[5, 6, 7], token_texts=["The", " sea", " is"])
    replayed = Sample(index=0, seed=1, token_ids=[5, 8, 7], token_texts=["The", " ocean", " is"])
    assert parted_at(run_sample, replayed) == ": <code>·sea</code> in the run, <code>·ocean</code> in the rerun"
    starred = Sample(index=0, seed=1, token_ids=[5, 9, 7], token_texts=["The", " **", " is"])
    quoted = Sample(index=0, seed=1, token_ids=[5, 10, 7], token_texts=["The", " `x`", " is"])
    assert parted_at(starred, quoted) == ": <code>·**</code> in the run, <code>·\\`x\\`</code> in the rerun"
    assert parted_at(run_sample, replayed, as_text) == ": ‘·sea’ in the run, ‘·ocean’ in the rerun"  # a table's cell
    assert parted_at(run_sample, run_sample) == ""  # the same: nothing to name
    assert parted_at(run_sample, Sample(index=0, seed=1, token_ids=[5, 6])) == ""  # a prefix: no token at 2
    assert parted_at(run_sample, Sample(index=0, seed=1, token_ids=[5, 9])) == ""  # no text known for 9
