"""The batch command: line parsing and reporting, atomic output, Ctrl-C, and one real run of
``python app.py batch`` as a subprocess (it starts an engine of its own, so only once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from playground.backends.sync import SyncRunner
from playground.commands import batch, cli, exits
from playground.errors import InvalidRequest
from playground.request import SampleRequest
from playground.run import Run, Sample
from tests.helpers import ctrl_c_after_the_first_run

ROOT = Path(__file__).resolve().parent.parent


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def test_each_bad_line_is_reported_by_number_and_the_rest_go_on(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", [
        {"prompt": "one"},
        '{"prompt": "two",',
        "",  # blank lines are skipped, not errors
        ["not", "an", "object"],
        {"n": 2},
        {"prompt": "five", "tempreature": 0.5},
        {"prompt": "six", "n": 0},
        {"prompt": "seven", "temperature": 0, "n": 3},
        {"prompt": "eight", "n": 2, "seed": None, "output_kind": "final_only"},
    ])
    lines, errors = batch.read_lines(path, {"n": 4, "seed": 3, "max_tokens": 5}, max_n=32)

    assert [line.number for line in lines] == [1, 9]
    assert [str(e) for e in errors] == [
        "line 2: not valid JSON (Expecting property name enclosed in double quotes at column 18)",
        'line 4: must be a JSON object with a "prompt", got list',
        "line 5: the prompt is missing",
        "line 6: unknown setting(s): tempreature (did you mean temperature?)",
        "line 7: n must be between 1 and 32 (--max-n), got 0",
        "line 8: greedy sampling (temperature 0) with n=3 would give 3 identical samples, and vLLM rejects it: "
        "raise the temperature or set n=1",
    ]
    one, eight = (line.request for line in lines)
    assert (one.n, one.seed, one.max_tokens) == (4, 3, 5)  # the command line's defaults
    assert (eight.n, eight.seed, eight.output_kind) == (2, None, "FINAL_ONLY")  # the line wins


def test_a_file_that_is_one_json_array_of_prompts_is_read_item_by_item(tmp_path):
    path = tmp_path / "prompts.json"
    path.write_text('[\n {"prompt": "one", "n": 2},\n {"prompt": "two", "n": 0},\n {"prompt": "three"}\n]\n',
                    encoding="utf-8")
    lines, errors = batch.read_lines(path, {"n": 4}, max_n=8)
    assert [(line.number, line.unit, line.request.prompt, line.request.n) for line in lines] == [
        (1, "item", "one", 2), (3, "item", "three", 4)]
    assert [str(e) for e in errors] == ["item 2: n must be between 1 and 8 (--max-n), got 0"]


def test_a_file_that_is_one_pretty_printed_object_is_one_prompt(tmp_path):
    """A prompt spread over lines (json.dump(..., indent=1)) is read as one, as an array is read item
    by item, not a line at a time; it is numbered by the line it starts on. A typo in it is said
    once, by that number, and the file is not taken for something else."""
    one, typo = tmp_path / "one.json", tmp_path / "typo.json"
    one.write_text('\n{\n "prompt": "Name a colour.",\n "n": 2\n}\n', encoding="utf-8")
    typo.write_text('{\n "promt": "Name a colour.",\n "n": 2\n}\n', encoding="utf-8")
    lines, errors = batch.read_lines(one, {"n": 4, "seed": 1}, max_n=8)
    assert errors == []
    assert [(line.number, line.unit, line.request.prompt, line.request.n, line.request.seed) for line in lines] == [
        (2, "line", "Name a colour.", 2, 1)]
    lines, errors = batch.read_lines(typo, {}, max_n=8)
    assert lines == [] and [str(e) for e in errors] == ["line 1: unknown setting(s): promt (did you mean prompt?)"]
    assert batch.not_prompts(typo) is None


def test_a_json_array_of_anything_is_read_item_by_item(tmp_path):
    path = tmp_path / "mixed.json"
    path.write_text('[\n "Name a colour.",\n {"prompt": "two"}\n]\n', encoding="utf-8")
    lines, errors = batch.read_lines(path, {}, max_n=8)
    assert [(line.number, line.unit) for line in lines] == [(2, "item")]
    assert [str(e) for e in errors] == ['item 1: must be a JSON object with a "prompt", got str']


def test_flags_sampling_seed_engine_seed_and_engine_flags():
    parser = batch.build_parser()
    args, engine_kwargs = parser.parse(["in.jsonl", "--n", "3", "--seed", "5", "--engine-seed", "7",
                                        "--max-model-len", "1024", "--stop", "a", "--stop", "b", "--ignore-eos"])
    assert engine_kwargs == {"seed": 7, "max_model_len": 1024}  # --seed is not the engine's
    assert parser.sampling_settings(args) == {"n": 3, "seed": 5, "stop": ["a", "b"], "ignore_eos": True}
    args, _ = parser.parse(["in.jsonl", "--n", "three"])
    with pytest.raises(InvalidRequest, match="n must be a whole number, got 'three'"):
        parser.sampling_settings(args)


def test_out_is_written_atomically(tmp_path):
    out = tmp_path / "runs.jsonl"
    cli.write_atomically(out, ['{"a": 1}', '{"b": 2}'])
    assert out.read_text() == '{"a": 1}\n{"b": 2}\n'

    def failing():
        yield '{"c": 3}'
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cli.write_atomically(out, failing())
    assert out.read_text() == '{"a": 1}\n{"b": 2}\n', "a failed write must leave the old file whole"
    assert os.listdir(tmp_path) == ["runs.jsonl"], "the temp file must be gone"


def test_summary_says_which_samples_are_identical():
    def run(tokens: list[list[int]]) -> Run:
        samples = [Sample(index=i, seed=i, token_ids=t) for i, t in enumerate(tokens)]
        return Run(request={"prompt": "p" * 50, "mode": "wrapper"}, samples=samples, wall_time=2.0)

    frame = batch.summary_frame({1: run([[1, 2], [1, 3]]), 2: run([[4], [5], [4], [5], [6]])})
    assert list(frame.columns) == ["line", "prompt", "mode", "n", "tokens", "seconds", "tokens_per_s",
                                   "identical", "identical_samples", "answers", "majority", "vote_share",
                                   "answer_entropy", "distinct_2", "similarity", "vendi", "settled_at", "pass_at_1",
                                   "pass_at_n", "eigv"]
    assert frame["identical"].tolist() == [False, True]
    assert frame["pass_at_1"].isna().all()  # no reference: no pass@k
    assert frame["identical_samples"].tolist() == ["", "0=2, 1=3"]
    assert frame["tokens"].tolist() == [4, 5] and frame["tokens_per_s"].tolist() == [2.0, 2.5]
    assert frame["prompt"].str.len().max() <= 40


def test_the_printed_summary_speaks_a_readers_words(capsys, tmp_path):
    from playground.commands.progress import print_summary

    frame = batch.summary_frame({1: Run(request={"prompt": "p", "mode": "wrapper"},
                                        samples=[Sample(index=i, seed=i, token_ids=[1]) for i in range(2)],
                                        wall_time=1.0)})
    assert print_summary(lambda: frame, tmp_path / "out.jsonl") is None
    printed = capsys.readouterr().out
    assert " yes " in printed and "None" not in printed and "True" not in printed and "nan" not in printed, printed


def lines_of(*requests: SampleRequest) -> list[batch.Line]:
    return [batch.Line(number, request) for number, request in enumerate(requests, 1)]


def test_ctrl_c_mid_batch_writes_what_finished_and_leaves_no_request_running(sync_engine, tmp_path, monkeypatch):
    runner = SyncRunner(sync_engine)
    long = dict(n=2, seed=1, max_tokens=400, ignore_eos=True)
    lines = lines_of(SampleRequest("Count to three:", n=2, seed=1, max_tokens=3),
                     SampleRequest("Tell a long story:", **long), SampleRequest("Tell another one:", **long))
    ctrl_c_after_the_first_run(monkeypatch, runner)
    out = tmp_path / "runs.jsonl"
    status = batch.execute(runner, lines, [], out=out, max_in_flight=2, progress=False)

    assert status == exits.INTERRUPTED
    assert sync_engine.get_num_unfinished_requests() == 0 and not sync_engine.has_unfinished_requests()
    assert not runner.sampler.has_unfinished_requests() and runner.running == 0
    bundles = [Run.from_json(text) for text in out.read_text().splitlines()]
    assert [b.request["batch_line"] for b in bundles] == [1]
    assert bundles[0].status == "finished"
    assert os.listdir(tmp_path) == ["runs.jsonl"]


def test_closing_the_runs_early_aborts_what_is_in_flight(sync_engine):
    runner = SyncRunner(sync_engine)
    long = dict(n=3, seed=2, max_tokens=400, ignore_eos=True)
    requests = [SampleRequest("Short:", n=2, seed=1, max_tokens=2), SampleRequest("Long:", **long),
                SampleRequest("Longer:", **long)]
    outcomes = runner.record_all(requests, max_in_flight=3)
    position, run = next(outcomes)
    assert (position, run.status) == (0, "finished")
    assert sync_engine.get_num_unfinished_requests() == 6
    outcomes.close()
    assert sync_engine.get_num_unfinished_requests() == 0
    assert runner.running == 0


def test_a_line_the_engine_refuses_is_reported_and_skipped(sync_engine, tmp_path, capsys):
    # Too long for the context: only the engine knows its context length, so this is caught at
    # submission, not while reading the file.
    runner = SyncRunner(sync_engine)
    prompt = "Tell me a story about a lighthouse keeper and the sea."  # more than 8 tokens
    lines = lines_of(SampleRequest(prompt, n=2, seed=1, max_tokens=3),
                     SampleRequest(prompt, n=2, seed=1, max_tokens=2040))
    out = tmp_path / "runs.jsonl"
    status = batch.execute(runner, lines, [], out=out, summary=True, progress=False)
    captured = capsys.readouterr()
    assert status == exits.FAILED
    assert "line 2: max_tokens=2040 is too big" in captured.err
    assert "skipped line(s) 2" in captured.err
    assert "identical" in captured.out  # the summary table, on stdout beside --out
    assert len(out.read_text().splitlines()) == 1


@pytest.mark.slow
def test_batch_command_end_to_end(tmp_path):
    """The real command: 5 lines, one malformed; 4 bundles and one error that names the line."""
    source = write_lines(tmp_path / "prompts.jsonl", [
        {"prompt": "Name a colour:"},
        {"prompt": "Name a fruit:", "n": 3, "output_kind": "FINAL_ONLY"},
        '{"prompt": "Name a tree:" "n": 2}',
        {"prompt": "Name a bird:", "mode": "native", "seed": 9},
        {"prompt": "Name a river:", "temperature": 0.5},
    ])
    out = tmp_path / "runs.jsonl"
    command = [sys.executable, "app.py", "batch", str(source), "--out", str(out), "--summary",
               "--n", "2", "--seed", "3", "--max-tokens", "4",
               # engine flags go to vLLM as they are
               "--max-model-len", "1024"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert done.returncode == exits.FAILED, done.stderr[-3000:]
    assert "line 3: not valid JSON" in done.stderr
    assert "skipped line(s) 3" in done.stderr
    runs = [Run.from_json(text) for text in out.read_text().splitlines()]
    assert [r.request["batch_line"] for r in runs] == [1, 2, 4, 5]
    assert [r.n for r in runs] == [2, 3, 2, 2]
    assert [r.request["output_kind"] for r in runs] == ["CUMULATIVE", "FINAL_ONLY", "CUMULATIVE", "CUMULATIVE"]
    assert [r.request["mode"] for r in runs] == ["wrapper", "wrapper", "native", "wrapper"]
    assert [[s.seed for s in r.samples] for r in runs] == [[3, 4], [3, 4, 5], [9, 10], [3, 4]]
    assert runs[3].request["temperature"] == 0.5
    for run in runs:
        assert run.status == "finished" and run.engine["max_model_len"] == 1024
        assert all(s.finish_reason and 0 < len(s.token_ids) <= 4 for s in run.samples)
    assert sorted(os.listdir(tmp_path)) == ["prompts.jsonl", "runs.jsonl"]  # no temp file left
    table = done.stdout.splitlines()
    assert "identical" in table[0] and len(table) == 5
