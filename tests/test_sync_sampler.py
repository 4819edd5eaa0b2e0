"""SyncParallelSampler and SyncRunner over a real LLMEngine: the same n > 1 contract as the async
wrapper, and the same Run record."""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict

import pytest
from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind

from playground.analysis import first_divergence
from playground.backends.outputs import observation_from_output
from playground.backends.sync import SyncRunner
from playground.errors import InvalidRequest
from playground.request import SampleRequest
from playground.run import Event
from playground.sampling.sync_sampler import SyncParallelSampler
from tests.helpers import assert_finishes_once_at_the_end, final_token_ids, record_to_end, taken_alike

PROMPT = "Write a short poem about the sea:"
KINDS = ["CUMULATIVE", "DELTA", "FINAL_ONLY"]
NS = [1, 3]  # no fan-out; a batch of three seeds


def params(n=3, seed=7, kind="CUMULATIVE", max_tokens=8, **kw) -> SamplingParams:
    return SamplingParams(n=n, seed=seed, max_tokens=max_tokens, temperature=1.0,
                          output_kind=RequestOutputKind[kind], **kw)


def drain(sampler: SyncParallelSampler) -> dict[str, list[Event]]:
    """Step until no parent is left; every parent's outputs, copied as they arrive (CUMULATIVE
    token lists are live). Each step must hold at most one output per parent."""
    events: dict[str, list[Event]] = defaultdict(list)
    while sampler.has_unfinished_requests():
        outputs = sampler.step()
        ids = [o.request_id for o in outputs]
        assert len(ids) == len(set(ids)), f"a step returned several outputs for one parent: {ids}"
        for output in outputs:
            events[output.request_id].append(observation_from_output(output, 0.0).event)
    return events


def assert_same_tokens(got: dict[int, list[int]], expected: dict[int, list[int]], what: str) -> None:
    assert sorted(got) == sorted(expected), f"{what}: indices {sorted(got)} != {sorted(expected)}"
    for i in expected:
        assert got[i] == expected[i], (
            f"{what}: sample {i} diverged at token {first_divergence(got[i], expected[i])} "
            f"({got[i]} vs {expected[i]})"
        )


@pytest.fixture(scope="module")
def sampler(sync_engine):
    return SyncParallelSampler(sync_engine)


@pytest.fixture(scope="module")
def sampled(sampler):
    """Each (mode, kind, n) sampled once, alone on the idle engine; shared by the tests below."""
    @functools.cache
    def get(mode: str, kind: str, n: int) -> list[Event]:
        request_id = f"{mode}-{kind}-{n}"
        sampler.add_request(request_id, PROMPT, params(n, kind=kind), mode)
        return drain(sampler)[request_id]

    return get


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", NS)
def test_wrapper_matches_native_token_for_token(sampled, kind, n):
    native = final_token_ids(sampled("native", kind, n), kind)
    wrapper = final_token_ids(sampled("wrapper", kind, n), kind)
    assert_same_tokens(wrapper, native, f"{kind} n={n}")


@pytest.mark.parametrize("mode", ["wrapper", "native"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", NS)
def test_output_kind_structure(sampled, mode, kind, n):
    events = sampled(mode, kind, n)

    assert_finishes_once_at_the_end(events, n)

    if kind == "FINAL_ONLY":
        assert len(events) == 1
        assert [o.index for o in events[0].outputs] == list(range(n))
    else:
        assert len(events) > 1
    # DELTA pieces concatenate to, and the last CUMULATIVE value per index is, vLLM's final result.
    (reference,) = sampled("native", "FINAL_ONLY", n)
    texts: dict[int, str] = {}
    for event in events:
        for out in event.outputs:
            texts[out.index] = texts.get(out.index, "") + out.text if kind == "DELTA" else out.text
    assert_same_tokens(final_token_ids(events, kind), {o.index: o.token_ids for o in reference.outputs},
                       f"{mode} {kind} vs native FINAL_ONLY")
    assert texts == {o.index: o.text for o in reference.outputs}


def test_parents_are_counted_and_merged_per_step(sampler, sync_engine):
    # Two parents at once, one per mode: step() answers per parent, never per child.
    sampler.add_request("two-wrapper", PROMPT, params(3, kind="DELTA"), "wrapper")
    sampler.add_request("two-native", PROMPT, params(3, kind="DELTA"), "native")
    assert sampler.get_num_unfinished_requests() == 2
    assert sync_engine.get_num_unfinished_requests() == 6  # the engine counts children
    events = drain(sampler)  # asserts one output per parent per step
    assert set(events) == {"two-wrapper", "two-native"}
    for request_id, parent_events in events.items():
        assert [e.finished for e in parent_events][-1] is True
        assert sum(e.finished for e in parent_events) == 1, request_id
        assert sorted(final_token_ids(parent_events, "DELTA")) == [0, 1, 2]
    assert sync_engine.get_num_unfinished_requests() == 0


@pytest.mark.parametrize("mode", ["wrapper", "native"])
def test_abort_by_parent_id_ends_the_parent_with_its_partial_samples(sampler, sync_engine, mode):
    """As AsyncLLM.abort does: every child leaves the engine at once, and the parent's stream ends
    with one last output, finished, the samples marked "abort" with the tokens they had."""
    sampler.add_request(f"abort-{mode}", PROMPT, params(4, kind="DELTA", max_tokens=1000, ignore_eos=True), mode)
    sampler.add_request(f"other-{mode}", PROMPT, params(2, kind="DELTA", max_tokens=6), mode)
    events: dict[str, list[Event]] = defaultdict(list)
    while len(events[f"abort-{mode}"]) < 3:
        for output in sampler.step():
            events[output.request_id].append(observation_from_output(output, 0.0).event)
    assert sync_engine.get_num_unfinished_requests() >= 4, "the engine counts the aborted parent's children"
    sampler.abort([f"abort-{mode}", "no-such-parent"])
    last = sampler.step()
    assert [o.request_id for o in last] == [f"abort-{mode}"] and last[0].finished
    assert sorted(c.index for c in last[0].outputs) == [0, 1, 2, 3]
    assert {c.finish_reason for c in last[0].outputs} == {"abort"}
    seen = final_token_ids(events[f"abort-{mode}"], "DELTA")
    assert sorted(seen) == [0, 1, 2, 3] and all(seen.values()), "the partial samples keep the tokens they had"
    rest = drain(sampler)  # the other parent is untouched and finishes in full
    other = final_token_ids(events[f"other-{mode}"] + rest[f"other-{mode}"], "DELTA")
    assert sorted(other) == [0, 1] and {len(ids) for ids in other.values()} == {6}
    assert sync_engine.get_num_unfinished_requests() == 0 and not sampler.has_unfinished_requests()


@pytest.mark.parametrize("mode", ["wrapper", "native"])
def test_a_cumulative_abort_ends_each_sample_with_everything_it_had(sampler, sync_engine, mode):
    """CUMULATIVE, as AsyncLLM's abort: each aborted sample's last output holds all its text and
    tokens so far, as its last output before the abort did (a DELTA one holds none: those went out)."""
    request_id = f"abort-cumulative-{mode}"
    sampler.add_request(request_id, PROMPT, params(3, kind="CUMULATIVE", max_tokens=1000, ignore_eos=True), mode)
    events: list[Event] = []
    while len(events) < 3:
        events += [observation_from_output(output, 0.0).event for output in sampler.step()]
    had = {}  # index -> (text, token ids) of its last output, copied as it arrived
    for event in events:
        for out in event.outputs:
            had[out.index] = (out.text, out.token_ids)
    assert sorted(had) == [0, 1, 2] and all(text and ids for text, ids in had.values())
    sampler.abort(request_id)
    (last,) = sampler.step()
    assert last.request_id == request_id and last.finished
    assert {c.index: (c.text, list(c.token_ids)) for c in last.outputs} == had
    assert {c.finish_reason for c in last.outputs} == {"abort"}
    assert sync_engine.get_num_unfinished_requests() == 0 and not sampler.has_unfinished_requests()


def test_same_seed_mode_and_unseeded_samples(sampler):
    sampler.add_request("same", PROMPT, params(3, kind="FINAL_ONLY"), "same-seed")
    sampler.add_request("unseeded", PROMPT, params(3, seed=None, kind="FINAL_ONLY"), "wrapper")
    events = drain(sampler)
    same = [o.token_ids for o in events["same"][0].outputs]
    assert all(s == same[0] for s in same), "same-seed mode must reproduce the identical-samples bug"
    assert len({tuple(o.token_ids) for o in events["unseeded"][0].outputs}) > 1


def test_validation_happens_before_the_engine(sampler, sync_engine):
    with pytest.raises(InvalidRequest, match="n must be between 1 and 256"):
        sampler.add_request("too-many", PROMPT, params(257), "wrapper")
    with pytest.raises(InvalidRequest, match="empty"):
        sampler.add_request("empty", "", params(2), "wrapper")
    assert sync_engine.get_num_unfinished_requests() == 0
    sampler.add_request("twice", PROMPT, params(2, max_tokens=2), "wrapper")
    with pytest.raises(InvalidRequest, match="already in use"):
        sampler.add_request("twice", PROMPT, params(2, max_tokens=2), "native")
    drain(sampler)
    for mode in ("wrapper", "native"):  # a top_k past 64 bits fails in vLLM's encoder, after it registered it
        with pytest.raises(OverflowError):
            sampler.add_request(f"unsendable-{mode}", PROMPT, params(2, top_k=2**70), mode)
        assert sync_engine.get_num_unfinished_requests() == 0, f"{mode}: the request vLLM kept was not aborted"


@pytest.fixture(scope="module")
def runner(sync_engine):
    return SyncRunner(sync_engine)


def test_record_gives_the_same_run_record_for_both_modes(runner, sync_engine):
    request = SampleRequest(prompt=PROMPT, n=3, seed=5, max_tokens=8, output_kind="CUMULATIVE", logprobs=2)
    pair = taken_alike(lambda: tuple(runner.record(dataclasses.replace(request, mode=mode))
                                     for mode in ("wrapper", "native")))
    runs = dict(zip(("wrapper", "native"), pair))
    assert sync_engine.get_num_unfinished_requests() == 0
    tokens = {mode: {s.index: s.token_ids for s in run.samples} for mode, run in runs.items()}
    assert_same_tokens(tokens["wrapper"], tokens["native"], "record(): wrapper vs native")
    for mode, run in runs.items():
        assert run.status == "finished" and run.request["mode"] == mode
        assert [s.seed for s in run.samples] == [5, 6, 7]
        assert run.events and run.events[-1].finished
        for s in run.samples:
            assert s.finish_reason is not None and 0 < len(s.token_ids) <= 8
            assert len(s.token_times) == len(s.token_texts) == len(s.logprobs) == len(s.token_ids)
            assert s.num_cached_tokens is not None  # every child's own, through on_child
        assert run.engine["front_end"] == "LLMEngine"
        assert type(run).from_json(run.to_json()).to_dict() == run.to_dict()


def test_sync_and_async_wrappers_give_the_same_tokens(runner, backend):
    """One request, alone on each idle engine (same model, same defaults): the same tokens, or the
    first diverging token is reported. Batch composition could differ between engines, so a
    failure here is a finding to read, not proof of a bug."""
    request = SampleRequest(prompt=PROMPT, n=3, seed=11, max_tokens=12, output_kind="DELTA")
    async_run = record_to_end(backend, dataclasses.replace(request))
    sync_run = runner.record(dataclasses.replace(request))
    assert async_run.status == sync_run.status == "finished"
    assert_same_tokens({s.index: s.token_ids for s in sync_run.samples},
                       {s.index: s.token_ids for s in async_run.samples}, "sync vs async wrapper")
    assert [s.text for s in sync_run.samples] == [s.text for s in async_run.samples]
    # The same record: the same request header (but its id) and the same sample seeds.
    header = {k: v for k, v in sync_run.request.items() if k != "request_id"}
    assert header == {k: v for k, v in async_run.request.items() if k != "request_id"}
    assert [s.seed for s in sync_run.samples] == [s.seed for s in async_run.samples] == [11, 12, 13]


def test_an_engine_core_marked_dead_reaches_the_step_that_waits_for_its_output():
    """Fake client, on purpose: the ordering this covers cannot be made to happen on demand with a
    real engine. When vLLM's monitor sees the engine core die it marks it dead and shuts the output
    thread down; if that comes before the output thread queues an error, a step waits for an output
    for good. The runner's watch puts the death in the queue the step waits on, once; stopped with
    the runner, it puts nothing."""
    import queue
    import threading
    from types import SimpleNamespace

    from vllm.v1.engine.exceptions import EngineDeadError

    from playground.backends.sync import _watch_core
    from tests.helpers import wait_until

    client = SimpleNamespace(resources=SimpleNamespace(engine_dead=False), outputs_queue=queue.Queue())
    stopped = threading.Event()
    _watch_core(SimpleNamespace(engine_core=client), stopped, every=0.01)
    client.resources.engine_dead = True
    assert isinstance(client.outputs_queue.get(timeout=5), EngineDeadError)
    assert not wait_until(lambda: not client.outputs_queue.empty(), 0.2), "said once"

    quiet = SimpleNamespace(resources=SimpleNamespace(engine_dead=False), outputs_queue=queue.Queue())
    ended = threading.Event()
    _watch_core(SimpleNamespace(engine_core=quiet), ended, every=0.01)
    ended.set()  # the runner shut down: its engine core exits as asked, and nobody waits
    assert wait_until(lambda: not any(t.name == "playground-engine-core-watch" and t.is_alive()
                                      for t in threading.enumerate()), 2)
    quiet.resources.engine_dead = True
    assert quiet.outputs_queue.empty()
    _watch_core(SimpleNamespace(), stopped)  # an engine in this process has no such client: no watch
