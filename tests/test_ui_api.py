"""The /sample API through gradio_client, against the launched app and the real engine."""

from __future__ import annotations

import asyncio
import json
import time

from playground.backends.live import LiveRun
from playground.request import SampleRequest
from playground.run import Run

PROMPT = "Once upon a time, in a village at the edge of the sea,"


def wait_for_idle(backend, host, timeout=2.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        unfinished = host.run(backend.num_unfinished())
        if unfinished == 0 or time.monotonic() > deadline:
            return unfinished
        time.sleep(0.02)


def test_sample_streams_updates_then_returns_the_bundle(client):
    job = client.submit(prompt=PROMPT, n=4, seed=11, output_kind="DELTA", max_tokens=24, api_name="/sample")
    values = list(job)
    final = Run.from_json(job.result())
    progress = [json.loads(v) for v in values[:-1]]
    assert any(p["status"] == "running" and any(s["num_tokens"] for s in p["samples"]) for p in progress), \
        "no streamed update carried tokens before the end"
    # Each snapshot carries only what is new: followed to the end, they add up to the whole samples.
    texts, ids, reasons = {}, {}, {}
    for snapshot in progress:
        for s in snapshot["samples"]:
            texts[s["index"]] = texts.get(s["index"], "") + s["new_text"]
            ids[s["index"]] = ids.get(s["index"], []) + s["new_token_ids"]
            reasons[s["index"]] = s["finish_reason"]
            assert len(ids[s["index"]]) == s["num_tokens"]
    for s in final.samples:
        assert ids[s.index] == s.token_ids and texts[s.index] == "".join(s.token_texts)
        assert reasons[s.index] == s.finish_reason
    assert final.status == "finished" and final.n == 4
    assert [s.seed for s in final.samples] == [11, 12, 13, 14]
    assert all(s.token_ids and s.finish_reason for s in final.samples)
    assert final.events and final.events[-1].finished


def test_same_seed_twice_gives_identical_token_ids(client):
    kwargs = dict(prompt=PROMPT, n=3, seed=5, output_kind="FINAL_ONLY", max_tokens=16, api_name="/sample")
    first = Run.from_json(client.predict(**kwargs))
    second = Run.from_json(client.predict(**kwargs))
    assert [s.token_ids for s in first.samples] == [s.token_ids for s in second.samples]


def test_cancelling_the_job_aborts_every_child(client, backend, host):
    job = client.submit(prompt=PROMPT, n=8, seed=3, output_kind="DELTA", max_tokens=1500, ignore_eos=True,
                        api_name="/sample")
    deadline = time.monotonic() + 120
    while host.run(backend.num_unfinished()) < 8:
        assert time.monotonic() < deadline and not job.done(), "the run never started"
        time.sleep(0.05)
    job.cancel()
    assert wait_for_idle(backend, host) == 0


def test_n256_on_the_default_engine_gives_256_samples_with_consecutive_seeds(client, backend):
    """The app's default --max-n on the default CPU engine: one request of 256 samples runs in one
    batch (the engine plan sizes max_num_seqs and the KV cache for it) and every sample comes back
    with its own seed."""
    assert backend.limits.max_n == 256
    # two tokens each: one from its prefill, one from a decode step (the batch has room for all 256)
    run = Run.from_json(client.predict(prompt=PROMPT, n=256, seed=1000, max_tokens=2, output_kind="FINAL_ONLY",
                                       use_chat_template=False, api_name="/sample"))
    assert run.status == "finished" and run.n == 256
    assert [s.seed for s in run.samples] == list(range(1000, 1256))
    assert all(s.token_ids and s.finish_reason for s in run.samples)
    assert run.engine["max_num_seqs"] >= 256


def test_the_status_line_says_what_the_children_read_from_the_prefix_cache():
    from playground.run import Sample
    from playground.ui.views import engine_status

    def run(prompt_tokens: int, cached: list[int | None]) -> Run:
        return Run(request={"num_prompt_tokens": prompt_tokens}, samples=[
            Sample(index=i, seed=i, num_cached_tokens=c) for i, c in enumerate(cached)])

    info = {"model": "/cache/SmolLM2", "device": "CPU", "vllm_version": "0.32.0", "block_size": 128}
    assert "shared no prefill" in engine_status(info, run(30, [0, 0, 0]))
    assert "children 1..n-1 read 256–256 of 300 prompt tokens" in engine_status(info, run(300, [0, 256, 256]))
    assert "not reported" in engine_status(info, run(300, [None, None]))
    assert "the run on screen" not in engine_status(info, run(300, [0]))  # n=1: nothing to share


def test_a_reader_that_wants_the_run_every_so_often_is_not_woken_by_every_output(backend):
    """/sample's follower (``every``): each Run it is handed comes at least ``every`` seconds after
    the one before while the run streams, and the end comes with the engine's last output."""
    every = 0.4

    async def follow():
        request = SampleRequest(prompt=PROMPT, n=4, seed=5, max_tokens=64, ignore_eos=True, output_kind="DELTA",
                                use_chat_template=False)
        live = await LiveRun.plan(backend, request)
        seen = []
        async for run in live.follow(backend, every=every):
            seen.append((time.monotonic(), len(run.events), run.finished))
        return live, seen

    live, seen = asyncio.run(follow())
    assert live.run.finished and seen[-1][2] and seen[-1][1] == len(live.run.events)
    streaming = [at for at, events, finished in seen if events and not finished]
    assert len(streaming) >= 2, "the run streamed for less than two intervals: nothing was shown"
    assert all(b - a >= every * 0.95 for a, b in zip(streaming, streaming[1:]))
    assert len(live.run.events) > 2 * len(seen)  # outputs came faster than it was woken
