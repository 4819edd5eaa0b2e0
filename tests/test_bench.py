"""The benchmark's pure parts on hand-made numbers, and one tiny real run. No timing assertions:
the machines are shared and noisy, so only shapes, formats and arithmetic are checked."""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np
import pandas as pd
import pytest

from playground import bench
from playground.bench import Arrivals
from tests.session_start import STARTING

NUMBER = r"(\d+\.\d\d|nan)"
HEADLINE = re.compile(rf"^wrapper/native={NUMBER} ui/native={NUMBER} native/hf={NUMBER} native/limit={NUMBER} "
                      rf"rss_gib={NUMBER}$")


def test_schedule_interleaves_every_path_within_each_repetition():
    order = bench.schedule(["A", "B", "C", "D"], [1, 16], repetitions=2)
    assert [p for _, _, p in order] == list("ABCD" * 4)
    assert [(rep, n) for rep, n, _ in order[::4]] == [(0, 1), (0, 16), (1, 1), (1, 16)]


@pytest.mark.parametrize("prompt_len, expected", [(409, 384), (385, 384), (384, 256), (129, 128), (128, 0), (5, 0)])
def test_aligned_prompt_keeps_full_blocks_and_leaves_the_last_token_to_compute(prompt_len, expected):
    assert bench.aligned_prompt_tokens(prompt_len, 128) == expected


def test_measurement_from_arrival_times():
    # Two samples; the second's last token came alone, the first's tokens came one per output.
    arrivals = Arrivals(times=[[1.0, 2.0, 3.0], [1.0, 2.0, 4.0]], wall=4.0)
    row = bench.measurement("native", 2, 0, arrivals, prompt_tokens=20, block_size=128)
    assert row["tokens"] == 6
    assert row["tokens_per_s"] == pytest.approx(1.5)
    assert row["ttft_ms"] == pytest.approx(1000)
    gaps = np.array([1.0, 1.0, 1.0, 2.0])  # pooled over samples
    assert row["itl_p50_ms"] == pytest.approx(1000)
    assert row["itl_p99_ms"] == pytest.approx(np.percentile(gaps, 99) * 1000)
    assert math.isnan(row["cache_hit"])  # a 20-token prompt has no full block to share


def test_tokens_in_one_output_share_a_time_and_count_as_zero_latency():
    itl = bench.inter_token_latencies([[0.5, 0.5, 0.9], [0.5]])
    assert list(itl) == pytest.approx([0.0, 0.4])


def test_cache_hit_from_each_child_or_from_the_engine_counter():
    per_child = Arrivals(times=[[1.0]] * 3, wall=1.0, child_cached=[0, 384, 192])
    assert bench.cache_measures(3, per_child, 409, 128) == {
        "aligned_prompt_tokens": 384, "children_cached_tokens": 288.0, "cache_hit": 0.75, "cache_source": "per child"}
    counted = Arrivals(times=[[1.0]] * 3, wall=1.0, cache_hits=768.0)
    measures = bench.cache_measures(3, counted, 409, 128)
    assert measures["children_cached_tokens"] == 384 and measures["cache_hit"] == 1.0
    assert math.isnan(bench.cache_measures(1, per_child, 409, 128)["cache_hit"])  # no children beyond 0


def rows(tps: dict[tuple[int, int, str], float]) -> pd.DataFrame:
    return pd.DataFrame([{"n": n, "repetition": rep, "path": path, "tokens_per_s": value, "ttft_ms": 1.0,
                          "itl_p50_ms": 1.0, "itl_p99_ms": 2.0, "cache_hit": math.nan,
                          "cpu_s_here": 0.5, "cpu_s_engine": 2.0}
                         for (n, rep, path), value in tps.items()])


MEASURED = rows({
    (16, 0, "native"): 40.0, (16, 0, "wrapper"): 40.0, (16, 0, "ui"): 36.0, (16, 0, "hf"): 10.0, (16, 0, "limit"): 50,
    (16, 1, "native"): 20.0, (16, 1, "wrapper"): 19.0, (16, 1, "ui"): 19.0, (16, 1, "hf"): 8.0, (16, 1, "limit"): 50,
    (16, 2, "native"): 30.0, (16, 2, "wrapper"): 27.0, (16, 2, "ui"): 30.0, (16, 2, "hf"): 10.0, (16, 2, "limit"): 60,
})
APP = {"start_s": 28.0, "memory": {"rss_gib": 2.61, "pss_gib": 2.2},
       "runs": [{"run": "first after start", "n": 8, "first_visible_s": 9.0, "finished_s": 12.0, "updates_per_s": 4.0,
                 "longest_frame_gap_ms": 900.0, "long_tasks_ms": 3000.0},
                *[{"run": "warm", "n": n, "first_visible_s": first, "finished_s": 5.0, "updates_per_s": rate,
                   "longest_frame_gap_ms": gap, "long_tasks_ms": 100.0}
                  for n, first, rate, gap in [(32, 0.8, 12.0, 100.0), (32, 1.0, 13.0, 120.0), (256, 1.5, 3.0, 300.0)]]],
       }
BUNDLES = [{"output_kind": kind, "logprobs": logprobs, "n": 16, "bytes_per_token": size}
           for kind, logprobs, size in [("CUMULATIVE", 0, 19.0), ("DELTA", 0, 18.0), ("FINAL_ONLY", 0, 61.0),
                                        ("DELTA", 5, 115.0)]]


def test_ratios_are_paired_within_each_repetition():
    ratios = bench.paired_ratios(MEASURED)
    wrapper = ratios[ratios["name"] == "wrapper/native"].sort_values("repetition")["ratio"]
    assert list(wrapper) == pytest.approx([1.0, 0.95, 0.9])
    native_hf = ratios[ratios["name"] == "native/hf"].sort_values("repetition")["ratio"]
    assert list(native_hf) == pytest.approx([4.0, 2.5, 3.0])
    summary = bench.ratio_summary(ratios).set_index("name")
    assert summary.loc["ui/native", ["median", "min", "max"]].tolist() == pytest.approx([0.95, 0.9, 1.0])
    assert set(summary.index) == {"wrapper/native", "ui/native", "hf/native", "native/hf", "native/limit"}
    assert summary.loc["native/limit", "median"] == pytest.approx(0.5)


def test_summary_has_median_min_max_per_n_and_path():
    summary = bench.summarize(MEASURED).set_index(["n", "path"])
    assert summary.loc[(16, "native"), ["tokens_per_s_median", "tokens_per_s_min", "tokens_per_s_max"]].tolist() \
        == [30.0, 20.0, 40.0]


def test_headline_is_exactly_the_goal_ratios_at_n16_and_the_apps_memory():
    line = bench.headline(bench.paired_ratios(MEASURED), {"app": APP})
    assert line == "wrapper/native=0.95 ui/native=0.95 native/hf=3.00 native/limit=0.50 rss_gib=2.61"
    assert HEADLINE.match(line)
    # Without the app started, the memory is this process's engine and UI.
    assert bench.headline(bench.paired_ratios(MEASURED), {"memory_app": {"rss_mib": 2048}}).endswith("rss_gib=2.00")


def test_headline_says_nan_for_a_path_that_was_not_measured():
    without_ui = MEASURED[MEASURED["path"] != "ui"]
    assert bench.headline(bench.paired_ratios(without_ui)) == \
        "wrapper/native=0.95 ui/native=nan native/hf=3.00 native/limit=0.50 rss_gib=nan"


def test_headline_n_is_16_when_measured_else_the_largest():
    assert bench.headline_n([1, 16, 32]) == 16
    assert bench.headline_n([1, 4]) == 4


def test_goals_compare_medians_with_their_targets():
    cache = pd.DataFrame([{"path": "wrapper", "n": 16, "cache_hit": 0.8},
                          {"path": "native", "n": 16, "cache_hit": 1.0}])
    table = bench.goals(bench.paired_ratios(MEASURED), cache, {"app": APP}).set_index("goal")
    met = table["met"].to_dict()
    assert met["native/limit >= 0.6 at n=16"] == "NO"  # median 0.5
    assert met["wrapper/native >= 0.97 at n=16"] == "NO"  # median 0.95
    assert met["ui/native >= 0.95 at n=16"] == "yes"
    assert met["native/hf >= 2 at n=16"] == "yes"
    assert met["children cache hit >= 0.9 at every n"] == "NO"
    assert table.loc["children cache hit >= 0.9 at every n", "where"] == "wrapper n=16"
    # Browser goals read the warm runs only (the first run after start is measured on its own).
    assert met["first visible token, warm (s) < 1 at every n"] == "NO"  # n=256: 1.5 s
    assert table.loc["first visible token, warm (s) < 1 at every n", "where"] == "n=256"
    assert met["page updates per second >= 8 at n=32"] == "yes"  # median 12.5
    assert met["page updates per second >= 4 at n=256"] == "NO" and met["longest frame gap (ms) < 250 at n=256"] == "NO"
    assert met["app resident memory (GiB) <= 2.5"] == "NO" and met["start to a working page (s) <= 30"] == "yes"
    assert met["bundle bytes per sampled token <= 60"] == "n/a"  # no bundles measured
    with_bundles = bench.goals(bench.paired_ratios(MEASURED), cache, {"app": APP, "bundles": BUNDLES})
    bundle = with_bundles.set_index("goal").loc["bundle bytes per sampled token <= 60"]
    assert (bundle["measured"], bundle["where"], bundle["met"]) == (61.0, "FINAL_ONLY, n=16", "NO")  # logprobs aside
    assert bench.goals(bench.paired_ratios(MEASURED), cache)["met"].tolist().count("n/a") == 7  # no app measured


def test_browser_summary_keeps_the_first_run_after_start_apart():
    summary = bench.browser_summary(pd.DataFrame(APP["runs"])).set_index(["run", "n"])
    assert summary.loc[("first after start", 8), "first_visible_s"] == 9.0
    assert summary.loc[("warm", 32), "first_visible_s"] == pytest.approx(0.9)


def test_the_limit_multiplies_exactly_the_checkpoints_matrices(model_path):
    """The decode step's matmuls, from the model's config, cover every 2-D weight of the checkpoint
    once (the tied embedding as the logits projection)."""
    import json
    import struct

    STARTING.imports()
    from transformers import AutoConfig

    from playground.bench.limit import decode_shapes

    with open(f"{model_path}/model.safetensors", "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    matrices = sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__" and len(t["shape"]) == 2)
    layer, layers, head = decode_shapes(AutoConfig.from_pretrained(model_path))
    assert layers * sum(i * o for i, o in layer) + head[0] * head[1] == matrices


def test_readable_table_puts_each_path_beside_its_ratio_to_native():
    table = bench.readable_table(bench.summarize(MEASURED), bench.paired_ratios(MEASURED))
    assert list(table["path"]) == ["native", "wrapper", "ui", "hf", "limit"]
    assert table.set_index("path").loc["native", "x native"] == 1.0
    assert table.set_index("path").loc["hf", "x native"] == pytest.approx(np.median([0.25, 0.4, 1 / 3]))
    alone = MEASURED[MEASURED["path"] == "native"]  # --paths native: nothing to pair
    assert list(bench.readable_table(bench.summarize(alone), bench.paired_ratios(alone))["x native"]) == [1.0]


def test_quick_settings_measure_n16():
    from playground.commands.cli import PlaygroundParser

    parser = PlaygroundParser("bench", "", bench.add_bench_flags)
    args, engine_kwargs = parser.parse(["--quick", "--max-model-len", "1024", "--cpu-threads", "1"])
    settings = bench.settings_from_args(args)
    assert 16 in settings.ns and settings.paths == bench.PATHS and settings.app
    assert engine_kwargs == {"max_model_len": 1024, "cpu_threads": 1}
    assert not bench.settings_from_args(parser.parse(["--no-app"])[0]).app
    args, _ = parser.parse(["--long-prompt", "--n", "4", "16", "--paths", "native", "hf"])
    settings = bench.settings_from_args(args)
    assert settings.prompt == bench.LONG_PROMPT and settings.cache_probes == 0
    assert settings.ns == (4, 16) and settings.paths == ("native", "hf")


@pytest.mark.slow
def test_a_tiny_real_run_writes_its_files_and_ends_with_the_headline(host, app_url, tmp_path, capsys):
    """Every path once on the session's engine and app: n=1, 2 tokens, HF and the limit included."""
    # A cache probe prompt of two blocks and a tail keeps the probe short on a slow CPU.
    settings = bench.Settings(ns=(1,), max_tokens=2, repetitions=1, cache_probes=1,
                              cache_prompt=bench.LONG_PROMPT[:len(bench.LONG_PROMPT) * 3 // 4])
    report = bench.run_benchmark(settings, host, app_url, progress=False)
    assert sorted(report.rows["path"]) == sorted(bench.PATHS)
    assert (report.rows["tokens"] == 2).all()  # ignore_eos: every path made exactly max_tokens
    assert report.cache["cache_hit"].notna().all()  # the probe ran both fan-outs at n=2
    assert report.environment["kv_cache"]["blocks"] > 0
    assert report.environment["memory_app"]["rss_mib"] > 0
    threads = report.environment["engine_threads"]
    assert report.environment["hf"]["threads"] == report.environment["limit"]["threads"] == threads >= 1
    bench.publish(report, tmp_path, "smoke")
    for name in ("measurements.csv", "summary.csv", "ratios.csv", "cache.csv", "results.json", "tokens_per_s.html"):
        assert (tmp_path / f"smoke-{name}").stat().st_size > 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert HEADLINE.match(last), last

    # The same report against itself as the baseline: every shared figure side by side, at 1.00.
    bench.publish(report, tmp_path, "again", baseline=tmp_path / "smoke-results.json")
    out = capsys.readouterr().out
    table = out.split("Against the baseline")[1]
    assert "native tok/s, n=1" in table and "hf tok/s, n=1" in table
    shared = bench.against_baseline(*(json.loads((tmp_path / f"{label}-results.json").read_text())
                                      for label in ("again", "smoke")))
    assert len(shared) >= len(bench.PATHS) and (shared["this/baseline"] == 1.0).all()
    assert HEADLINE.match(out.rstrip("\n").splitlines()[-1])


@pytest.mark.slow
def test_the_page_measures_from_a_real_chromium(app_url):
    """One short run on the session's app through headless Chromium: the measures the browser path
    reports are there and consistent (what they amount to is the benchmark's business)."""
    from playwright.sync_api import sync_playwright

    from playground.bench.browser import chromium_path

    assert chromium_path(), "the browser tests need Chromium (make test installs it)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        try:
            row = bench.page_run(browser, app_url, n=2, seed=5, max_tokens=8)
        finally:
            browser.close()
    assert 0 < row["first_visible_s"] <= row["finished_s"]
    assert row["longest_frame_gap_ms"] > 0 and row["long_tasks_ms"] >= 0
    assert math.isnan(row["updates_per_s"]) or row["updates_per_s"] > 0
    memory = bench.app_memory(os.getpid())  # this process and the session's engine core
    assert memory["rss_sum_gib"] > memory["rss_gib_by_process"]["app"] > 0
    # Shared pages (torch's libraries in both processes) are counted once; a little slack for pages
    # that came and went between the two readings.
    assert 0 < memory["rss_gib"] < memory["rss_sum_gib"] * 1.02
