"""Sweeps: the request and its limits, the command line (one real ``python app.py sweep`` as a
subprocess: it starts an engine of its own, so only once), Ctrl-C, the page's streaming sweep on
the session's engine, and the Sweep and Compare tabs' handlers on hand-built runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import gradio as gr
import pandas as pd
import pytest

from playground.analysis import parse_extractor
from playground.commands import exits
from playground.commands import sweep as command
from playground.commands.progress import summary_text
from playground.errors import InvalidRequest
from playground.request import Limits
from playground.run import Run
from playground.sampling.sweep_request import MAX_SWEEP_VALUES, SweepRequest
from tests.helpers import ctrl_c_after_the_first_run
from tests.test_report import make_run, sweep_runs

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits(max_n=8)


def refused(param, values, **settings) -> str:
    with pytest.raises(InvalidRequest) as caught:
        SweepRequest.from_user(param, values, **{"prompt": "Hi", **settings}).check(LIMITS)
    return str(caught.value)


# --- the request --------------------------------------------------------------------------------

def test_values_are_coerced_like_the_setting_and_every_run_keeps_the_seeds():
    sweep = SweepRequest.from_user("Temperature", "0.3, 0.7;1 1.3", prompt="Hi", n=3, seed=5, temperature=0.0)
    sweep.check(LIMITS)  # the base's own temperature (0, greedy at n=3) is not one of the runs
    assert (sweep.param, sweep.values) == ("temperature", [0.3, 0.7, 1.0, 1.3])
    requests = sweep.requests()
    assert [r.temperature for r in requests] == [0.3, 0.7, 1.0, 1.3]
    assert {(r.seed, r.n, r.prompt) for r in requests} == {(5, 3, "Hi")}
    assert SweepRequest.from_user("top_k", ["-1", 5, "50.0"], prompt="Hi").values == [-1, 5, 50]

    blank = SweepRequest.from_user("min_p", [0.0, 0.1], prompt="Hi")
    blank.fix_seed(source=lambda below: 1234)
    assert {r.seed for r in blank.requests()} == {1234}  # one drawn seed for the whole sweep
    seeds = SweepRequest.from_user("seed", "1 100", prompt="Hi", n=2)
    seeds.fix_seed()
    assert [r.seed for r in seeds.requests()] == [1, 100]
    run = seeds.mark(make_run([[1]]), 1)
    assert run.request["sweep"] == {"param": "seed", "value": 100, "position": 1, "values": [1, 100]}


def test_limits_and_bad_values_are_refused_with_a_sentence():
    assert refused("temperature", [0.1 * k for k in range(1, MAX_SWEEP_VALUES + 2)]) == (
        f"a sweep runs at most {MAX_SWEEP_VALUES} values, one full run each; got {MAX_SWEEP_VALUES + 1}: "
        "split it into several sweeps")
    assert refused("temperature", [0.5, 1.0], n=9) == "n must be between 1 and 8 (--max-n), got 9"
    assert refused("temperature", "") == "the sweep has no values: give at least one temperature"
    assert refused("temperature", "0.5 0.50") == "temperature=0.5 appears twice in the sweep: each value runs once"
    assert refused("temperature", "0.7 0", n=4).startswith(
        "with temperature=0.0 (value 2 of the sweep): greedy sampling (temperature 0) with n=4")
    assert refused("temperature", "0.3 0.7", prompt="") == "the prompt is empty: type some text to sample from"
    assert refused("top_p", "0.5 1.5") == "with top_p=1.5 (value 2 of the sweep): top_p must be in (0, 1], got 1.5"
    assert refused("seed", "1 -3") == ("with seed=-3 (value 2 of the sweep): seed must be a whole number from 0 to "
                                       "2**63-1 (9223372036854775807), got -3")
    with pytest.raises(InvalidRequest, match="temperature must be a number, got 'warm'"):
        SweepRequest.from_user("temperature", "0.5 warm", prompt="Hi")
    with pytest.raises(InvalidRequest, match="a sweep varies one of temperature, top_p, .*, got 'max_tokens'"):
        SweepRequest.from_user("max_tokens", "8 16", prompt="Hi")


def test_command_line_refuses_before_an_engine_starts(capsys):
    from tests.session_start import STARTING

    STARTING.imports()  # vLLM's parser imports from transformers: not while the engines' thread does
    for param, argv, said in (
        ("seed", ["--values", *map(str, range(1, 14))], "a sweep runs at most 12 values"),
        ("temperature", ["--values", "0.5", "1.0", "--n", "300"], "n must be between 1 and 256 (--max-n), got 300"),
        ("temperature", ["--values", "0.5", "1.0", "--temperature", "0.5"], "leave out --temperature"),
        ("temperature", ["--values", "0.5", "--answer", "regex:("], "--answer: the pattern '(' does not compile"),
    ):
        assert command.main(["--prompt", "Hi", "--param", param, *argv]) == exits.USAGE
        assert said in capsys.readouterr().err
    # vLLM's parser reads "-0.5" as a dotted config flag; the values reach the sweep whole.
    parser = command.build_parser()
    args, _ = parser.parse(command.join_values(["--prompt", "Hi", "--param", "presence_penalty",
                                                "--values", "-0.5", "0", "1e-1", "--n", "2"]))
    assert command.sweep_from_args(args).values == [-0.5, 0.0, 0.1]


# --- the command, for real ----------------------------------------------------------------------

@pytest.mark.slow
def test_sweep_command_end_to_end(tmp_path):
    """3 temperatures at n=4: 3 bundles in order, the same seeds in each, the temperatures as given."""
    out = tmp_path / "sweep.jsonl"
    command_line = [sys.executable, "app.py", "sweep", "--prompt", "Once upon a time", "--param", "temperature",
                    "--values", "0.5", "1.0", "1.5", "--n", "4", "--seed", "7", "--max-tokens", "6",
                    "--logprobs", "1", "--out", str(out), "--max-model-len", "1024", "--answer", "first-line"]
    done = subprocess.run(command_line, cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert done.returncode == exits.OK, done.stderr[-3000:]
    runs = [Run.from_json(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r.request["temperature"] for r in runs] == [0.5, 1.0, 1.5]
    assert [r.request["sweep"]["position"] for r in runs] == [0, 1, 2]
    assert all(r.request["sweep"]["values"] == [0.5, 1.0, 1.5] for r in runs)
    assert [[s.seed for s in r.samples] for r in runs] == [[7, 8, 9, 10]] * 3
    for run in runs:
        assert run.status == "finished" and run.n == 4 and run.engine["max_model_len"] == 1024
        assert all(s.finish_reason and 0 < len(s.token_ids) <= 6 and s.logprobs for s in run.samples)
    assert "wrote 3 of 3 run(s)" in done.stderr and "base seed 7" in done.stderr
    table = done.stdout.splitlines()
    assert table[0].split()[:3] == ["temperature", "status", "seeds"] and len(table) == 4
    assert table[0].split()[-3:] == ["majority", "vote_share", "settled_at"]  # --answer: each value's majority
    assert table == summary_text(command.summary_frame(runs, parse_extractor("first-line"))).splitlines()
    assert [row.split()[0] for row in table[1:]] == ["0.5", "1.0", "1.5"]  # 1.0 is a number, not a "yes"
    assert sorted(os.listdir(tmp_path)) == ["sweep.jsonl"]  # no temp file left


def test_ctrl_c_mid_sweep_writes_the_runs_that_finished(sync_engine, tmp_path, monkeypatch):
    from playground.backends.sync import SyncRunner

    runner = SyncRunner(sync_engine)
    sweep = SweepRequest.from_user("temperature", "0.8 1.0 1.2", prompt="Tell a long story:", n=2, seed=3,
                                   max_tokens=16, ignore_eos=True)
    ctrl_c_after_the_first_run(monkeypatch, runner)  # a few steps into the second value's run
    out = tmp_path / "sweep.jsonl"
    assert command.execute(runner, sweep, out, progress=False) == exits.INTERRUPTED
    assert sync_engine.get_num_unfinished_requests() == 0 and runner.running == 0
    runs = [Run.from_json(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r.request["sweep"]["value"], r.status) for r in runs] == [(0.8, "finished")]


# --- the page's sweep ---------------------------------------------------------------------------

def test_the_page_streams_a_sweep_and_stop_keeps_what_finished(backend):
    from playground.backends.live import LiveRun, State
    from playground.ui.running import Action
    from playground.ui.sweep_tab import stream_sweep

    sweep = SweepRequest.from_user("temperature", "0.6 1.2 1.5", prompt="The sea is", n=2, seed=4, max_tokens=12,
                                   ignore_eos=True)

    async def go() -> tuple[list[Run], Run | None, list[int], Action]:
        action = Action("Sweep", [await LiveRun.plan(backend, request, sweep.labels(k))
                                  for k, request in enumerate(sweep.requests())])
        finished, stopped, sizes = [], None, []
        async for finished, live in stream_sweep(backend, action.runs, interval=0.02):
            sizes.append(len(finished))
            if live is not None:
                assert live.request["sweep"]["position"] == len(finished)  # the row being filled
            if len(finished) == 2 and live is not None and stopped is None:
                stopped = live
                await action.stop_and_wait()  # what Stop does: the run in progress is aborted
        return finished, stopped, sizes, action

    runs, stopped, sizes, action = asyncio.run(go())
    assert sizes == sorted(sizes) and sizes.count(1) > 1, "each row fills as its run finishes, the next one streams"
    assert [(r.request["temperature"], r.status) for r in runs] == [(0.6, "finished"), (1.2, "finished")]
    assert [[s.seed for s in r.samples] for r in runs] == [[4, 5], [4, 5]]
    assert stopped.status == "aborted" and stopped.request["temperature"] == 1.5
    assert [r.state for r in action.runs] == [State.FINISHED, State.FINISHED, State.STOPPED] and not action.going
    assert asyncio.run(backend.num_unfinished()) == 0


def test_sweep_tab_draws_a_saved_sweep_and_refuses_a_bad_one(tmp_path):
    from types import SimpleNamespace

    from playground.ui import sweep_tab

    page = SimpleNamespace(export_dir=tmp_path)  # all the tab's drawing reads of the page

    asked = []

    def measures(run: Run) -> dict:
        asked.append(run.request["request_id"])
        return {"vendi": run.n - 0.5}

    with gr.Blocks():
        tab = sweep_tab.declare(measures=measures, chart=["distinct_samples", "vendi"])
    update = sweep_tab.show(tab, tmp_path, sweep_runs())
    assert update[tab.table]["value"]["vendi"].tolist() == [2.5] * 3  # the set measures' hook
    assert sorted(asked) == ["run-0", "run-1", "run-2"]  # once per run for the chart, the table and the report
    assert [trace.name for trace in update[tab.chart].data] == ["distinct_samples", "vendi"]
    assert "temperature=1.5" in update[tab.grid] and update[tab.status].startswith("✔ finished · 3 of 3")
    # the chart, then each run's divergence tree and sample graph
    assert update[tab.report]["interactive"] and update[tab.bundles]["interactive"]  # declared without a file
    assert Path(update[tab.report]["value"]).read_text(encoding="utf-8").count("Plotly.newPlot(") == 1 + 2 * 3
    assert len(Path(update[tab.bundles]["value"]).read_text(encoding="utf-8").splitlines()) == 3
    assert sweep_tab.show(tab, tmp_path, sweep_runs()[:1], stopped=True)[tab.status].startswith("■ stopped · 1 of 3")
    # Answers read another way redraw the runs at hand: the majority's vote share joins the chart.
    redrawn = asyncio.run(sweep_tab.redraw(tab, page, sweep_runs(), "normalized", ""))
    assert set(redrawn) == {tab.chart, tab.table, tab.report, tab.bundles}
    assert [t.name for t in redrawn[tab.chart].data] == ["distinct_samples", "vendi", "vote_share"]
    assert redrawn[tab.table]["value"]["vote share"].tolist() == [0.667, 0.333, 0.333]  # each column in words
    assert redrawn[tab.table]["value"]["vendi"].tolist() == [2.5] * 3  # the tab's own measures stay
    assert "<th>vote share</th>" in Path(redrawn[tab.report]["value"]).read_text(encoding="utf-8")
    assert asyncio.run(sweep_tab.redraw(tab, page, [], "normalized", "")) == {}
    # A reference typed after the sweep ran: pass@1 and pass@n join (answers read as the whole text
    # when no way is chosen), and the bundles carry it.
    assert "pass@1" not in redrawn[tab.table]["value"]
    answer = sweep_runs()[1].samples[0].text
    graded = asyncio.run(sweep_tab.redraw(tab, page, sweep_runs(), "none", "", reference=f" {answer} "))
    assert graded[tab.table]["value"]["pass@1"].tolist()[0] == round(2 / 3, 3), graded[tab.table]["value"]
    bundles = Path(graded[tab.bundles]["value"]).read_text(encoding="utf-8").splitlines()
    assert {Run.from_json(line).request["reference"] for line in bundles} == {answer}
    # "regular expression" picked: the tab waits for the pattern, and one that cannot work is a
    # warning with the chart left as it was, not an error over the tab
    assert asyncio.run(sweep_tab.redraw(tab, page, sweep_runs(), "regex", " ")) == {}
    with pytest.warns(UserWarning, match="the pattern 'no group' has 0 groups"):
        assert asyncio.run(sweep_tab.redraw(tab, page, sweep_runs(), "regex", "no group")) == gr.skip()
    assert "vote share" not in sweep_tab.show(tab, tmp_path, sweep_runs())[tab.table]["value"]  # none read
    settings = {"prompt": "Hi", "use_chat_template": False, "n": 4, "seed": "", "output_kind": "DELTA",
                "mode": "wrapper", "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "max_tokens": 8,
                "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "stop": "",
                "logprobs": 0, "ignore_eos": False}
    with pytest.raises(gr.Error, match="at most 12 values"):
        sweep_tab.sweep_from_ui(settings, "temperature", " ".join(str(k / 10) for k in range(1, 14)), LIMITS)
    sweep = sweep_tab.sweep_from_ui(settings, "top_p", "0.5, 0.9", LIMITS)
    assert [r.top_p for r in sweep.requests()] == [0.5, 0.9] and sweep.base.output_kind == "DELTA"


def test_a_summary_says_yes_and_no_for_truths_only_never_for_the_numbers_one_and_zero():
    frame = pd.DataFrame({"line": [1, 2], "finished": [True, False], "distinct_2": [1.0, 0.0],
                          "pass_at_1": [None, 0.0], "tied": pd.array([True, None], dtype=object)})
    rows = [row.split() for row in summary_text(frame).splitlines()]
    assert rows == [["line", "finished", "distinct_2", "pass_at_1", "tied"], ["1", "yes", "1.0", "—", "yes"],
                    ["2", "no", "0.0", "0.0", "—"]]  # what is not there said as a report says it


def test_compare_tab_starts_with_a_branch_and_its_parent_else_the_run_before_and_keeps_a_choice():
    from playground.ui.compare_tab import refresh

    first, parent, other = (make_run([[1, 2]], rid) for rid in ("run-1", "run-p", "run-o"))
    branch = make_run([[3]], "run-b")
    branch.request["branch"] = {"run": "run-p", "sample": 0, "position": 1, "forced_token_id": None}
    history = [first, parent, other, branch]
    values = lambda a, b: (a.get("value"), b.get("value"))  # noqa: E731
    assert values(*refresh(history, [], None, branch)) == ("history:run-p", "history:run-b")
    assert values(*refresh(history, [], None, other)) == ("history:run-b", "history:run-o")  # the newest other
    assert values(*refresh(history[:3], [], None, other)) == ("history:run-p", "history:run-o")
    kept = refresh(history, [], None, branch, "history:run-1", "history:run-b")  # a choice with the run on screen
    assert values(*kept) == (None, None) and len(kept[0]["choices"]) == 4
    assert values(*refresh(history, [], None, branch, "history:run-1", "history:run-o")) == (
        "history:run-p", "history:run-b")  # a new run on screen: its pair again
    assert values(*refresh([first], [], None, first)) == (None, "history:run-1")  # one run: B, waiting for an A


def test_a_branch_is_compared_with_its_parent_behind_the_tokens_it_was_sent_after():
    """A branch's samples hold only the new tokens: against its parent, each is lined up behind the
    parent sample's first k tokens and the forced token, so "diverged at token k" means token k."""
    from playground import analysis
    from playground.ui.compare_tab import comparison

    parent = make_run([[1, 2, 3, 4], [1, 2, 5, 6], [1, 2, 3, 4]], "run-p")
    branch = make_run([[4, 2], [4]], "run-b")
    branch.request["branch"] = {"run": "run-p", "sample": 0, "position": 2, "forced_token_id": 9,
                                "forced_text": " X"}
    a, b, note = analysis.aligned(parent, branch)
    assert a is parent and [s.token_ids for s in b.samples] == [[1, 2, 9, 4, 2], [1, 2, 9, 4]]
    assert b.samples[0].text == "The sea X calm sea" and b.samples[0].token_texts[2] == " X"
    assert "B is a branch of the other run from its sample #0 at token 2" in note and "forced token" in note
    assert [s.token_ids for s in branch.samples] == [[4, 2], [4]], "the branch's own record is left as it was"
    flipped_a, flipped_b, again = analysis.aligned(branch, parent)  # either side: the branch is lined up
    assert flipped_b is parent and flipped_a.samples[1].token_ids == [1, 2, 9, 4] and again.startswith("A is")
    headline, pairs, *_ = comparison(parent, branch)
    assert pairs["verdict"].tolist() == ["diverged at token 2", "diverged at token 2", "only in run A"]
    assert "so that token positions line up" in headline
    unrelated = make_run([[1]], "run-o")
    assert analysis.aligned(parent, unrelated) == (parent, unrelated, None)


def test_compare_tab_takes_an_opened_file_and_compares_two_runs(tmp_path):
    from playground.ui import compare_tab
    from playground.ui.history_tab import read_upload

    asked = []
    with gr.Blocks():
        tab = compare_tab.declare(tmp_path, measures=lambda run: asked.append(run.request["request_id"]) or {})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(sweep_runs()[0].to_json() + "\n{\"prompt\": \"hi\"}\n", encoding="utf-8")
    with pytest.raises(gr.Error, match="bad.jsonl, line 2: this is not a run bundle"):
        read_upload(str(bad))
    good = tmp_path / "sweep.jsonl"
    good.write_text("".join(r.to_json() + "\n" for r in sweep_runs()), encoding="utf-8")
    history = [make_run([[1, 2, 3]], "run-h")]
    update = compare_tab.add(tab, read_upload(str(good)), history, [], None)
    uploads, a, b = update[tab.uploads], update[tab.a], update[tab.b]
    assert len(uploads) == 3
    assert a["choices"][0][0].startswith("history · run-h")
    assert a["value"] == "upload:run-2" and b["value"] == "upload:run-0"
    again = compare_tab.add(tab, read_upload(str(good)), history, uploads, None)
    assert len(again[tab.a]["choices"]) == 4, "a run is listed once"
    headline, pairs, changed, measures, columns, report = compare_tab.compare(tab, a["value"], b["value"], history,
                                                                              uploads, None)
    assert "0 of 3 samples identical" in headline and "temperature 1.5 → 0.5" in headline
    assert pairs["value"]["verdict"].tolist() == ["diverged at token 1", "diverged at token 2", "diverged at token 0"]
    assert "compare-sample-2" in columns and report["interactive"] and Path(report["value"]).exists()
    assert changed["value"].to_dict("records") == [{"setting": "temperature", "A": "1.5", "B": "0.5"}]
    assert measures["value"].set_index("figure").loc["distinct samples", "A"] == 3
    assert sorted(asked) == ["run-0", "run-2"]  # each run's measures once, for the table and the report
    assert "A and B are the same run" not in headline
    assert compare_tab.compare(tab, a["value"], a["value"], history, uploads, None)[0].startswith(
        "ℹ️ A and B are the same run (run-2): pick another for one of them.")
    assert "vote share" not in measures["value"]["figure"].tolist()  # "none": no answers read
    answered = compare_tab.compare(tab, a["value"], b["value"], history, uploads, None, "normalized", "")[3]["value"]
    by_figure = answered.set_index("figure")
    # A's three samples all differ: no majority, said so; B's two of three agree
    assert by_figure.loc["majority answer", "A"] == "no majority: all 3 answers differ"
    assert by_figure.loc["majority answer", "B"] == "the sea is calm"
    assert by_figure.loc["vote share", "B - A"] == pytest.approx(0.333, abs=1e-3)
    with pytest.warns(UserWarning, match="the pattern 'x' has 0 groups"):  # said, the comparison on screen stays
        assert compare_tab.compare(tab, a["value"], b["value"], history, uploads, None, "regex", "x") == gr.skip()
    with pytest.warns(UserWarning, match="Pick two runs first"):  # a toast: nothing on the tab is marked "Error"
        assert compare_tab.compare(tab, None, b["value"], history, uploads, None) == gr.skip()


def test_a_table_on_the_page_says_yes_and_no_for_truths_and_keeps_its_numbers():
    """As a report's cells and the command line's summary say them: the Sweep, Compare and What if
    tables on the page once said "true" where the report of the same runs said "yes"."""
    frame = pd.DataFrame({"majority_tied": [True, False], "n": [1, 0], "vote_share": [0.5, 1.0]})
    from playground.analysis import frame_in_words

    shown = frame_in_words(frame)
    assert shown["answers tied"].tolist() == ["yes", "no"]
    assert shown["n"].tolist() == [1, 0] and shown["vote share"].tolist() == [0.5, 1.0]
