"""Hardening through the real app: bad input, fuzzing, concurrency, auth, and a dying engine."""

from __future__ import annotations

import threading

import pytest
from gradio_client import Client
from gradio_client.exceptions import AuthenticationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.run import Run
from tests.helpers import assert_refused_clearly, free_port, wait_until

PROMPT = "The lighthouse keeper opened his logbook and wrote"
VALID = dict(prompt=PROMPT, n=2, seed=1, max_tokens=3, output_kind="FINAL_ONLY", api_name="/sample")


def assert_valid_request_works(client) -> Run:
    run = Run.from_json(client.predict(**VALID))
    assert run.status == "finished" and run.n == 2 and all(s.token_ids for s in run.samples)
    return run


BAD_INPUT = [
    (dict(prompt=""), "the prompt is empty"),
    (dict(prompt="  \n\t "), "the prompt is empty"),
    (dict(prompt="word " * 3000), "longer than the context of 2048 tokens"),
    (dict(n=0), "n must be between 1 and 256"),
    (dict(n=-3), "n must be between 1 and 256"),
    (dict(n=257), "n must be between 1 and 256"),
    (dict(n=2.5), "n must be a whole number"),
    (dict(n="four"), "n must be a whole number"),
    (dict(seed=-1), "seed must be a whole number from 0 to 2**63-1 (9223372036854775807), got -1"),
    (dict(seed=2**63), "from 0 to 2**63-1 (9223372036854775807), got 9223372036854775808"),
    (dict(seed=2**63 - 2, n=4), "too large for n=4"),
    (dict(max_tokens=0), "max_tokens must be at least 1"),
    (dict(max_tokens=-5), "max_tokens must be at least 1"),
    (dict(max_tokens=5000), "does not fit the context of 2048 tokens"),
    (dict(prompt="word " * 1500, max_tokens=1000), "max_tokens=1000 is too big"),
    (dict(temperature=-0.5), "temperature must be between 0 and 2 (vLLM's range), got -0.5"),
    (dict(temperature=2.5), "temperature must be between 0 and 2 (vLLM's range), got 2.5"),
    (dict(temperature=0, n=2), "greedy sampling"),
    (dict(top_p=0), "top_p must be in (0, 1]"),
    (dict(top_p=1.5), "top_p must be in (0, 1]"),
    (dict(top_k=-2), "top_k must be -1 or 0"),
    (dict(top_k=10**30), "top_k must be -1 or 0 (off) or a positive count up to 2147483647"),  # past 64 bits
    (dict(temperature=10**400), "temperature must be a finite number"),  # past what a float holds
    (dict(stop=[""]), "stop string #1 is empty"),
    (dict(stop=["x"] * 9), "at most 8 stop strings"),
    (dict(logprobs=21), "the engine's limit of 20"),
    (dict(output_kind="EVERYTHING"), "output_kind must be one of CUMULATIVE, DELTA, FINAL_ONLY"),
    (dict(mode="turbo"), "mode must be one of wrapper, native, same-seed"),
    (dict(prompt="hello\x00world"), "NUL character"),
    (dict(min_tokens=-1), "min_tokens must be"),
    (dict(min_tokens=20, max_tokens=10), "min_tokens=20 is more than max_tokens=10"),
]


def test_min_tokens_holds_every_sample_past_its_natural_end_on_both_paths(client):
    """A short answer ends early by itself; with min_tokens its end-of-sequence token cannot end it
    before then, in the wrapper's children and in vLLM's own fan-out alike."""
    asked = dict(prompt="Say yes.", n=3, seed=2, max_tokens=24, use_chat_template=True, api_name="/sample")
    free = Run.from_json(client.predict(**asked))
    assert any(s.finish_reason == "stop" and len(s.token_ids) < 12 for s in free.samples), \
        [(s.finish_reason, len(s.token_ids)) for s in free.samples]
    for mode in ("wrapper", "native"):
        held = Run.from_json(client.predict(**asked, min_tokens=12, mode=mode))
        assert held.request["min_tokens"] == 12
        assert all(len(s.token_ids) >= 12 for s in held.samples), [len(s.token_ids) for s in held.samples]


@pytest.mark.parametrize("bad, message", BAD_INPUT, ids=[m.split()[0] + str(i) for i, (_, m) in enumerate(BAD_INPUT)])
def test_bad_input_is_refused_clearly_and_the_next_request_works(client, bad, message):
    with pytest.raises(Exception) as refused:
        client.predict(**{**VALID, **bad})
    assert_refused_clearly(refused.value, message)
    assert_valid_request_works(client)


def test_a_prompt_that_is_not_valid_utf8_is_refused(app_url, client):
    """gradio_client cannot even encode a lone surrogate, so send the JSON escape by hand."""
    import json

    import httpx

    from playground.ui.api import SIGNATURE

    values = {name: parameter.default for name, parameter in SIGNATURE.parameters.items()}
    values |= {"prompt": "bad \ud800 half", "n": 2, "seed": 1, "output_kind": "FINAL_ONLY", "max_tokens": 3}
    body = json.dumps({"data": list(values.values())})  # the lone surrogate travels as the JSON escape \ud800
    base = app_url.rstrip("/") + "/gradio_api/call/sample"
    event_id = httpx.post(base, content=body, headers={"content-type": "application/json"}).json()["event_id"]
    answer = httpx.get(f"{base}/{event_id}", timeout=60).text
    assert "event: error" in answer, answer
    assert_refused_clearly(answer, "not valid UTF-8")
    assert_valid_request_works(client)


JUNK = st.sampled_from([None, "", "x", -1, 0, 2.5, 10**20, [], {"a": 1}, True, "\x00"])


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    prompt=st.one_of(st.text(max_size=40), JUNK),
    n=st.one_of(st.integers(-2, 4), JUNK),
    seed=st.one_of(st.none(), st.integers(-5, 2**64), JUNK),
    max_tokens=st.one_of(st.integers(-2, 4), JUNK),
    temperature=st.one_of(st.floats(-1, 3), JUNK),  # NaN cannot even leave the client (JSON)
    output_kind=st.one_of(st.sampled_from(["CUMULATIVE", "DELTA", "FINAL_ONLY", "delta"]), JUNK),
    mode=st.one_of(st.sampled_from(["wrapper", "native", "same-seed"]), JUNK),
    stop=st.one_of(st.none(), st.lists(st.text(max_size=3), max_size=3), JUNK),
)
def test_fuzzed_sample_calls_never_crash_or_hang(client, prompt, n, seed, max_tokens, temperature, output_kind,
                                                 mode, stop):
    kwargs = dict(prompt=prompt, n=n, seed=seed, max_tokens=max_tokens, temperature=temperature,
                  output_kind=output_kind, mode=mode, stop=stop, api_name="/sample")
    job = client.submit(**kwargs)
    assert wait_until(job.done, timeout=120), f"no answer for {kwargs}"
    try:
        run = Run.from_json(job.result())
    except Exception as e:  # a refusal must be one of ours: a sentence naming the problem
        assert "unexpected error" not in str(e), f"{kwargs}: {e}"
        assert "must" in str(e) or "empty" in str(e) or "too" in str(e) or "not valid" in str(e) \
            or "NUL" in str(e) or "missing" in str(e) or "unknown" in str(e) or "greedy" in str(e) \
            or "longer" in str(e) or "context" in str(e), f"unclear refusal for {kwargs}: {e}"
    else:
        assert run.status == "finished"


def test_after_fuzzing_the_engine_is_idle_and_healthy(client, backend, host):
    assert wait_until(lambda: host.run(backend.num_unfinished()) == 0, timeout=5)
    assert_valid_request_works(client)


PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "def main():", "Dear Sir or Madam,",
           "Q: What colour is the sky?\nA:", "<html>\n<head>", "Roses are red,", "import numpy as"]


def test_eight_clients_with_n8_at_once_all_finish_without_cross_talk(app_url, backend, host):
    # Near-greedy sampling of plain completions: each prompt's continuation starts the same way
    # whatever the batch, so a sample that carried another request's tokens would show it.
    reference = {p: Run.from_json(Client(app_url, verbose=False).predict(
        prompt=p, n=1, temperature=0, max_tokens=2, use_chat_template=False, api_name="/sample")).samples[0].token_ids
        for p in PROMPTS}
    results: dict[str, Run] = {}
    errors: list[BaseException] = []

    def one_client(k: int, prompt: str) -> None:
        try:
            client = Client(app_url, verbose=False)
            results[prompt] = Run.from_json(client.predict(
                prompt=prompt, n=8, seed=100 * k, temperature=0.01, max_tokens=4, output_kind="DELTA",
                use_chat_template=False, api_name="/sample"))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one_client, args=(k, p)) for k, p in enumerate(PROMPTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert sorted(results) == sorted(PROMPTS)
    for k, prompt in enumerate(PROMPTS):
        run = results[prompt]
        assert run.status == "finished" and run.request["prompt"] == prompt
        assert [s.seed for s in run.samples] == [100 * k + i for i in range(8)]
        assert {i for e in run.events for i in (o.index for o in e.outputs)} == set(range(8))
        for s in run.samples:
            assert s.token_ids[:2] == reference[prompt], f"sample {s.index} of {prompt!r} carries other tokens"
    assert wait_until(lambda: host.run(backend.num_unfinished()) == 0, timeout=2)


def test_an_auth_protected_app_refuses_a_client_without_credentials(backend):
    from playground.ui import build_app, launch_app

    demo = build_app(backend)
    _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                           quiet=True, auth=("alice", "wonderland"))
    try:
        with pytest.raises(AuthenticationError, match="credentials were not provided"):
            Client(url, verbose=False)
        client = Client(url, auth=("alice", "wonderland"), verbose=False)
        assert_valid_request_works(client)
    finally:
        demo.close()


def test_a_full_app_refuses_a_new_run_with_a_sentence_where_it_starts_and_nothing_else(backend, host):
    """--queue-size counts runs: with one running and one waiting, a call of /sample (plain HTTP)
    and the page's Run are refused at once with a sentence, nothing stored or left queued; once
    the two are done (here: cancelled, which aborts them), a run is admitted again."""
    import asyncio

    import httpx

    from playground.ui import build_app, launch_app, running

    demo = build_app(backend)
    _, url, _ = launch_app(demo, concurrency=1, queue_size=1, prevent_thread_lock=True, server_name="127.0.0.1",
                           server_port=free_port(), quiet=True)
    page = demo.playground_page
    try:
        client = Client(url, verbose=False)
        long = dict(VALID, n=2, max_tokens=1500, output_kind="DELTA", ignore_eos=True)  # cancelled below
        jobs = [client.submit(**long)]
        assert wait_until(lambda: host.run(backend.num_unfinished()) > 0, 60), "the first run never started"
        jobs.append(client.submit(**long))
        assert wait_until(lambda: page.waiting.waiting() == 1, 60), "the second run never waited"
        refused = httpx.post(f"{url}gradio_api/call/sample", json={"data": [PROMPT]}, timeout=30)
        assert refused.status_code == 503 and "the app is full: 1 run waits for a free slot already (at most 1, " \
            "--queue-size)" in refused.json()["detail"], refused.text
        for path, body in (("call/v2/sample", {"prompt": PROMPT}), ("call/sample/", {"data": [PROMPT]})):
            other = httpx.post(f"{url}gradio_api/{path}", json=body, timeout=30)  # by name, or with a slash
            assert other.status_code == 503 and "the app is full" in other.text, (path, other.text)
        form = {name: control.value for name, control in page.form.items()} | {"prompt": PROMPT}
        said = asyncio.run(running.begin(page, None, **form))
        assert said[page.action] is None and said[page.summary].startswith("✖ refused: the app is full"), said
        assert "change it" not in said[page.summary]
        page.waiting.limit = 2  # room for one more: admitted, and its line says how many wait before it
        said = asyncio.run(running.begin(page, None, **form))
        assert "queued: waiting for a free slot (the app's queue holds 1 run before it)" in said[page.summary]
        asyncio.run(said[page.action].runs[0].stop_and_wait())  # never sent: this test follows no stream
        page.waiting.limit = 1
        for job in reversed(jobs):
            job.cancel()
        assert wait_until(lambda: page.waiting.waiting() == 0 and host.run(backend.num_unfinished()) == 0, 60)
        assert_valid_request_works(client)  # admitted again
        client.close()
    finally:
        demo.close()
