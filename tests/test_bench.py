"""The benchmark's pure parts on hand-made numbers, and one tiny real run. No timing assertions:
the machines are shared and noisy, so only shapes, formats and arithmetic are checked."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from playground import bench
from playground.bench import Arrivals

HEADLINE = re.compile(r"^wrapper/native=(\d+\.\d\d|nan) ui/native=(\d+\.\d\d|nan) native/hf=(\d+\.\d\d|nan)$")


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
    assert bench.cache_figures(3, per_child, 409, 128) == {
        "aligned_prompt_tokens": 384, "children_cached_tokens": 288.0, "cache_hit": 0.75, "cache_source": "per child"}
    counted = Arrivals(times=[[1.0]] * 3, wall=1.0, cache_hits=768.0)
    figures = bench.cache_figures(3, counted, 409, 128)
    assert figures["children_cached_tokens"] == 384 and figures["cache_hit"] == 1.0
    assert math.isnan(bench.cache_figures(1, per_child, 409, 128)["cache_hit"])  # no children beyond 0


def rows(tps: dict[tuple[int, int, str], float]) -> pd.DataFrame:
    return pd.DataFrame([{"n": n, "repetition": rep, "path": path, "tokens_per_s": value, "ttft_ms": 1.0,
                          "itl_p50_ms": 1.0, "itl_p99_ms": 2.0, "cache_hit": math.nan,
                          "cpu_s_here": 0.5, "cpu_s_engine": 2.0}
                         for (n, rep, path), value in tps.items()])


MEASURED = rows({
    (16, 0, "native"): 40.0, (16, 0, "wrapper"): 40.0, (16, 0, "ui"): 36.0, (16, 0, "hf"): 10.0,
    (16, 1, "native"): 20.0, (16, 1, "wrapper"): 19.0, (16, 1, "ui"): 19.0, (16, 1, "hf"): 8.0,
    (16, 2, "native"): 30.0, (16, 2, "wrapper"): 27.0, (16, 2, "ui"): 30.0, (16, 2, "hf"): 10.0,
})


def test_ratios_are_paired_within_each_repetition():
    ratios = bench.paired_ratios(MEASURED)
    wrapper = ratios[ratios["name"] == "wrapper/native"].sort_values("repetition")["ratio"]
    assert list(wrapper) == pytest.approx([1.0, 0.95, 0.9])
    native_hf = ratios[ratios["name"] == "native/hf"].sort_values("repetition")["ratio"]
    assert list(native_hf) == pytest.approx([4.0, 2.5, 3.0])
    summary = bench.ratio_summary(ratios).set_index("name")
    assert summary.loc["ui/native", ["median", "min", "max"]].tolist() == pytest.approx([0.95, 0.9, 1.0])
    assert set(summary.index) == {"wrapper/native", "ui/native", "hf/native", "native/hf"}


def test_summary_has_median_min_max_per_n_and_path():
    summary = bench.summarize(MEASURED).set_index(["n", "path"])
    assert summary.loc[(16, "native"), ["tokens_per_s_median", "tokens_per_s_min", "tokens_per_s_max"]].tolist() \
        == [30.0, 20.0, 40.0]


def test_headline_is_exactly_the_three_goal_ratios_at_n16():
    line = bench.headline(bench.paired_ratios(MEASURED))
    assert line == "wrapper/native=0.95 ui/native=0.95 native/hf=3.00"
    assert HEADLINE.match(line)


def test_headline_says_nan_for_a_path_that_was_not_measured():
    without_ui = MEASURED[MEASURED["path"] != "ui"]
    assert bench.headline(bench.paired_ratios(without_ui)) == "wrapper/native=0.95 ui/native=nan native/hf=3.00"


def test_headline_n_is_16_when_measured_else_the_largest():
    assert bench.headline_n([1, 16, 32]) == 16
    assert bench.headline_n([1, 4]) == 4


def test_goals_compare_medians_with_their_targets():
    cache = pd.DataFrame([{"path": "wrapper", "n": 16, "cache_hit": 0.8},
                          {"path": "native", "n": 16, "cache_hit": 1.0}])
    table = bench.goals(bench.paired_ratios(MEASURED), cache).set_index("goal")
    met = table["met"].to_dict()
    assert met["wrapper/native >= 0.97 at every n"] == "NO"  # median 0.95
    assert met["ui/native >= 0.9 at n=16"] == "yes"
    assert met["native/hf >= 2 at n=16"] == "yes"
    assert met["children cache hit >= 0.9 at every n"] == "NO"
    assert table.loc["children cache hit >= 0.9 at every n", "where"] == "wrapper n=16"


def test_readable_table_puts_each_path_beside_its_ratio_to_native():
    table = bench.readable_table(bench.summarize(MEASURED), bench.paired_ratios(MEASURED))
    assert list(table["path"]) == ["native", "wrapper", "ui", "hf"]
    assert table.set_index("path").loc["native", "x native"] == 1.0
    assert table.set_index("path").loc["hf", "x native"] == pytest.approx(np.median([0.25, 0.4, 1 / 3]))


def test_quick_settings_measure_n16():
    from playground.commands.cli import PlaygroundParser

    parser = PlaygroundParser("bench", "", bench.add_bench_flags)
    args, engine_kwargs = parser.parse(["--quick", "--max-model-len", "1024"])
    settings = bench.settings_from_args(args)
    assert 16 in settings.ns and settings.paths == bench.PATHS
    assert engine_kwargs == {"max_model_len": 1024}
    args, _ = parser.parse(["--long-prompt", "--n", "4", "16", "--paths", "native", "hf"])
    settings = bench.settings_from_args(args)
    assert settings.prompt == bench.LONG_PROMPT and settings.cache_probes == 0
    assert settings.ns == (4, 16) and settings.paths == ("native", "hf")


def test_a_tiny_real_run_writes_its_files_and_ends_with_the_headline(host, app_url, tmp_path, capsys):
    """Every path once on the session's engine and app: n=1, 2 tokens, HF included."""
    # A cache probe prompt of two blocks and a tail keeps the probe short on a slow CPU.
    settings = bench.Settings(ns=(1,), max_tokens=2, repetitions=1, cache_probes=1,
                              cache_prompt=bench.LONG_PROMPT[:len(bench.LONG_PROMPT) * 3 // 4])
    report = bench.run_benchmark(settings, host, app_url, progress=False)
    assert sorted(report.rows["path"]) == sorted(bench.PATHS)
    assert (report.rows["tokens"] == 2).all()  # ignore_eos: every path made exactly max_tokens
    assert report.cache["cache_hit"].notna().all()  # the probe ran both fan-outs at n=2
    assert report.environment["kv_cache"]["blocks"] > 0
    assert report.environment["memory_app"]["rss_mib"] > 0
    bench.publish(report, tmp_path, "smoke")
    for name in ("measurements.csv", "summary.csv", "ratios.csv", "cache.csv", "results.json", "tokens_per_s.html"):
        assert (tmp_path / f"smoke-{name}").stat().st_size > 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert HEADLINE.match(last), last
