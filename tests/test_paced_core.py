"""The bench's paced engine core (``--paced-core``): vLLM's real front end fed a text's tokens at a
GPU's pace. It is a bench tool, never a stand-in for the engine in a test of sampling; these tests
check only that it keeps the contracts the front end and the playground rely on, so that what the
bench measures through it is the app's real work: a token per unfinished request per step, up to
``max_tokens``, the same tokens for the same child seed (native n and the wrapper alike), vLLM's
logprobs layout, aborts, and a run that says it was paced."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from playground.backends.embedded import EmbeddedBackend
from playground.backends.live import LiveRun
from playground.backends.paced_core import TEXT
from playground.bench.cpu import in_process, request_of
from playground.request import SampleRequest
from playground.run import Run
from tests.helpers import free_port, record_to_end


@pytest.fixture(scope="module")
def paced(backend):
    """After the session's engine: two AsyncLLMs being built at once register vLLM's metrics at once."""
    with EmbeddedBackend.start(None, max_n=16, paced_core=4000) as backend:  # no engine process, no weights
        yield backend


def request(mode: str, **options) -> SampleRequest:
    return SampleRequest(**{"prompt": "The sea", "n": 4, "seed": 11, "max_tokens": 12, "mode": mode,
                            "logprobs": 3, "output_kind": "DELTA", "use_chat_template": False, **options})


def test_native_n_and_the_wrapper_get_the_same_tokens_for_the_same_seeds(paced):
    native, wrapper = (record_to_end(paced, request(mode)) for mode in ("native", "wrapper"))
    for run in (native, wrapper):
        assert run.status == "finished" and [s.seed for s in run.samples] == [11, 12, 13, 14]
        assert all(len(s.token_ids) == 12 and s.finish_reason == "length" for s in run.samples)
        assert run.engine["paced_core_tokens_per_s"] == 4000  # a paced run says so in its bundle
    assert [s.token_ids for s in native.samples] == [s.token_ids for s in wrapper.samples]
    assert len({tuple(s.token_ids) for s in native.samples}) == 4  # each child its own seed
    # Each child reads the text on from a place of its own, as a model writes: whole characters.
    assert all(s.text and s.text in TEXT + TEXT for s in native.samples)
    again = record_to_end(paced, request("native"))
    assert [s.token_ids for s in again.samples] == [s.token_ids for s in native.samples]


def test_its_logprobs_are_laid_out_as_vllms_sampler_lays_them_out(paced):
    run = record_to_end(paced, request("native", n=2, max_tokens=30))
    for sample in run.samples:
        for position, token in enumerate(sample.logprobs):
            assert token.token_id == sample.token_ids[position]
            ids, top = [i for i, _, _ in token.top[:3]], [logprob for _, logprob, _ in token.top[:3]]
            assert top == sorted(top, reverse=True) and all(lp < 0 for lp in top) and len(set(ids)) == 3
            if token.rank <= 3:  # in the top-k: there, at its rank, with its logprob
                assert len(token.top) == 3 and ids[token.rank - 1] == token.token_id
                assert top[token.rank - 1] == token.logprob
            else:  # outside it: after it, as vLLM adds the sampled token
                assert token.token_id not in ids and token.logprob < top[-1]
    assert {t.rank for s in run.samples for t in s.logprobs} >= {1, 4}  # in the top-k and outside it


def test_a_stopped_run_is_aborted_in_the_core_and_the_bench_counts_every_token(paced):
    async def stop_after_tokens() -> Run:
        live = await LiveRun.plan(paced, request("wrapper", max_tokens=2000))
        async for run in live.follow(paced):
            if sum(len(s.token_ids) for s in run.samples) >= 8:
                return await live.stop_and_wait()

    run = asyncio.run(stop_after_tokens())
    assert run.status == "aborted" and all(0 < len(s.token_ids) < 2000 for s in run.samples)
    assert paced.host.engine.engine_core.requests == {}  # nothing left to pace
    rows = in_process(paced, n=4, tokens=5, logprobs=None)
    assert [(r["path"], r["tokens"]) for r in rows] == [("vllm", 20), ("wrapper", 20), ("record", 20)]
    assert all(r["app_cpu_s"] > r["source_cpu_s"] > 0 for r in rows)  # the source's own CPU, counted apart


def test_the_flag_is_a_rate_and_only_asyncllm_takes_it():
    from playground.backends.engine import create_sync_engine
    from playground.commands.cli import positive_float

    parse = positive_float("--paced-core")
    assert parse("10000") == 10000.0
    for bad in ("0", "-5", "fast", "inf"):
        with pytest.raises(argparse.ArgumentTypeError, match="--paced-core"):
            parse(bad)
    with pytest.raises(ValueError, match="--paced-core paces AsyncLLM"):
        create_sync_engine(None, paced_core=100.0)


def test_the_app_samples_on_a_paced_core(tmp_path):
    """``python app.py --paced-core`` (no engine process, no weights): ``/sample`` gets every
    token, and the bundle says where they came from."""
    import json

    from gradio_client import Client

    from playground.bench.browser import start_app, stop_app

    port = free_port()
    app, _ = start_app(port, tmp_path / "app.log", ["--paced-core", "2000", "--max-n", "8"])
    try:
        bundle = json.loads(Client(f"http://127.0.0.1:{port}/", verbose=False).predict(
            **request_of(4, 8, 5), api_name="/sample"))
    finally:
        stop_app(app)
    assert [len(s["token_ids"]) for s in bundle["samples"]] == [8] * 4
    assert bundle["engine"]["paced_core_tokens_per_s"] == 2000
