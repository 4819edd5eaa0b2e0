"""Robustness at the edges of ordinary use: runs whose prompts do not fit in one engine step (they
killed vLLM's CPU engine core), patterns a person types, files a person opens, and a soak of
several clients at once. Real engine, real server, real command line."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from playground.analysis import InvalidExtractor, group_answers, parse_extractor
from playground.backends.conditions import engine_conditions
from playground.backends.engine import generators_rewind, plan_engine
from playground.backends.remote.server import engine_death_hint
from playground.bundles import ReadLimits, read_runs
from playground.errors import InvalidBundle
from playground.run import Run, Sample
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
# 116 tokens: at n=32 with the chat template, the prompts need more than one step's 2,048 tokens.
SUMMARIZE = ("Summarize the following notes in two sentences. "
             + "The committee met on Tuesday to review the budget, the hiring plan and the new office lease. " * 4)
CATASTROPHIC = "((?:a|a)*)x"  # exponential in Python's re on 'aaaa...!'
TOO_SLOW = "((?:.*a){20})!b"  # too slow even for the regex package on 400 a's


def test_seeded_prompts_are_prefilled_whole_on_a_cpu(model_path, engine):
    """The root cause, checked where it lives (a CPU torch.Generator cannot be rewound), and the
    plan that avoids it: chunked prefill off, a step's budget of at least one full context."""
    assert not generators_rewind("cpu"), "torch can rewind CPU generators now: the whole-prefill plan can go"
    plan = plan_engine(model_path)
    scheduler = plan.config.scheduler_config
    assert not scheduler.enable_chunked_prefill
    assert scheduler.max_num_batched_tokens >= plan.config.model_config.max_model_len
    assert plan.describe()["prefill"].startswith("whole prompts")
    recorded = engine_conditions(engine)  # the session's engine: what every bundle records
    assert recorded["chunked_prefill"] is False and recorded["max_num_batched_tokens"] >= 2048


def test_a_persons_chunked_prefill_wins_with_a_warning_that_names_the_crash(model_path, caplog):
    with caplog.at_level(logging.WARNING, logger="playground.backends.engine"):
        plan = plan_engine(model_path, enable_chunked_prefill=True)
    assert plan.config.scheduler_config.enable_chunked_prefill
    assert plan.describe()["prefill"].startswith("chunked")
    assert "CPU Generator does not use offset" in caplog.text


@pytest.mark.slow
def test_runs_that_split_a_prompt_across_steps_finish_and_the_engine_never_restarts(client, backend, host):
    """n=32 with a 116-token chat prompt, and n=--max-n with a short one, through /sample: both
    killed the engine core before the plan prefilled every prompt whole."""
    restarts = backend.info()["restarts"]
    for prompt, n in ((SUMMARIZE, 32), ("Name a colour.", backend.limits.max_n)):
        run = Run.from_json(client.predict(prompt=prompt, n=n, seed=3, use_chat_template=True,
                                           max_tokens=6, output_kind="FINAL_ONLY", api_name="/sample"))
        assert run.status == "finished" and run.n == n
        assert [s.seed for s in run.samples] == list(range(3, 3 + run.n))
        assert all(s.finish_reason in ("stop", "length") for s in run.samples)
        assert run.engine["conditions"]["chunked_prefill"] is False
    assert run.request["num_prompt_tokens"] < 40 and prompt == "Name a colour."
    assert backend.info()["restarts"] == restarts and backend.info()["up"] and not host.engine.errored


def _bundle(tmp_path: Path, texts: list[str]) -> Path:
    run = Run(request={"request_id": "run-patterns", "prompt": "p", "mode": "wrapper", "output_kind": "FINAL_ONLY"},
              samples=[Sample(i, i, text=t) for i, t in enumerate(texts)], status="finished")
    path = tmp_path / "run.json"
    path.write_text(run.to_json(), encoding="utf-8")
    return path


# A bound on a hang, not a speed: with Python's re the catastrophic pattern never returned. The
# command's own start (its imports) is most of it, and may share the machine with engines starting.
HANG_S = 30


def _analyze(path: Path, pattern: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "app.py", "analyze", str(path), "--answer", f"regex:{pattern}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_a_catastrophic_pattern_ends_within_seconds_in_analyze(tmp_path):
    """The pattern that never returned with Python's re now answers at once (no sample has an
    answer); one that is too slow even for the regex package ends with a sentence naming it and the
    sample, within 5 s of the command's own start."""
    done, seconds = _analyze(_bundle(tmp_path, ["a" * 40 + "!", "the answer is 4"]), CATASTROPHIC)
    assert done.returncode == 0, done.stderr
    assert "no answer (regex:" in done.stdout and seconds < HANG_S
    done, seconds = _analyze(_bundle(tmp_path, ["a" * 400 + "!"] * 3), TOO_SLOW)
    assert done.returncode == 2, done.stderr
    assert f"the pattern {TOO_SLOW!r} took more than 2 s" in done.stderr and "sample 0" in done.stderr
    assert seconds < HANG_S  # the interpreter's start and imports, then at most the pattern's 2 s and its check


def test_a_pattern_being_matched_lets_other_threads_run():
    """The page serves every session from one process: while one visitor's pattern is matched, the
    others' handlers must go on (the regex package releases the GIL while it matches)."""
    run = Run(request={}, samples=[Sample(i, i, text="a" * 400 + "!") for i in range(3)])
    ticks, matching = [0], threading.Event()

    def other_session():
        matching.wait()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            ticks[0] += 1

    thread = threading.Thread(target=other_session)
    thread.start()
    matching.set()
    with pytest.raises(InvalidExtractor, match="took more than 2 s"):
        group_answers(run, parse_extractor(f"regex:{TOO_SLOW}"))
    thread.join()
    assert ticks[0] > 100_000, ticks  # held by the GIL, the other thread would barely have run


def test_files_over_the_readers_limits_are_refused_whole_with_a_sentence(tmp_path):
    one = Run(request={"request_id": "r"}, samples=[Sample(i, i, text="x") for i in range(5)]).to_json()
    lines = tmp_path / "runs.jsonl"
    lines.write_text((one + "\n") * 4, encoding="utf-8")
    assert len(read_runs(lines, ReadLimits(max_bundles=4, max_samples=5))) == 4
    for limits, says in ((ReadLimits(max_bytes=100), "MB, more than the"),
                         (ReadLimits(max_bundles=3), "holds 4 lines of bundles, more than the 3"),
                         (ReadLimits(max_samples=4), "a run of 5 samples, more than the 4")):
        with pytest.raises(InvalidBundle, match=says):
            read_runs(lines, limits)


def test_a_remote_servers_engine_death_names_the_split_prefill_crash():
    assert "--no-enable-chunked-prefill" in engine_death_hint(
        "EngineCore encountered an issue. See stack trace (above) for the root cause.")
    assert "CPU Generator does not use offset" in engine_death_hint("RuntimeError: CPU Generator does not use offset")
    assert engine_death_hint("the prompt is too long") == ""


@pytest.mark.slow
def test_a_short_soak_of_three_clients(backend, host):
    """Three clients through /sample for 30 s: prompts of 5 to 1,500 tokens with and without the
    chat template, n from 1 to --max-n, every mode and output_kind, a third of them cancelled
    mid-stream. No engine death, nothing left in the engine, every cancelled run's partial text
    kept by the server (aborted by its parent id), no call failed."""
    from playground.bench.soak import SoakPlan, WatchedBackend, run_soak
    from playground.ui import build_app, launch_app

    watched = WatchedBackend(backend)
    demo = build_app(watched)
    _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                           quiet=True)
    try:
        report = run_soak(url, watched, SoakPlan(seconds=30, clients=3, max_n=backend.limits.max_n, max_tokens=24,
                                                 seed=1))
    finally:
        demo.close()
    print("\n".join(report.lines()))
    assert report.ok, "\n".join(report.lines())
    # how many calls fit in 30 s is the machine's business (a call of n=98 on a long prompt may take
    # all of it on two cores): at least one of each way a call ends
    assert report.count("finished") >= 1 and report.count("cancelled") >= 1, report.lines()
    checked = [c for c in report.calls if c.outcome == "cancelled" and c.request_id]
    assert checked, "no cancelled call had started: nothing showed that partial text is kept"
    json.dumps([c.settings for c in report.calls])  # the calls can be replayed from the report
