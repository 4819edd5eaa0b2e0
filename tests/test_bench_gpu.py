"""The benchmark's GPU-pace parts (``--paced``, ``--cpu-per-token``): their arithmetic on hand-made
rows, and each measured once at a tiny size on real parts (the figures themselves are the
benchmark's business: no timing is asserted)."""

from __future__ import annotations

import argparse
import json
import math
import re

import pytest

from playground.bench import against_baseline, gpu
from playground.bench.cpu import engine_flags, in_process, medians, summary, with_ratios, without_source
from playground.bench.paced import PacedCase, measure_case
from tests.helpers import free_port
from tests.test_browser import browser  # noqa: F401  (the fixture)

CPU_ROWS = [{"path": path, "n": 64, "max_tokens": 128, "logprobs": lp, "tokens": 8192, "app_ms_per_token": ms,
             "engine_ms_per_token": 1.0, "app_cpu_s": ms * 8.192, "engine_cpu_s": 8.192}
            for path, lp, ms in [("vllm", 0, 0.02), ("wrapper", 0, 0.05), ("/sample", 0, 0.1), ("vllm", 5, 0.1),
                                 ("page", 5, 0.7)]]


def test_a_paced_case_is_read_from_its_flag_or_refused_with_a_sentence():
    assert gpu.paced_case("256x1000@10000") == PacedCase(256, 1000, 10_000.0)
    plain = gpu.paced_case("256x1000:0@10000")  # no logprobs: its own source and name
    assert plain == PacedCase(256, 1000, 10_000.0, 0) and plain.source == "synthetic:256x1000:0"
    assert plain.name.endswith("no logprobs") and PacedCase(4, 4, 5.0).source == "synthetic:4x4"
    for bad in ("256x1000", "0x10@5", "4x4@0", "fast", "4x4:21@5"):
        with pytest.raises(argparse.ArgumentTypeError, match="must look like 256x1000@10000"):
            gpu.paced_case(bad)
    parser = argparse.ArgumentParser()
    gpu.add_gpu_flags(parser)  # several cases after one flag (vLLM's parser warns of a flag given twice)
    assert parser.parse_args(["--paced-case", "4x4@5", "8x2@10"]).paced_cases == [PacedCase(4, 4, 5.0),
                                                                                 PacedCase(8, 2, 10.0)]
    assert parser.parse_args([]).paced_cases is None


def test_cpu_figures_are_ratios_to_vllms_own_path_on_the_same_request():
    rows = with_ratios(CPU_ROWS)
    ratio = {(r["path"], r["logprobs"]): r["ratio"] for r in rows}
    assert ratio["vllm", 0] == 1.0 and ratio["wrapper", 0] == pytest.approx(2.5) and ratio["page", 5] == \
        pytest.approx(7.0)
    assert summary(rows) == ("app_cpu_ms_per_token n64: vllm=0.020 wrapper=0.050(2.5x) /sample=0.100(5.0x); "
                             "n64+top5: vllm=0.100 page=0.700(7.0x)")
    drawn = [{**r, "browser_ms_per_token": 0.25} if r["path"] == "page" else r for r in rows]
    assert summary(drawn).endswith("page=0.700(7.0x) page_browser=0.250")  # Chromium's share of the cores
    paced = [{**r, "paced_core": 10000.0} for r in rows]  # at a GPU's pace: the line says so
    # ... and the source's own CPU, counted on vLLM's own path, is taken out of every path's
    sourced = without_source([{**r, "source_cpu_s": 0.0410} if r["path"] == "vllm" else r for r in CPU_ROWS])
    assert [round(r["app_ms_per_token"], 4) for r in sourced] == [0.02, 0.045, 0.095, 0.1, 0.695]
    assert [r["source_cpu_s"] for r in sourced] == [0.041] * 5  # the counted rows keep their own figure
    assert summary(paced).startswith("app_cpu_ms_per_token[paced_core=10000] n64: vllm=0.020")
    # An app path's ratio is over vLLM's own path measured just before it, where it was.
    beside = with_ratios([{**r, "vllm_beside_ms_per_token": 0.025} if r["path"] == "/sample" else r for r in CPU_ROWS])
    assert [r["ratio"] for r in beside if r["logprobs"] == 0] == [1.0, pytest.approx(2.5), pytest.approx(4.0)]
    # Measured three times (--cpu-repeat 3): the median of each figure, and the ratios' range.
    thrice = [{**r, "app_ms_per_token": r["app_ms_per_token"] * k, "vllm_beside_ms_per_token": 0.1}
              for k in (1.0, 1.5, 1.2) for r in CPU_ROWS if r["path"] == "/sample"]
    merged = medians(with_ratios(thrice))
    own = medians(with_ratios([{**r, "app_ms_per_token": k} for k in (0.01, 0.03, 0.02) for r in CPU_ROWS[:1]]))
    assert own[0]["ratio"] == 1.0 and own[0]["app_ms_per_token"] == 0.02  # vLLM's own is each time its own measure
    assert len(merged) == 1 and merged[0]["repeats"] == 3 and merged[0]["app_ms_per_token"] == pytest.approx(0.12)
    assert merged[0]["ratio"] == pytest.approx(1.2) and merged[0]["ratios"] == pytest.approx([1.0, 1.2, 1.5])
    assert summary(merged) == "app_cpu_ms_per_token n64: /sample=0.120(1.20x 1.00-1.50)"
    named = gpu.figures([], rows)
    assert named["cpu page n=64 top-5: ratio"] == pytest.approx(7.0)
    # A later run reads the figures by name beside the earlier one's.
    later = [{**r, "app_ms_per_token": r["app_ms_per_token"] / 2} for r in CPU_ROWS]
    table = against_baseline({"figures": gpu.figures([], with_ratios(later))}, {"figures": named}).set_index("figure")
    assert table.loc["cpu wrapper n=64: app_ms_per_token", "this/baseline"] == pytest.approx(0.5)


def test_the_apps_engine_is_given_the_benchs_engine_flags():
    """``python app.py`` in ``--cpu-per-token`` parses the flags written back to the engine the
    in-process paths had (``--cpu-threads 1`` on both, say), with the model."""
    from tests.session_start import STARTING

    STARTING.imports()  # vLLM's parser imports from transformers: not while the engines' thread does
    from playground.commands.cli import PlaygroundParser

    parser = PlaygroundParser("bench", "test", lambda group: None)
    given = ["--cpu-threads", "1", "--max-num-seqs", "64", "--no-enable-prefix-caching", "--model", "/m",
             "--paced-core", "10000"]
    args, kwargs = parser.parse(given)
    again, kwargs_again = parser.parse(engine_flags(args.model, kwargs))
    assert kwargs_again == kwargs == {"cpu_threads": 1, "max_num_seqs": 64, "enable_prefix_caching": False,
                                      "paced_core": 10000.0}
    assert again.model == "/m" and engine_flags(None, {}) == []


def test_in_process_paths_count_every_token_and_the_cpu_they_took(backend):
    rows = with_ratios(in_process(backend, n=2, tokens=3, logprobs=5))
    assert [r["path"] for r in rows] == ["vllm", "wrapper", "record"]
    assert all(r["tokens"] == 6 and r["app_cpu_s"] > 0 and r["engine_cpu_s"] >= 0 for r in rows)
    assert rows[0]["ratio"] == 1.0 and all(r["ratio"] > 0 for r in rows)


@pytest.mark.slow
def test_a_tiny_paced_case_measures_sample_and_the_page_against_the_sources_schedule(browser, tmp_path):  # noqa: F811
    """``python app.py --replay synthetic:4x20`` at 400 tok/s: a row for /sample (plain HTTP and
    gradio_client) and one for the page, each timed from the source's scheduled end, with the
    source's own CPU taken out."""
    rows = measure_case(PacedCase(4, 20, 400), free_port(), tmp_path, browser)
    assert [r["client"] for r in rows] == ["/sample", "/sample gradio_client", "page"], rows
    for row in rows:
        assert row["tokens"] > 0 and math.isfinite(row["end_lag_s"]) and math.isfinite(row["app_ms_per_token"])
        assert row["source_late_s"] >= 0 and row["app_cpu_s"] > row["source_cpu_s"] > 0
    assert rows[0]["snapshots"] > 0 and rows[1]["snapshots"] > 0 and rows[2]["longest_frame_gap_ms"] > 0
    assert rows[2]["browser_cpu_s"] > 0  # Chromium drew the run
    assert rows[0]["bundle_mb"] > 0 and rows[1]["bundle_mb"] > 0  # each got the run's bundle
    line = gpu.paced_summary(rows)
    assert re.fullmatch(r"paced\[400 tok/s n=4x20\] sample_lag_s=-?\d+\.\d\d gradio_client_lag_s=-?\d+\.\d\d "
                        r"page_lag_s=-?\d+\.\d\d updates_per_s=\S+ "
                        r"gap_ms=\d+ heap_mb=\S+ app_ms_per_token=\S+/\S+", line), line
    document = gpu.publish(rows, [], tmp_path, 1.0)
    assert json.loads((tmp_path / "gpu-results.json").read_text())["headlines"] == [line] == document["headlines"]
