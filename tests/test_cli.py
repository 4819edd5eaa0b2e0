"""The real command line: once as a subprocess (as a newcomer runs it), then in-process, where
vLLM is already imported (each fresh interpreter spends ~20 s importing it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def app(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "app.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_help_lists_vllm_engine_flags_and_the_playgrounds_own():
    result = app("--help")
    assert result.returncode == 0
    for flag in ("--enforce-eager", "--max-model-len", "--max-n", "--host", "--port", "--auth", "--backend"):
        assert flag in result.stdout, flag


def test_every_command_listed_is_dispatched_and_in_the_pages_help():
    """The one table of commands: each names a module with a main, and the page's --help lists each."""
    import importlib

    from playground import commands
    from playground.commands.serve import DESCRIPTION

    for name, summary in commands.COMMANDS.items():
        assert callable(importlib.import_module(commands.module(name)).main), name
        assert f"  {name} " in DESCRIPTION and summary in DESCRIPTION, name


def run_main(capsys, *args: str) -> tuple[int, str]:
    """app.main in this process: its exit code and what it wrote to stderr."""
    import app as cli
    from tests.session_start import STARTING

    STARTING.imports()  # vLLM's parser imports from transformers: not while the engines' thread does

    try:
        code = cli.main(list(args))  # a refusal the app says itself, before its parser: returned
    except SystemExit as exited:  # argparse's usage errors
        code = exited.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().err + (code if isinstance(code, str) else "")


@pytest.mark.parametrize("args, message", [
    (["--max-n", "0"], "argument --max-n: must be between 1 and 1024, got 0"),
    (["--max-n", "many"], "argument --max-n: must be a whole number, got 'many'"),
    (["--port", "http"], "argument --port: must be a whole number"),
    (["--auth", "nocolon"], "--auth must look like user:password"),
    (["--backend", "openai"], "--base-url"),
    (["analyse", "runs.jsonl"], "'analyse' is not a command (did you mean analyze?). Commands: batch, sweep"),
    (["analyze", "runs.jsonl", "--summary", "--report", "r.html"],  # guesses spelt nothing like a flag: answered
     "(--summary: the summary is always printed; --json OUT writes every figure; --report: the report is --html OUT)"),
    (["sweep", "--prompt", "hi", "--param", "temprature", "--values", "1"], "(did you mean temperature?)"),
    (["--replay-pace", "x4"], "--replay-pace is the pace of --replay: give the runs to play with --replay FILE"),
    (["--replay", "synthetic:4xabc"], "synthetic:4xabc is not a made-up run: write synthetic:NxTOKENS"),
    (["batch", "prompts.jsonl", "--temperature", "-2"], "temperature must be between 0 and 2 (vLLM's range), got -2.0"),
    (["batch", "prompts.jsonl", "--n", "300"], "n must be between 1 and 256 (--max-n), got 300"),
    (["batch", "prompts.jsonl", "--out", "./prompts.jsonl"], "--out: prompts.jsonl is the input this command reads"),
    (["batch", "prompts.jsonl", "--temprature", "0.5"], "unrecognized arguments: --temprature 0.5 (--temprature: did "
                                                       "you mean --temperature?)"),
])
def test_bad_values_give_a_clear_error(capsys, args, message):
    code, err = run_main(capsys, *args)
    assert code == 2 and message in err, err[-500:]
    assert len(err.splitlines()) <= 3, "a usage error is a sentence, not vLLM's every flag"


@pytest.mark.parametrize("argv, says", [
    (["--replay-pace", "x4"], "error: --replay-pace is the pace of --replay: give the runs to play with --replay FILE"),
    (["--replay", "missing.jsonl"], "error: --replay: cannot read missing.jsonl: No such file or directory"),
    (["--replay", "synthetic:2x3", "--replay-pace", "soon"], "error: --replay: the replay's pace must be"),
    (["--port", "http"], "error: argument --port: must be a whole number, got 'http'"),
    (["batch", "tests", "--n", "2"], "error: cannot read tests: Is a directory"),
    (["batch", "README.md", "--out", "tests"], "error: --out: tests is a folder: give the name of a file to write"),
    (["batch", "README.md", "--out", "README.md/runs.jsonl"],
     "error: --out: README.md is a file, not a folder to write runs.jsonl in"),
    (["batch", "README.md", "--out", "/proc/runs.jsonl"],  # a place no file is made in: not after the batch ran
     "error: --out: no file can be written in /proc ("),
    (["batch", "README.md", "--seed", "abc"], "error: seed must be a whole number, got 'abc'"),
    (["batch", "tests/data/three_prompts.jsonl", "--temperature", "0", "--n", "2"],  # no line takes it: once
     "error: every line of tests/data/three_prompts.jsonl is refused the same way: greedy sampling (temperature 0) "
     "with n=2"),
    (["batch", "README.md", "--logprobs", "-1"],
     "error: logprobs must be between 0 and the engine's limit of 20, got -1"),
    # The cap the engine will be started with (vLLM's default; --max-logprobs raises it): no engine start to learn it.
    (["batch", "README.md", "--logprobs", "30"],
     "error: logprobs must be between 0 and the engine's limit of 20, got 30"),
    (["sweep", "--prompt", "Hi", "--param", "seed", "--values", "1", "--logprobs", "21"], "the engine's limit of 20"),
    (["sweep", "--prompt", "Hi", "--param", "temperature", "--values", "0.5", "-1", "--out", "tests"],
     "temperature must be between 0 and 2 (vLLM's range), got -1.0"),
    (["sweep", "--param", "temperature", "--values", "1"], "error: the following arguments are required: --prompt"),
    (["qa", "--prompt", "Hi", "--json", "tests"], "error: --json: tests is a folder: give the name of a file to write"),
    # A server's flags without --backend openai would be dropped, and the run here pass for the server's.
    (["batch", "README.md", "--base-url", "http://gpu:8000/v1"],
     "error: --base-url is for a vLLM server: add --backend openai to use one, or leave it out"),
    (["sweep", "--prompt", "Hi", "--param", "seed", "--values", "1", "--api-key", "k", "--request-timeout", "5"],
     "error: --api-key and --request-timeout are for a vLLM server"),
    (["--base-url", "http://gpu:8000/v1"], "error: --base-url is for a vLLM server"),
    (["batch", "README.md", "--backend", "openai"], "error: --backend openai needs --base-url"),
])
def test_a_usage_error_in_the_commands_own_flags_comes_before_vllm_is_imported(argv, says):
    """A usage error the app can see in its own flags and files is said at once, not after the
    seconds vLLM's parser takes to import (and never after the engine ran: an --out that is a
    folder once lost a whole batch at its end)."""
    probe = ("import sys, app\n"
             f"try:\n    code = app.main({argv!r})\nexcept SystemExit as e:\n    code = e.code\n"
             "print(code, 'vllm' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False"], (done.stdout, done.stderr[-2000:])
    assert says in done.stderr


def test_batch_names_a_file_that_is_not_text_or_holds_no_prompt(capsys, tmp_path):
    """Before any engine starts: a binary file is one sentence (not a line each), an empty one
    says what batch reads."""
    binary, empty = tmp_path / "weights.bin", tmp_path / "prompts.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff" * 40)
    empty.write_text("\n\n", encoding="utf-8")
    code, err = run_main(capsys, "batch", str(binary))
    assert code == 2 and f"{binary} is not text (bad UTF-8 at byte 0), so not prompts" in err, err[-500:]
    assert "skipping line" not in err
    code, err = run_main(capsys, "batch", str(empty))
    assert code == 1 and f"no line to run: {empty} has no line but blank ones" in err, err[-500:]  # nothing ran


def test_batch_names_a_file_of_something_else_and_keeps_an_earlier_out(capsys, tmp_path):
    """Run bundles, a report or a sample graph given to batch: one sentence that names what the
    file is and the command that reads it, before any engine starts. A file with no line to run
    leaves --out as an earlier batch wrote it."""
    from playground.backends.synthetic import synthetic_run

    runs, report, graph = tmp_path / "runs.jsonl", tmp_path / "report.html", tmp_path / "graph.jsonl"
    runs.write_text(synthetic_run(2, 3).to_json() + "\n", encoding="utf-8")
    report.write_text("<!DOCTYPE html>\n<html><body>a report</body></html>\n", encoding="utf-8")
    text = tmp_path / "prompts.txt"
    text.write_text("What is 17 * 23?\n\nName a colour.\n", encoding="utf-8")
    graph.write_text('{"nodes": [], "edges": []}\n', encoding="utf-8")
    table = tmp_path / "prompts.csv"
    table.write_text("prompt,n\nhello,4\n", encoding="utf-8")
    for path, said in ((table, "is a table of comma-separated values (its columns: prompt,n), not prompts as batch "
                               "reads them: write each row as a JSON object"),
                       (runs, f"holds run bundles (what batch and sweep write, or the page exports), not prompts: "
                              f"`python app.py analyze {runs}` reads them"),
                       (report, "is an HTML page (a report?), not prompts"),
                       (text, "is plain text (2 lines, none of them JSON), not prompts as batch reads them: write "
                              "each line as {\"prompt\": TEXT}, for example with jq -R"),
                       (graph, "is a sample graph (analyze --graph's output), not prompts")):
        code, err = run_main(capsys, "batch", str(path))
        assert code == 2 and f"{path} {said}" in err and "skipping" not in err, err[-500:]
    typos, out = tmp_path / "typos.jsonl", tmp_path / "earlier.jsonl"
    typos.write_text('{"promt": "Hi"}\n', encoding="utf-8")
    out.write_text("what an earlier batch wrote\n", encoding="utf-8")
    code, err = run_main(capsys, "batch", str(typos), "--out", str(out))
    assert code == 1 and "(did you mean prompt?)" in err and f"{out} is left as it was" in err, err[-500:]
    assert out.read_text(encoding="utf-8") == "what an earlier batch wrote\n"


def test_batch_names_a_json_document_that_is_not_prompts_in_one_sentence(capsys, tmp_path):
    """A file that is one JSON document, pretty-printed (analyze's --json figures, one run bundle, a
    QA matrix, someone else's JSON): decided from the whole document and said once, exit 2, not
    as a line error per line of its layout."""
    from playground.backends.synthetic import synthetic_run

    runs, figures = tmp_path / "runs.jsonl", tmp_path / "figures.json"
    runs.write_text("".join(synthetic_run(2, 3).to_json() + "\n" for _ in range(2)), encoding="utf-8")
    code, err = run_main(capsys, "analyze", str(runs), "--json", str(figures))
    assert code == 0 and figures.read_text(encoding="utf-8").count("\n") > 20, err[-500:]
    bundle, matrix, other, texts = (tmp_path / name for name in ("run.json", "qa.json", "chat.json", "texts.json"))
    bundle.write_text(synthetic_run(2, 3).to_json(indent=1), encoding="utf-8")
    matrix.write_text(json.dumps({"matrix_version": 1, "ok": True, "cells": []}, indent=2), encoding="utf-8")
    other.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}, indent=2),
                     encoding="utf-8")
    texts.write_text(json.dumps(["Name a colour.", "Write a haiku."], indent=2), encoding="utf-8")
    for path, said in ((figures, "is analyze's figures (analyze --json's output), not prompts. batch reads one "
                                 'JSON object per line, {"prompt": ...}'),
                       (bundle, "holds run bundles (what batch and sweep write, or the page exports), not prompts"),
                       (matrix, f"is a QA matrix (qa --json), not prompts: `python app.py analyze {matrix}`"),
                       (other, "is one JSON object (with model, messages), not prompts"),
                       (texts, 'is a JSON array of 2 texts, not prompts: write each as {"prompt": TEXT}')):
        code, err = run_main(capsys, "batch", str(path))
        assert code == 2 and f"{path} {said}" in err and "skipping" not in err, err[-500:]
        assert err.count("error:") == 1, err[-500:]


def test_a_commands_help_shows_its_own_flags_first_and_a_short_usage():
    from playground.commands import batch
    from tests.session_start import STARTING

    STARTING.imports()  # vLLM's parser imports from transformers: not while the engines' thread does
    text = batch.build_parser().parser.format_help()
    assert text.startswith("usage: python app.py batch INPUT.jsonl [flags] (--help lists them")
    assert text.index("\nplayground:") < text.index("\nsampling:") < text.index("\noptions:") < text.index(
        "\nModelConfig:")
    assert "(default 256, at most 1024)" in text and "(default: 256)" not in text  # each default said once


def test_an_exposed_host_without_auth_warns_and_an_unreachable_server_is_named(capsys):
    code, err = run_main(capsys, "--host", "0.0.0.0", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1")
    assert "WARNING: binding to 0.0.0.0 without --auth" in err
    assert code == 2 and "127.0.0.1:9" in err


def test_explicit_engine_flags_are_told_apart_from_defaults():
    from playground.commands.cli import PlaygroundParser

    parser = PlaygroundParser("app", "test", lambda group: None)
    args, given = parser.parse(["--max-model-len", "1024", "--no-enable-prefix-caching"])
    assert given == {"max_model_len": 1024, "enable_prefix_caching": False}
    assert args.model is None and args.enforce_eager is not True


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_the_app_and_its_engine_without_rebuilding_it(tmp_path):
    """``python app.py`` as a newcomer runs it, a run streaming, then Ctrl-C as a terminal sends
    it: to the whole process group, so the engine core gets it too and dies while the app is still
    closing its server. The app must take that for the stop it is (not rebuild a dead engine),
    end, and leave no engine process behind."""
    import json
    import os
    import signal

    import psutil
    from gradio_client import Client

    from playground.bench.browser import start_app
    from tests.helpers import free_port, wait_until

    log, port = tmp_path / "app.log", free_port()
    damaged = tmp_path / "runs.sqlite3"
    damaged.write_text("not a database\n")
    proc, _ = start_app(port, log, ["--runs-db", str(damaged), "--no-store"])  # memory only: the file is not read
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
        assert any("EngineCore" in c.name() for c in children), [c.name() for c in children]
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        with pytest.raises(Exception, match="the prompt is empty"):
            client.predict(prompt="", n=2, api_name="/sample")
        done = json.loads(client.predict(prompt="Once upon a time", n=2, seed=1, max_tokens=3, api_name="/sample"))
        job = client.submit(
            prompt="Once upon a time", n=4, seed=1, max_tokens=2000, ignore_eos=True, api_name="/sample")
        assert wait_until(lambda: any(json.loads(v).get("samples") for v in job.outputs()), timeout=120)
        job_id = json.loads(job.outputs()[-1])["request_id"]
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(120)
        assert wait_until(lambda: not any(alive(c) for c in children), timeout=30), "a process outlived the app"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert "starting a new engine" not in text, text[-3000:]
    assert f"--no-store keeps runs in each tab's memory only: --runs-db {damaged} is not opened" in text
    # The first screen speaks of the playground only: vLLM's and torch's start-up noise is silenced
    # in both processes (the app and its engine core), and what is left before the address is ours.
    first_screen = text.split("Running on local URL")[0]
    for noise in ("Triton", "FutureWarning", " INFO ", "[W", "Loading safetensors", "LD_PRELOAD", "SSM cache"):
        assert noise not in first_screen, first_screen
    assert "start: engine start" in first_screen
    assert "--share adds a public gradio.live link" in text and "share=True" not in text  # our flag, not Gradio's
    # Each run's end is a line for whoever runs the app, without its prompt or text
    runs = [line for line in text.splitlines() if re.match(r"\d\d:\d\d:\d\d \S+ \(/sample\) ", line)]
    assert any(" refused (/sample) before it began: n=2, the prompt is empty" in line for line in runs), runs
    tokens = sum(len(sample["token_ids"]) for sample in done["samples"])
    assert any(re.search(f" {done['request']['request_id']} \\(/sample\\) finished: n=2, wrapper, CUMULATIVE, "
                         f"{tokens} tokens in [0-9.]+ s", line) for line in runs), runs
    assert not any("Once upon" in line for line in runs), runs
    cut = [line for line in runs if job_id in line]  # the run going at Ctrl-C: one line, said as the stop came
    assert len(cut) == 1 and " (/sample) cut short by the app's stop: n=4, wrapper" in cut[0], runs
    # ...and so does the last: no report of objects alive at exit from Triton's bindings, no
    # semaphore left to Python's resource tracker by the engine core's progress bar, and no
    # traceback for the engine core's end on the same Ctrl-C.
    last_screen = text.split("Running on local URL")[-1]
    for noise in ("nanobind", "leaked", "resource_tracker", "Traceback", "exited unexpectedly", "ERROR"):
        assert noise not in last_screen, last_screen[-3000:]


def test_a_run_store_that_is_not_one_stops_the_start_with_a_sentence(tmp_path):
    """Before any engine starts: the file named, and the two ways on (another file, or none)."""
    damaged = tmp_path / "runs.sqlite3"
    damaged.write_text("my notes, not a database\n" * 20)
    done = app("--runs-db", str(damaged), timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    said = done.stderr.strip().splitlines()[-1]
    assert said == (f"error: cannot keep runs in {damaged}: {damaged} is not a run store: it is not a SQLite database "
                    "(file is not a database). Choose another file with --runs-db PATH, or start with --no-store to "
                    "keep runs in each tab's memory only."), said
    assert "Traceback" not in done.stderr and "engine start" not in done.stderr
    # the first screen speaks of the product: vLLM's and torch's import noise is filtered at its source
    assert "Triton" not in done.stderr + done.stdout and "FutureWarning" not in done.stderr + done.stdout
    assert damaged.read_text() == "my notes, not a database\n" * 20
    unset = app("--runs-db", "", timeout=300)  # `--runs-db "$DB"` with $DB unset: not the default store
    assert unset.returncode == 2 and unset.stderr.strip().splitlines()[-1] == (
        "python app.py: error: argument --runs-db: needs a file's path, and was given an empty one")


def test_a_proxys_path_is_a_path_or_an_address():
    """--root-path (or GRADIO_ROOT_PATH): the path a reverse proxy serves the app under; anything
    else is named before the engine starts."""
    import argparse

    from playground.commands.serve import _root_path

    assert _root_path("/playground/") == "/playground" and _root_path("") == ""
    assert _root_path("https://example.org/lab") == "https://example.org/lab"
    with pytest.raises(argparse.ArgumentTypeError, match="must start with / .* got 'playground'"):
        _root_path("playground")


def alive(process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_processes_the_benchmark_spawns_are_quiet_too():
    """vLLM's engine core is a spawned process, which runs the parent's main module again but
    never a package's __main__: ``python -m playground.bench`` names its quiet sibling for it, so
    the engine core's import noise stays off the terminal as the app's does."""
    script = ("import importlib, multiprocessing, runpy\n"
              "runpy.run_module('playground.bench.__main__', run_name='bench')\n"  # as -m runs it, but main()
              "child = multiprocessing.get_context('spawn').Process(target=importlib.import_module,\n"
              "                                                     args=('vllm.triton_utils',))\n"
              "child.start(); child.join(); print('child', child.exitcode)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "child 0" in done.stdout, done.stderr[-3000:]
    assert "Triton" not in done.stderr, done.stderr[-3000:]


def test_a_batch_whose_engine_core_dies_ends_by_itself_with_the_runs_that_finished(tmp_path):
    """vLLM's sync client, once its engine core has died, waits for an output for good (a batch hung
    until a second Ctrl-C): the batch must end by itself, exit 1, say why, and write the runs that
    finished. The engine core is killed as the first prompt's run is done."""
    import os
    import select
    import time

    import psutil

    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "runs.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Count to {k}.", "n": 2, "max_tokens": 40, "ignore_eos": True})
                               + "\n" for k in (3, 4, 5, 6)), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "app.py", "batch", str(prompts), "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    said, deadline = b"", time.monotonic() + 300

    def read_until(done) -> None:
        nonlocal said
        while not done():
            assert time.monotonic() < deadline, said[-3000:].decode(errors="replace")
            if select.select([proc.stderr], [], [], 0.5)[0]:
                said += os.read(proc.stderr.fileno(), 65536)

    try:
        read_until(lambda: b"1/4" in said or proc.poll() is not None)  # the progress bar: one prompt done
        assert proc.poll() is None, said[-3000:].decode(errors="replace")
        core = next(c for c in psutil.Process(proc.pid).children(recursive=True) if "EngineCore" in c.name())
        core.kill()
        deadline = time.monotonic() + 60  # by itself: no second signal
        read_until(lambda: proc.poll() is not None)
        said += proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    text = said.decode(errors="replace")
    assert proc.returncode == 1, text[-3000:]
    assert "the vLLM engine core has died; start the command again" in text and "Traceback" not in text, text[-3000:]
    runs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert 1 <= len(runs) <= 3 and runs[0]["request"]["prompt"] == "Count to 3.", len(runs)
    assert all(len(s["token_ids"]) == 40 for s in runs[0]["samples"])  # whole: it finished before the death


def test_a_model_that_is_not_there_is_one_sentence_before_any_engine_starts(tmp_path):
    prompts, missing = tmp_path / "prompts.jsonl", tmp_path / "no-such-model"
    prompts.write_text('{"prompt": "Hi"}\n', encoding="utf-8")
    done = app("batch", str(prompts), "--model", str(missing), timeout=300)
    said = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert said.startswith(f"error: the model {missing} cannot be loaded: ") and said.endswith(
        "Give --model a folder of a Hugging Face model, or a hub id this machine can reach (without --model, the "
        "default model)"), said


def test_a_page_stream_gradio_ends_after_a_reload_is_no_error_and_every_other_error_shows():
    """Gradio's event stream for a page that reloaded just as its run ended raises a 404 or a
    KeyError after its response began (a race of Gradio's own, about one reload in twelve): that
    traceback is dropped, and any other is kept. The stream is built in a file of Gradio's name,
    as the server's would be, because the race cannot be made to happen on demand."""
    import logging

    from playground.terminal import GoneStreams

    def record_of(source: str, filename: str) -> logging.LogRecord:
        space: dict = {}
        exec(compile(source, filename, "exec"), space)
        try:
            try:
                space["sse_stream"]()
            except Exception as inner:
                raise RuntimeError("Caught handled exception, but response already started.") from inner
        except RuntimeError as error:
            return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application",
                                     None, (type(error), error, error.__traceback__))

    gradio = "/site-packages/gradio/routes.py"
    assert not GoneStreams().filter(record_of("def sse_stream():\n    raise KeyError('a1b2c3')\n", gradio))
    gone = "class Gone(Exception):\n    status_code = 404\ndef sse_stream():\n    raise Gone()\n"
    assert not GoneStreams().filter(record_of(gone, gradio))
    assert GoneStreams().filter(record_of("def sse_stream():\n    raise ValueError('ours')\n", gradio))
    assert GoneStreams().filter(record_of("def sse_stream():\n    raise KeyError('x')\n", "/app/playground/ui.py"))
