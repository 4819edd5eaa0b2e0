"""``batch`` and ``sweep`` on a real vLLM server (``--backend openai``): the commands' runner over
the remote backend (``LoopRunner``), and the commands themselves (their ``main``, in this process:
the server is the session's, and a subprocess would only add vLLM's import)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from playground.backends.loop_runner import LoopRunner
from playground.commands import batch, exits, sweep
from playground.errors import InvalidRequest
from playground.request import SampleRequest
from playground.run import Run
from tests.helpers import free_port, record_to_end, wait_until

PROMPT = "Write a short poem about the sea:"


def request(**settings) -> SampleRequest:
    return SampleRequest(prompt=PROMPT, **{"use_chat_template": False, "logprobs": None, **settings})


def test_a_request_the_server_refuses_is_skipped_and_the_rest_run(remote):
    runner = LoopRunner(remote)
    with runner:
        outcomes = dict(runner.record_all([
            request(n=2, seed=5, max_tokens=4),
            request(n=2, seed=1, max_tokens=4, prefix_token_ids=[1, 10**8]),  # a token id the server does not know
            request(n=3, seed=5, max_tokens=4, output_kind="FINAL_ONLY", mode="native"),
        ], max_in_flight=2))
    assert sorted(outcomes) == [0, 1, 2]
    refused = outcomes[1]
    assert isinstance(refused, InvalidRequest) and "100000000" in str(refused) and remote.base_url in str(refused)
    first, third = outcomes[0], outcomes[2]
    assert first.status == third.status == "finished"
    assert [s.seed for s in first.samples] == [5, 6] and [s.seed for s in third.samples] == [5, 6, 7]
    assert first.engine["backend"] == "openai" and third.request["mode"] == "native"
    # the record a run on the page would make of the same request, on the same server
    again = record_to_end(remote, request(n=2, seed=5, max_tokens=4))
    assert [s.token_ids for s in first.samples] == [s.token_ids for s in again.samples]


def test_ending_the_walk_early_aborts_the_runs_in_flight_on_the_server(remote):
    """Ctrl-C (or any early end) closes the walk: the long run still in flight is aborted on the
    server before the close returns, not left sampling there."""
    with LoopRunner(remote) as runner:
        walk = runner.record_all([request(n=1, seed=1, max_tokens=2),
                                  request(n=2, seed=1, max_tokens=1500, ignore_eos=True)], max_in_flight=2)
        with contextlib.closing(walk):
            position, first = next(walk)
            assert position == 0 and first.status == "finished"
            assert asyncio.run(remote.num_unfinished()) > 0  # the long one is sampling on the server
    assert wait_until(lambda: asyncio.run(remote.num_unfinished()) == 0, timeout=10, every=0.2)


def test_a_server_that_cannot_be_reached_is_a_usage_error_before_any_line_runs(tmp_path, capsys):
    source = tmp_path / "prompts.jsonl"
    source.write_text(json.dumps({"prompt": "one"}) + "\n")
    port = free_port()  # nothing listens on it
    status = batch.main([str(source), "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1"])
    assert status == exits.USAGE
    error = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in error and "Traceback" not in error, error


def test_batch_on_the_server_writes_the_bundles_an_engine_here_would(remote_server, remote, tmp_path, capsys):
    source = tmp_path / "prompts.jsonl"
    source.write_text(json.dumps({"prompt": PROMPT}) + "\n"
                      + json.dumps({"prompt": "Name a colour.", "n": 2, "output_kind": "FINAL_ONLY"}) + "\n")
    out = tmp_path / "runs.jsonl"
    status = batch.main([str(source), "--out", str(out), "--summary", "--n", "3", "--seed", "7", "--max-tokens", "6",
                         "--no-use-chat-template", "--backend", "openai", "--base-url", remote_server.url,
                         "--max-model-len", "512"])
    said = capsys.readouterr()
    assert status == exits.OK, said.err[-3000:]
    assert f"server: {remote.base_url} serves" in said.err
    assert "--max-model-len set an engine" in said.err and "ignored here" in said.err
    runs = [Run.from_json(line) for line in out.read_text().splitlines()]
    assert [r.request["batch_line"] for r in runs] == [1, 2]
    assert [[s.seed for s in r.samples] for r in runs] == [[7, 8, 9], [7, 8]]
    assert all(r.engine["backend"] == "openai" and r.status == "finished" for r in runs)
    assert runs[0].engine["max_model_len"] == remote.limits.max_model_len  # the server's, not the flag's
    here = record_to_end(remote, request(n=3, seed=7, max_tokens=6))
    assert [s.token_ids for s in runs[0].samples] == [s.token_ids for s in here.samples]
    assert len(said.out.splitlines()) == 3  # the summary: a header and one row per prompt


def test_sweep_on_the_server(remote_server, tmp_path, capsys):
    out = tmp_path / "sweep.jsonl"
    status = sweep.main(["--prompt", PROMPT, "--param", "temperature", "--values", "0.5", "1.2", "--n", "2",
                         "--seed", "3", "--max-tokens", "4", "--backend", "openai", "--base-url", remote_server.url,
                         "--out", str(out)])
    assert status == exits.OK, capsys.readouterr().err[-3000:]
    runs = [Run.from_json(line) for line in out.read_text().splitlines()]
    assert [r.request["sweep"]["value"] for r in runs] == [0.5, 1.2]
    assert [r.request["temperature"] for r in runs] == [0.5, 1.2]
    assert all(r.engine["backend"] == "openai" and [s.seed for s in r.samples] == [3, 4] for r in runs)
