"""Sweeps and reports read back from hand-built runs (no engine): the sweep table and grid, the
self-contained HTML report, and reading bundle files. Two runs side by side: tests/test_compare.py."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from playground import analysis as A
from playground.bundles import parse_bundles, read_bundles, read_runs
from playground.errors import InvalidBundle
from playground.run import BUNDLE_VERSION, Run, Sample, TokenLogprob

WORDS = {1: "The", 2: " sea", 3: " is", 4: " calm", 5: " wild", 6: " grey", 7: ".", 8: " <script>alert(1)</script>"}


def sample(index: int, ids: list[int], seed: int | None = None, probs: list[float] | None = None) -> Sample:
    texts = [WORDS[t] for t in ids]
    logprobs = [TokenLogprob(t, math.log(p)) for t, p in zip(ids, probs)] if probs else None
    return Sample(index, 10 + index if seed is None else seed, "".join(texts), list(ids), texts,
                  token_times=[0.1 * (k + 1) for k in range(len(ids))], logprobs=logprobs, finish_reason="length")


def make_run(seqs: list[list[int]], request_id: str = "run-a", sweep: dict | None = None, probs=None,
             **request) -> Run:
    samples = [sample(i, ids, probs=probs[i] if probs else None) for i, ids in enumerate(seqs)]
    head = {"prompt": "Tell me about the sea", "n": len(seqs), "seed": 10, "mode": "wrapper", "temperature": 1.0,
            "output_kind": "CUMULATIVE", "request_id": request_id, **request}
    if sweep is not None:
        head["sweep"] = sweep
    return Run(request=head, samples=samples, status="finished", wall_time=1.0)


def sweep_runs() -> list[Run]:
    """Temperatures 0.5, 1.0, 1.5, given out of order: at 1.0 sample 1 parts from 0.5's at token 2,
    at 1.5 sample 0 parts at token 1 and sample 2 is new words."""
    values = [0.5, 1.0, 1.5]
    seqs = [
        [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 6]],
        [[1, 2, 3, 4], [1, 2, 5, 7], [1, 2, 3, 6]],
        [[1, 6, 3, 4], [1, 2, 5, 7], [5, 5]],
    ]
    probs = [[[0.9] * 4, [0.8] * 4, [0.7] * 4], [[0.6] * 4, [0.5] * 4, [0.4] * 4], [[0.3] * 4, [0.2] * 4, [0.1] * 2]]
    runs = [make_run(s, f"run-{k}", {"param": "temperature", "value": v, "position": k, "values": values},
                     probs=p, temperature=v) for k, (v, s, p) in enumerate(zip(values, seqs, probs))]
    return [runs[2], runs[0], runs[1]]


# --- the sweep ----------------------------------------------------------------------------------

def test_sweep_table_one_row_per_value_in_order_with_min_and_max_across_samples():
    table = A.sweep_table(sweep_runs(), measures=lambda run: {"extra": run.n * 10, "note": "text"})
    assert table["value"].tolist() == [0.5, 1.0, 1.5]
    assert table["distinct_samples"].tolist() == [2, 3, 3]
    assert table["identical_samples"].tolist() == ["0=1", "none", "none"]
    assert table["mean_tokens"].tolist() == [4.0, 4.0, pytest.approx(10 / 3)]
    assert (table["mean_tokens_min"].tolist(), table["mean_tokens_max"].tolist()) == ([4, 4, 2], [4, 4, 4])
    assert table["mean_prob"].tolist() == pytest.approx([0.8, 0.5, 0.2])
    assert table["mean_prob_min"].tolist() == pytest.approx([0.7, 0.4, 0.1])
    assert table["extra"].tolist() == [30, 30, 30] and table["seeds"].tolist() == ["10…12"] * 3


def test_a_chosen_extractor_adds_each_values_majority_answer_and_vote_share():
    extra = A.with_answers(lambda run: {"extra": 1}, "normalized")
    table = A.sweep_table(sweep_runs(), extra)
    # 0.5: two of three say "The sea is calm"; 1.0 and 1.5: three different texts, so no majority.
    assert table["majority"].tolist() == ["the sea is calm", "no majority: all 3 answers differ",
                                          "no majority: all 3 answers differ"]
    assert table["majority_tied"].tolist() == [False, True, True] and table["extra"].tolist() == [1, 1, 1]
    assert table["vote_share"].tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3])  # a tie: each tied answer's share
    chart = A.sweep_chart(sweep_runs(), extra)
    assert "vote_share" in [t.name for t in chart.data]
    axes = {trace.name: chart.layout["yaxis" + trace.yaxis[1:]] for trace in chart.data}
    assert list(axes["vote_share"].range) == [0, 1.05]  # a share: from 0 to 1, never below 0
    assert all(axis.rangemode == "nonnegative" or list(axis.range) == [0, 1.05] for axis in axes.values())
    nothing = A.sweep_table(sweep_runs(), A.with_answers(None, "last-number"))
    assert nothing["majority"].tolist() == ["no majority: no sample gave an answer"] * 3  # no number in any sample
    assert nothing["vote_share"].isna().all()
    assert A.with_answers(None, None) is None
    with pytest.raises(A.InvalidExtractor, match=r"\(\["):
        A.with_answers(None, "regex:([")  # refused when chosen, before a run is read


def text_run(texts: list[str], position: int, value: float) -> Run:
    samples = [Sample(i, 10 + i, text, [i + 1]) for i, text in enumerate(texts)]
    return Run(request={"prompt": "Name a colour", "n": len(texts), "seed": 10, "mode": "wrapper",
                        "request_id": f"run-{position}", "temperature": value,
                        "sweep": {"param": "temperature", "value": value, "position": position,
                                  "values": [0.3, 0.7, 1.3]}},
               samples=samples, status="finished", wall_time=1.0)


def majority_sweep() -> list[Run]:
    """Hand-made sets of 8: a clear majority (settled after 4), two answers tied with 3 votes each,
    every answer different (neither settles)."""
    return [text_run(["red", "red", "red", "red", "blue", "red", "green", "blue"], 0, 0.3),
            text_run(["red", "blue", "red", "blue", "green", "red", "blue", "green"], 1, 0.7),
            text_run(["the pacific ocean is approximately the same size as the atlantic ocean", "red", "blue",
                      "green", "yellow", "purple", "orange", "black"], 2, 1.3)]


def test_a_sweeps_majority_is_said_in_words_when_there_is_none_and_its_numbers_stay_numbers():
    table = A.sweep_table(majority_sweep(), A.with_answers(None, "normalized"))
    assert table["majority"].tolist() == ["red", "no majority: 2 answers tie with 3 votes each",
                                          "no majority: all 8 answers differ"]
    assert table["majority_tied"].tolist() == [False, True, True]
    assert table["vote_share"].tolist() == [5 / 8, 3 / 8, 1 / 8]  # a tie: each tied answer's share, for the chart
    assert table["settled_at"].tolist()[0] == 4 and table["settled_at"].iloc[1:].isna().all()  # numbers, for the chart
    assert {"vote_share", "settled_at"} <= {t.name for t in A.sweep_chart(majority_sweep(), table=table).data}
    # ``chars`` cuts a majority answer, never the sentence that says there is none
    cut = A.sweep_table(majority_sweep(), A.with_answers(None, "normalized", chars=2))["majority"].tolist()
    assert cut == ["r…", "no majority: 2 answers tie with 3 votes each", "no majority: all 8 answers differ"]


def test_a_sweep_table_for_people_says_a_majority_that_did_not_settle():
    table = A.sweep_table(majority_sweep(), A.with_answers(None, "normalized"))
    shown = A.sweep_table_for_people(table)
    assert shown["settled_at"].tolist() == [4, "not within 8", "not within 8"]  # not 4.0, not a blank
    assert table["settled_at"].iloc[1:].isna().all()  # the table given is left as it is
    assert shown.drop(columns="settled_at").equals(table.drop(columns="settled_at"))
    without = A.sweep_table(majority_sweep())  # no answers read: nothing to say
    assert A.sweep_table_for_people(without).equals(without)
    page = A.sweep_report(majority_sweep(), table=table)
    assert page.count("not within 8") == 2 and "no majority: all 8 answers differ" in page
    assert "(tie)" not in page


def test_measures_side_by_side_and_a_runs_report_say_a_majority_that_did_not_settle():
    settled, unsettled = majority_sweep()[0], majority_sweep()[2]
    answers = A.with_answers(None, "normalized")
    side = A.measures_side_by_side(settled, unsettled, answers).set_index("figure")
    assert side.loc["settled at sample"].tolist()[:2] == [4, "not within 8"]  # and no B - A: B did not settle
    assert math.isnan(side.loc["settled at sample", "B - A"])  # each figure named in words
    assert side.loc["majority answer"].tolist()[:2] == ["red", "no majority: all 8 answers differ"]
    assert side.loc["vote share", "B - A"] == pytest.approx(1 / 8 - 5 / 8)
    assert A.measures_for_people({"settled_at": None, "vote_share": 0.5}, 8) == {"settled_at": "not within 8",
                                                                                 "vote_share": 0.5}
    assert A.measures_for_people({"vote_share": 0.5}, 8) == {"vote_share": 0.5}
    page = A.run_report(unsettled, answers, "normalized")
    assert "not within 8" in page and "no majority: all 8 answers differ" in page


def test_sweep_chart_draws_each_measure_against_the_value_with_whiskers():
    fig = A.sweep_chart(sweep_runs(), measures=lambda run: {"vendi": float(run.n), "vendi_min": 1.0,
                                                           "vendi_max": 3.0})
    by_name = {trace.name: trace for trace in fig.data}
    assert list(by_name) == ["mean_tokens", "mean_prob", "distinct_samples", "vendi"]
    assert list(by_name["mean_prob"].x) == [0.5, 1.0, 1.5]
    assert list(by_name["mean_prob"].error_y.arrayminus) == pytest.approx([0.1, 0.1, 0.1])
    assert list(by_name["vendi"].error_y.array) == pytest.approx([0.0, 0.0, 0.0])
    axes = [fig.layout[name] for name in fig.layout if name.startswith("xaxis")]
    assert len(axes) == 4 and all(axis.showticklabels for axis in axes)  # each panel says its values
    chosen = A.sweep_chart(sweep_runs(), names=["distinct_samples"])
    assert [t.name for t in chosen.data] == ["distinct_samples"]
    assert "no finished run" in A.sweep_chart([]).layout.annotations[0].text


def test_sweep_chart_draws_the_values_along_their_scale_and_top_k_off_after_the_largest():
    """Swept in any order, a chart is read along its axis: 1.2 then 0.2 is drawn 0.2 to 1.2 with
    each value's own figures, and top_k 0 (off: every token) is no k smaller than 1."""
    apart = [[1, 2], [1, 3], [1, 4]]
    runs = [make_run(apart[:n], f"run-{k}", {"param": "temperature", "value": v, "position": k}, temperature=v)
            for k, (v, n) in enumerate([(1.2, 3), (0.2, 1)])]
    line = {t.name: t for t in A.sweep_chart(runs).data}["distinct_samples"]
    assert (list(line.x), list(line.y)) == ([0.2, 1.2], [1, 3])
    runs = [make_run(apart[:n], f"run-{k}", {"param": "top_k", "value": v, "position": k}, top_k=v)
            for k, (v, n) in enumerate([(1, 1), (0, 2), (5, 3)])]
    fig = A.sweep_chart(runs, names=["distinct_samples"])
    assert (list(fig.data[0].x), list(fig.data[0].y)) == (["1", "5", "0 (off)"], [1, 3, 2])
    assert fig.layout.xaxis.type == "category"


def test_grid_follows_each_seed_down_its_column_and_names_the_first_diverging_token():
    grid = A.sweep_grid(sweep_runs())
    assert [label for label, _ in grid] == ["temperature=0.5", "temperature=1.0", "temperature=1.5"]
    top, middle, bottom = (cells for _, cells in grid)
    assert all(c.note() == "" for c in top)
    assert [c.diverges_at for c in middle] == [None, 2, None]
    assert middle[1].note() == "≠ above at token 2: “·is” → “·wild”"
    assert middle[0].note() == "= above"
    assert [c.diverges_at for c in bottom] == [1, None, 0]
    assert bottom[0].words == "The grey is calm"
    html = A.grid_html(sweep_runs())
    assert html.count("<tr>") == 4 and "seed 11" in html and "≠ above at token 0" in html


def test_grid_of_a_seed_sweep_names_each_cells_seed():
    runs = [make_run([[1, 2]], f"run-{k}", {"param": "seed", "value": s, "position": k}) for k, s in enumerate([1, 7])]
    runs[1].samples[0].seed = 7
    html = A.grid_html(runs)
    assert "seed 7" in html and "<th>#0</th>" in html  # no seed in the header: it differs per row
    assert A.sweep_chart(runs).layout.xaxis.type == "category"


# --- the report ---------------------------------------------------------------------------------

class Parsed(HTMLParser):
    """Counts what a report is made of; an unclosed table or div would leave depth above zero."""

    def __init__(self):
        super().__init__()
        self.scripts, self.sources, self.depth, self.ids = [], [], 0, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self.scripts.append(attrs)
        for key in ("src", "href"):
            if attrs.get(key):
                self.sources.append(attrs[key])
        if tag in ("div", "table"):
            self.depth += 1
        if attrs.get("id"):
            self.ids.append(attrs["id"])

    def handle_endtag(self, tag):
        if tag in ("div", "table"):
            self.depth -= 1


def parsed(page: str) -> Parsed:
    parser = Parsed()
    parser.feed(page)
    parser.close()
    return parser


def check_self_contained(page: str) -> Parsed:
    p = parsed(page)
    assert p.depth == 0
    assert p.sources == [] and not any("src" in s for s in p.scripts), "no external script, style or link"
    assert page.count("Plotly.newPlot(") == sum(i.startswith("figure-") for i in p.ids)
    assert len(re.findall(r"/\*! For license information|plotly\.js v\d", page)) >= 1  # plotly.js, inlined
    assert page.count("<script type='text/javascript'>") == 1  # ... and only once
    return p


def test_run_report_is_one_page_with_the_columns_diff_tree_and_charts():
    run = make_run([[1, 2, 3, 4], [1, 2, 8], [1, 6]], probs=[[0.5] * 4, [0.5] * 3, [0.5] * 2])
    page = A.run_report(run, measures=lambda r: {"vendi": 2.5})
    p = check_self_contained(page)
    # tree, graph, answer groups, heatmap, uncertainty, agreement, timing
    assert sum(i.startswith("figure-") for i in p.ids) == 7
    assert "Answer groups (normalized)" in page
    assert "Sample graph" in page and "never meet again" in page  # the three samples part and never meet
    assert {"sample-0", "sample-1", "sample-2"} <= set(p.ids)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page  # a sample's text is text
    assert "vendi" in page and "diverges at token 2" in page


def test_the_pages_files_read_answers_as_the_set_tab_does_and_name_a_replay(tmp_path):
    """The Export tab's report groups the answers with the Set tab's extractor as it stands (a bad
    pattern: the whole texts, and a warning; the set CSV is refused naming the Set tab); a replay's
    files say whose run it plays in their names."""
    from gradio import Error

    from playground.ui import export_tab

    run = make_run([[1, 2, 3, 4], [1, 2, 5], [1, 6]])
    report = Path(export_tab.report_file(tmp_path, run, "regex", r"(sea|grey)")).read_text(encoding="utf-8")
    assert "Answer groups (regex:(sea|grey))" in report and "majority vote share 66.7%" in report
    with pytest.raises(Error, match="The Set tab's answers cannot be read: the pattern '\\(unclosed' does not compile"):
        export_tab.set_file(tmp_path, run, "regex", "(unclosed")
    with pytest.warns(UserWarning, match="the report groups the whole texts instead"):  # the report is written
        unread = Path(export_tab.report_file(tmp_path, run, "regex", "(unclosed")).read_text(encoding="utf-8")
    assert "Answer groups (normalized)" in unread
    run.request["replay"] = {"of": "run-0001", "pace": "x4"}
    names = [Path(write(tmp_path, run)).name for write in (export_tab.bundle_file, export_tab.tokens_file,
                                                            export_tab.report_file, export_tab.set_file)]
    assert names == ["run-a-replay-of-run-0001.json", "run-a-replay-of-run-0001.csv",
                     "run-a-replay-of-run-0001.html", "run-a-replay-of-run-0001-set.csv"]
    # Two sessions showing one run (a run link) export it their own way: neither overwrites the other's file.
    mine, theirs = (export_tab.set_file(tmp_path, run, "regex", pattern) for pattern in ("(1)", "(2)"))
    assert mine != theirs and Path(mine).name == Path(theirs).name
    assert Path(mine).read_text(encoding="utf-8") != Path(theirs).read_text(encoding="utf-8")


def test_downloads_do_not_pile_up_a_stopped_apps_folder_and_old_files_are_removed(tmp_path, monkeypatch):
    """Gradio serves its own copy of a download, so the app's file is kept ten minutes only; the
    export folders of the app's processes that are gone (a kill -9) go at the next start, while a
    running process's folder stays."""
    import os
    import subprocess
    import sys
    import tempfile

    from playground.ui import downloads

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"{downloads.EXPORTS_PREFIX}{int(gone.stdout)}-abc"
    running = tmp_path / f"{downloads.EXPORTS_PREFIX}{os.getppid()}-def"
    for folder in (stale, running):
        (folder / "one").mkdir(parents=True)
    folder = downloads.export_folder()
    assert folder.parent == tmp_path and folder.name.startswith(f"{downloads.EXPORTS_PREFIX}{os.getpid()}-")
    assert not stale.exists() and running.exists()

    old = downloads.download_path(folder, "old.json")
    old.write_text("{}")
    past = old.parent.stat().st_mtime - downloads.KEEP_S - 1
    os.utime(old.parent, (past, past))
    recent = downloads.download_path(folder, "recent.json")
    recent.write_text("{}")
    newest = downloads.download_path(folder, "newest.json")
    assert not old.parent.exists() and recent.exists() and newest.parent.is_dir()


def test_comparison_and_sweep_reports_and_the_choice_between_them():
    a, b = make_run([[1, 2, 3]], "run-a"), make_run([[1, 2, 5]], "run-b", temperature=0.7)
    page = A.comparison_report(a, b)
    check_self_contained(page)
    assert "run-a" in page and "0 of 1 samples identical" in page and "temperature" in page
    assert "before temperature" not in page  # no logprobs: no probability to say anything of

    runs = sweep_runs()
    for run in runs:
        run.engine["logprobs_mode"] = "processed_logprobs"
    page = A.sweep_report(runs)
    p = check_self_contained(page)
    assert "the distribution the samples were drawn from" in page  # what the chart's mean p is
    assert sum(i.startswith("figure-") for i in p.ids) == 7  # the sweep chart, one tree and one graph per value
    assert page.index("temperature=0.5") < page.index("temperature=1.0") < page.index("temperature=1.5")
    assert "sweep-grid" in page

    assert A.report_for(runs).count("class='sweep-grid'") == 1
    assert "side by side" in A.report_for([a, b])
    other = make_run([[1, 2]], "run-q", prompt="What is 2+2?")  # another prompt: no pairs to compare
    two = A.report_for([a, other])
    assert "side by side" not in two and "2 runs" in two, two[:2000]
    many = A.report_for([a, b, make_run([[1]], "run-c")], extractor="last-number")
    assert "3 runs" in many  # each run's answers, read the way asked, and figures: not only a run alone's
    assert many.count("<h3>Answer groups (last-number)</h3>") == 3 and many.count("<h3>Figures</h3>") == 3
    assert A.report_for([a]).startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match="no run to report"):
        A.report_for([])


def test_a_sweep_report_reads_each_runs_measures_once_and_takes_a_table_its_caller_has():
    seen = []
    page = A.sweep_report(sweep_runs(), measures=lambda run: seen.append(run.request["request_id"]) or {"extra": 1})
    assert sorted(seen) == ["run-0", "run-1", "run-2"]  # the chart and the table share one sweep_table
    table = A.sweep_table(sweep_runs(), measures=lambda run: {"extra": 7})
    assert "extra" in page and ">7<" in A.sweep_report(sweep_runs(), table=table)
    assert [t.name for t in A.sweep_chart(sweep_runs(), table=table).data][-1] == "extra"
    a, b = make_run([[1, 2, 3]], "run-a"), make_run([[1, 2, 5]], "run-b")
    assert A.comparison_html(a, b, frame=A.pair_frame(a, b)) == A.comparison_html(a, b)


class Tables(HTMLParser):
    """A report's tables as rows of {column: the cell's text}, in the order they stand."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[dict]] = []
        self.heads: list[str] = []
        self.row: list[str] | None = None
        self.text: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
            self.heads = []
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th"):
            self.text = ""

    def handle_data(self, data):
        if self.text is not None:
            self.text += data

    def handle_endtag(self, tag):
        if tag == "th":
            self.heads.append(self.text.strip())
            self.text = None
        elif tag == "td":
            self.row.append(self.text.strip())
            self.text = None
        elif tag == "tr" and self.row:
            self.tables[-1].append(dict(zip(self.heads, self.row)))
            self.row = None


def tables(page: str) -> list[list[dict]]:
    parser = Tables()
    parser.feed(page)
    return parser.tables


def test_no_missing_value_reaches_a_report_as_na_nan_none_or_a_blank():
    """Identical pairs (no first divergence), a sample with no partner, samples with no answer and
    figures there are none of: every table of every report says "—", never pandas' "<NA>", "nan" or
    Python's "None", and the row says why (the verdict, "(no answer)" with its samples' seeds)."""
    from playground.analysis.report import MISSING, cell

    a = make_run([[1, 2, 3, 4], [1, 2, 5], [1, 6], [1, 7]], "run-a")
    b = make_run([[1, 2, 3, 4], [1, 2, 3], [1, 7], [1, 7], [1, 5]], "run-b", temperature=0.7)
    a.samples[3].seed = 99  # no partner of its seed in B
    read = "regex:(sea|grey)"  # "The." and "The ·wild" give no answer
    pages = {"by index": A.comparison_report(a, b, A.with_answers(None, read), read),
             "by seed": A.comparison_report(a, b, A.with_answers(None, read), read, by="seed"),
             "run": A.run_report(make_run([[1, 2, 3, 4], [1, 7], [1, 5]], reference="sea", use_chat_template=False),
                                 A.set_measures_hook(read), read),
             "runs": A.runs_report([a, b, make_run([], "run-empty")], extractor=read),
             "sweep": A.sweep_report(sweep_runs())}
    for name, page in pages.items():
        cells = [text for table in tables(page) for row in table for text in row.values()]
        assert cells and (MISSING in cells or name == "sweep"), name  # the sweep's runs miss nothing
        bad = [text for text in cells if text in ("", "nan", "NaN", "None", "<NA>", "NaT", "True", "False")
               or "<NA>" in text]  # and a truth in words, as the command line's summary says it
        assert bad == [], f"{name}: {bad}"
    pairs = next(t for t in tables(pages["by index"]) if t and "parts at token" in t[0])  # headed in words
    assert [(r["verdict"], r["parts at token"], r["A's token there"]) for r in pairs][:2] == [
        ("identical", MISSING, MISSING), ("diverged at token 2", "2", "·wild")]
    assert (pairs[-1]["verdict"], pairs[-1]["A's sample"], pairs[-1]["A's seed"]) == ("only in run B", MISSING, MISSING)
    by_seed = next(t for t in tables(pages["by seed"]) if t and "parts at token" in t[0])
    assert {(r["verdict"], r["B's sample"]) for r in by_seed if r["B's sample"] == MISSING} == {
        ("only in run A", MISSING)}
    groups = next(t for t in tables(pages["run"]) if t and "example" in t[0])
    assert groups[-1] == {"group": MISSING, "answer": "(no answer)", "size": "2", "share": "0.667",
                          "samples": "1, 2", "seeds": "11, 12", "example": MISSING}
    assert [cell(v) for v in (None, float("nan"), A.pair_frame(a, a)["first_divergence"][0])] == [MISSING] * 3
    assert (cell(0.5), cell(3), cell("none"), cell(" "), cell([1])) == ("0.500", 3, "none", MISSING, [1])
    assert (cell(True), cell(False), cell(1), cell(0)) == ("yes", "no", 1, 0)  # by type: a count of 1 is no "yes"
    request = next(t for t in tables(pages["run"]) if t and "setting" in t[0])
    assert {r["setting"]: r["value"] for r in request}["use_chat_template"] == "no"


def test_the_report_draws_its_charts_in_chromium_with_no_network(tmp_path):
    """Offline for real: Chromium opens the file with the network off and every chart draws."""
    from tests.test_browser import CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make test` (it installs it) or set PLAYGROUND_CHROMIUM")
    from playwright.sync_api import sync_playwright

    path = tmp_path / "sweep.html"
    path.write_text(A.report_for(sweep_runs()), encoding="utf-8")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(offline=True)
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            page.wait_for_function("document.querySelectorAll('.plotly-graph-div .main-svg').length >= 4",
                                   timeout=30_000)
            assert page.locator(".sweep-grid tr").count() == 4
            assert errors == []
            # A run's report fits a laptop's width: its long token rows wrap, its wide tables scroll.
            from playground.backends.synthetic import synthetic_run

            wide = tmp_path / "run.html"
            wide.write_text(A.run_report(synthetic_run(6, 300, seed=3, events=True)), encoding="utf-8")
            page.set_viewport_size({"width": 1280, "height": 800})
            page.goto(wide.as_uri())
            page.wait_for_function("document.querySelectorAll('.plotly-graph-div .main-svg').length >= 4",
                                   timeout=30_000)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        finally:
            browser.close()


# --- reading bundle files -----------------------------------------------------------------------

def test_reads_one_indented_bundle_or_one_bundle_per_line(tmp_path):
    runs = sweep_runs()
    one = tmp_path / "run.json"
    one.write_text(runs[0].to_json(indent=1), encoding="utf-8")
    assert [r.request["request_id"] for r in read_runs(one)] == ["run-2"]
    lines = tmp_path / "sweep.jsonl"
    lines.write_text("\n".join(r.to_json() for r in runs) + "\n\n", encoding="utf-8")
    found, errors = read_bundles(lines)
    assert errors == [] and [x.line for x in found] == [1, 2, 3]
    assert [x.run.request["sweep"]["value"] for x in found] == [1.5, 0.5, 1.0]


def test_a_file_that_is_not_bundles_is_refused_with_a_sentence_naming_the_line(tmp_path):
    good = sweep_runs()[0].to_json()
    newer = json.dumps({**json.loads(good), "bundle_version": BUNDLE_VERSION + 1})
    found, errors = parse_bundles("\n".join([good, "{not json", '{"prompt": "hi"}', newer, "[1, 2]"]))
    assert [x.line for x in found] == [1]
    assert [e.line for e in errors] == [2, 3, 4, 5]
    assert str(errors[0]).startswith("line 2: not valid JSON")
    assert "line 3: this is not a run bundle" in str(errors[1])
    assert f"line 4: this bundle has version {BUNDLE_VERSION + 1}, newer than" in str(errors[2])

    bad = tmp_path / "mixed.jsonl"
    bad.write_text(f"{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(InvalidBundle, match=r"^mixed.jsonl, line 2: not valid JSON"):
        read_runs(bad)
    bad.write_text(f'{good}\n{{"request": "cut sho\n', encoding="utf-8")  # the parser's "starting at", said once
    with pytest.raises(InvalidBundle, match=r"^mixed.jsonl, line 2: not valid JSON \(Unterminated string starting "
                                            r"at column 13\)"):
        read_runs(bad)
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(InvalidBundle, match=r"^empty.jsonl: the file is empty"):  # the file named once
        read_runs(tmp_path / "empty.jsonl")
    for name, content in (("empty.json", b""), ("binary.bin", b"\x89PNG\r\n\x1a\n\xff"),
                          ("list.json", b"[\n1\n]")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InvalidBundle) as caught:
            read_runs(tmp_path / name)
        assert "bundle" in str(caught.value) and "Traceback" not in str(caught.value)
    with pytest.raises(InvalidBundle, match="cannot read .*missing.json"):
        read_runs(tmp_path / "missing.json")
    damaged = json.loads(good)
    damaged["samples"][0]["token_ids"] = None
    damaged["samples"][0]["unknown_field"] = 1
    with pytest.raises(InvalidBundle, match="^damaged.json: this run bundle is damaged"):
        (tmp_path / "damaged.json").write_text(json.dumps(damaged, indent=1), encoding="utf-8")
        read_runs(tmp_path / "damaged.json")


def test_a_cut_indented_bundle_is_one_error_at_the_line_where_it_breaks():
    text = sweep_runs()[0].to_json(indent=1)
    lines = text.splitlines()
    cut = len(lines) - 3  # within the samples, one a line
    found, errors = parse_bundles("\n".join(lines[:cut]))
    assert found == [] and len(errors) == 1
    assert errors[0].line == cut and "cut short" in errors[0].message


def test_a_report_names_a_local_model_by_its_folder_and_a_hub_model_by_its_id():
    """A report is read by others: no path of this machine in it (the bundle keeps the whole path)."""
    local, hub = make_run([[1, 2]], "run-local"), make_run([[1, 2]], "run-hub")
    local.engine = {"model": "/root/.cache/vllm-playground/models/SmolLM2-135M-Instruct", "device": "CPU"}
    hub.engine = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "device": "CPU"}
    for run, name in ((local, "SmolLM2-135M-Instruct"), (hub, "HuggingFaceTB/SmolLM2-135M-Instruct")):
        request = next(t for t in tables(A.run_report(run)) if t and "setting" in t[0])
        settings = {r["setting"]: r["value"] for r in request}
        assert (settings["model"], settings["device"]) == (name, "CPU")
        assert "/root/" not in re.sub(r"<script.*?</script>", "", A.run_report(run), flags=re.S)
