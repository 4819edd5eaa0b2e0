"""ParallelSampler against the real engine: the wrapper must keep vLLM's n > 1 contract."""

from __future__ import annotations

import asyncio
import functools
import time

import pytest
from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind

from playground.analysis import first_divergence
from playground.backends.outputs import observation_from_output
from playground.errors import InvalidRequest
from playground.sampling.async_sampler import ParallelSampler
from tests.conftest import LONG_PROMPT
from tests.helpers import assert_finishes_once_at_the_end, await_until, collect, final_token_ids

PROMPT = "Write a short poem about the sea:"
KINDS = ["CUMULATIVE", "DELTA", "FINAL_ONLY"]


def params(n=4, seed=7, kind="CUMULATIVE", max_tokens=16, **kw) -> SamplingParams:
    return SamplingParams(n=n, seed=seed, max_tokens=max_tokens, temperature=1.0,
                          output_kind=RequestOutputKind[kind], **kw)


def generate(host, prompt, sp, mode, request_id, **kw):
    sampler = ParallelSampler(host.engine)
    return host.run(collect(sampler.generate(prompt, sp, request_id, mode, **kw)))


async def wait_idle(engine, timeout=2.0) -> int:
    """The engine's unfinished requests once it went idle, or after ``timeout``."""
    await await_until(lambda: engine.get_num_unfinished_requests() == 0, timeout)
    return engine.get_num_unfinished_requests()


@pytest.fixture(scope="module")
def sampled(host):
    """Each (mode, kind, n) sampled once (8 tokens, seed 7), one after the other on the otherwise
    idle engine, so wrapper and native meet the same conditions; shared by the tests below."""
    @functools.cache
    def get(mode: str, kind: str, n: int) -> list:
        return generate(host, PROMPT, params(n, kind=kind, max_tokens=8), mode, f"eq-{mode}-{kind}-{n}")

    return get


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 4])  # no fan-out; the structure tests' n (a batch of four seeds)
def test_wrapper_matches_native_token_for_token(sampled, kind, n):
    expected = final_token_ids(sampled("native", kind, n), kind)
    got = final_token_ids(sampled("wrapper", kind, n), kind)
    assert sorted(got) == list(range(n))
    for i in range(n):
        assert got[i] == expected[i], f"sample {i} diverged at token {first_divergence(got[i], expected[i])}"


@pytest.mark.parametrize("mode", ["wrapper", "native"])
@pytest.mark.parametrize("kind", KINDS)
def test_output_kind_structure(sampled, mode, kind):
    n = 4
    events = sampled(mode, kind, n)

    assert_finishes_once_at_the_end(events, n)

    (final,) = sampled("native", "FINAL_ONLY", n)  # vLLM's own final result of the same request
    if kind == "FINAL_ONLY":
        assert len(events) == 1
        assert [o.index for o in events[0].outputs] == list(range(n))
    else:
        assert len(events) > 1
    texts: dict[int, str] = {}
    for event in events:
        for out in event.outputs:
            texts[out.index] = texts.get(out.index, "") + out.text if kind == "DELTA" else out.text
    assert final_token_ids(events, kind) == {o.index: o.token_ids for o in final.outputs}
    assert texts == {o.index: o.text for o in final.outputs}


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_stopping_the_consumer_aborts_every_child(host, how):
    sampler = ParallelSampler(host.engine)

    async def scenario():
        generator = sampler.generate(PROMPT, params(8, kind="DELTA", max_tokens=1000, ignore_eos=True),
                                     f"abort-{how}", "wrapper")
        if how == "aclose":
            await generator.__anext__()
            await generator.__anext__()
            assert host.engine.get_num_unfinished_requests() == 8
            await generator.aclose()
        else:
            received = []

            async def consume():
                async for output in generator:
                    received.append(output)

            task = asyncio.create_task(consume())
            assert await await_until(lambda: len(received) >= 2, timeout=120), "the run never streamed"
            assert host.engine.get_num_unfinished_requests() == 8
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return await wait_idle(host.engine)

    assert host.run(scenario()) == 0


@pytest.mark.parametrize("mode", ["wrapper", "native"])
def test_a_request_the_engine_core_cannot_take_leaves_no_request_behind(host, mode):
    """A top_k past 64 bits passes vLLM's SamplingParams but not its encoder: add_request fails
    after vLLM has registered the request, which it then counts unfinished for good unless it is
    aborted (the page refuses such a top_k before; this is the sampler's own guard)."""
    sampler = ParallelSampler(host.engine)

    async def scenario():
        with pytest.raises(OverflowError):
            await collect(sampler.generate(PROMPT, params(2, top_k=2**70), f"unsendable-{mode}", mode))
        return await wait_idle(host.engine)

    assert host.run(scenario()) == 0
    assert len(generate(host, PROMPT, params(2, max_tokens=4), mode, f"after-{mode}")) >= 1  # and it samples on


def test_same_seed_mode_gives_identical_samples(host):
    events = generate(host, PROMPT, params(4, kind="FINAL_ONLY"), "same-seed", "same-seed")
    samples = [o.token_ids for o in events[0].outputs]
    assert all(s == samples[0] for s in samples)
    seeded = generate(host, PROMPT, params(4, kind="FINAL_ONLY"), "wrapper", "distinct")
    assert len({tuple(o.token_ids) for o in seeded[0].outputs}) > 1


def test_unseeded_samples_differ_and_n1_works(host):
    events = generate(host, PROMPT, params(4, seed=None, kind="FINAL_ONLY"), "wrapper", "unseeded")
    assert len({tuple(o.token_ids) for o in events[0].outputs}) > 1
    single = generate(host, PROMPT, params(1, kind="FINAL_ONLY"), "wrapper", "single")
    assert len(single) == 1 and single[0].outputs[0].index == 0 and single[0].outputs[0].token_ids


def test_children_after_the_first_read_the_prompt_from_the_prefix_cache(host):
    cached: dict[int, int] = {}
    unique_prompt = f"[{time.time_ns()}] " + LONG_PROMPT  # not cached by an earlier test
    generate(host, unique_prompt, params(4, kind="FINAL_ONLY", max_tokens=4), "wrapper", "cache",
             on_child=lambda i, out: cached.setdefault(i, out.num_cached_tokens))
    prompt_tokens = len(host.engine.tokenizer.encode(unique_prompt))
    block = host.engine.vllm_config.cache_config.block_size
    aligned = prompt_tokens // block * block
    assert aligned >= block
    assert cached[0] == 0
    for i in (1, 2, 3):
        assert cached[i] >= 0.9 * aligned, f"child {i} read {cached[i]} of {aligned} cacheable tokens"


def test_a_stop_string_ends_only_the_child_that_produced_it(host):
    sp = dict(kind="FINAL_ONLY", max_tokens=24, ignore_eos=True)
    free = generate(host, PROMPT, params(6, **sp), "wrapper", "free")
    texts = [o.text for o in free[0].outputs]
    # A word that one sample writes (after its start) and at least three others do not.
    k, stop = next((k, w) for k, t in enumerate(texts) for w in t.split()[1:]
                   if len(w) > 3 and sum(w in other for other in texts) <= 3)
    stopped = generate(host, PROMPT, params(6, stop=[stop], **sp), "wrapper", "stopped")
    outputs = stopped[0].outputs
    reasons = [o.finish_reason for o in outputs]
    # Sample k (and any other that writes the word first) stops; under the same seeds the
    # samples ran in the same batch up to that point, so k still writes it.
    assert reasons[k] == "stop" and outputs[k].stop_reason == stop
    assert all(o.stop_reason == stop for o in outputs if o.finish_reason == "stop")
    assert "length" in reasons, "a stop string must not end the other children"
    for o in outputs:
        assert stop not in o.text
        if o.finish_reason == "length":
            assert len(o.token_ids) == 24


@pytest.mark.parametrize("bad, message", [
    (dict(n=257), "n must be between 1 and 256"),
    (dict(max_tokens=4000), "max_tokens=4000 is too big"),
])
def test_validation_happens_before_the_engine(host, bad, message):
    sampler = ParallelSampler(host.engine)
    sp = params(**{"n": 2, **bad})

    async def scenario():
        with pytest.raises(InvalidRequest, match=message):
            await collect(sampler.generate(PROMPT, sp, "bad", "wrapper"))
        return host.engine.get_num_unfinished_requests()

    assert host.run(scenario()) == 0


def test_greedy_with_n_above_one_and_empty_prompt_are_rejected(host):
    sampler = ParallelSampler(host.engine)
    greedy = SamplingParams(n=1, temperature=0.0, max_tokens=4)
    greedy.n = 2  # SamplingParams itself refuses n=2 at temperature 0; a mutated one must not slip by

    async def scenario():
        with pytest.raises(InvalidRequest, match="greedy"):
            await collect(sampler.generate(PROMPT, greedy, "greedy", "wrapper"))
        with pytest.raises(InvalidRequest, match="empty"):
            await collect(sampler.generate("", params(2), "empty", "wrapper"))

    host.run(scenario())


def test_abort_by_parent_id_ends_those_streams_with_their_partial_samples(host):
    """vLLM's test_multi_abort (tests/v1/engine/test_async_llm.py), ported: parents aborted by the
    ids given to generate() end their streams normally, their samples marked "abort" with the tokens
    they had; a parent that was not aborted finishes in full; nothing stays unfinished. Every mode."""
    sampler = ParallelSampler(host.engine)
    aborted = {f"multi-{mode}": mode for mode in ("wrapper", "native", "same-seed")}
    long = params(3, kind="DELTA", max_tokens=1000, ignore_eos=True)

    async def scenario():
        results: dict[str, list] = {rid: [] for rid in [*aborted, "kept"]}

        async def consume(rid, generator):
            async for output in generator:
                results[rid].append(observation_from_output(output, 0.0).event)

        kept = params(3, kind="DELTA", max_tokens=6, ignore_eos=True)
        tasks = [asyncio.create_task(consume(rid, sampler.generate(PROMPT, long, rid, mode)))
                 for rid, mode in aborted.items()]
        tasks.append(asyncio.create_task(consume("kept", sampler.generate(PROMPT, kept, "kept", "wrapper"))))
        # Every aborted parent has made tokens before the abort.
        assert await await_until(lambda: all(len(results[rid]) >= 2 for rid in aborted), timeout=120)
        await sampler.abort(list(aborted) + ["no-such-parent"])
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        return results, await wait_idle(host.engine)

    results, unfinished = host.run(scenario())
    assert unfinished == 0
    for rid in aborted:
        events = results[rid]
        assert_finishes_once_at_the_end(events, 3)
        reasons = {o.index: o.finish_reason for e in events for o in e.outputs if o.finish_reason}
        assert reasons == {0: "abort", 1: "abort", 2: "abort"}, f"{rid}: {reasons}"
        tokens = final_token_ids(events, "DELTA")
        assert all(0 < len(ids) < 1000 for ids in tokens.values()), f"{rid}: partial samples expected"
    kept = final_token_ids(results["kept"], "DELTA")
    assert sorted(kept) == [0, 1, 2] and {len(ids) for ids in kept.values()} == {6}
