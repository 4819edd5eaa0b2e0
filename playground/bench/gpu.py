"""``python -m playground.bench --paced`` and ``--cpu-per-token``: the app measured where a GPU
would put it (``paced``: a replay at a GPU's pace; ``cpu``: the app's CPU per sampled token on every
real path), written to ``bench-results/gpu-results.json`` (and CSVs) and ended by one summary line
each. ``--baseline`` sets every figure beside an earlier run's (``results.against_baseline``)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from playground.bench.paced import CASES, PacedCase

CASE = re.compile(r"^(.+)@([0-9.]+)$")  # a synthetic run's NxTOKENS[:K], then its rate
PACED_FIGURES = ("end_lag_s", "source_late_s", "app_ms_per_token", "updates_per_s", "longest_frame_gap_ms", "heap_mb")


def paced_case(text: str) -> PacedCase:
    """``NxTOKENS[:K]@RATE`` (``256x1000@10000``: n=256 x 1,000 tokens with top-5 logprobs at 10,000
    tokens a second; ``256x1000:0@10000`` without logprobs)."""
    import argparse

    from playground.backends.replay_library import MAX_SYNTHETIC_LOGPROBS, synthetic_spec

    found = CASE.match(text.strip())
    n, tokens, top = (found and synthetic_spec("synthetic:" + found[1])) or (0, 0, 0)
    if not 1 <= n <= 1024 or tokens < 1 or top > MAX_SYNTHETIC_LOGPROBS or not 0 < float(found[2]) <= 1e8:
        raise argparse.ArgumentTypeError(f"must look like 256x1000@10000 (n x tokens @ tokens per "
                                         f"second, n up to 1024; 256x1000:0@10000 without logprobs, :K for the "
                                         f"top K up to {MAX_SYNTHETIC_LOGPROBS}), got {text!r}")
    return PacedCase(n, tokens, float(found[2]), top)


def add_gpu_flags(group) -> None:
    group.add_argument("--paced", action="store_true",
                       help="Instead of the benchmark: the page and /sample on `python app.py --replay` of synthetic "
                            "runs at a GPU's pace (n=256 x 1,000 tokens at 10,000 tok/s, n=32 x 2,000 at 4,000; "
                            "top-5 logprobs): how far behind they end, the page's updates, frame gaps and heap, and "
                            "the app's CPU per token without the source's own. No engine.")
    # One flag with several values: vLLM's argument parser warns of a flag given twice.
    group.add_argument("--paced-case", dest="paced_cases", type=paced_case, nargs="+", action="extend", default=None,
                       metavar="NxTOKENS[:K]@RATE", help="Cases of --paced instead of the defaults (several after the "
                                                          "one flag: --paced-case 256x1000@10000 64x64@200; "
                                                          "256x1000:0@10000 without logprobs).")
    group.add_argument("--cpu-per-token", action="store_true",
                       help="Instead of the benchmark: the app process's CPU seconds per sampled token on every real "
                            "path (vLLM's own generate, the wrapper, record(), /sample, the page), with and without "
                            "top-5 logprobs, and each over vLLM's own (with --paced: both). With --paced-core "
                            "TOKENS_PER_S: at a GPU's pace, every path's vLLM front end fed by a paced source of "
                            "tokens instead of the engine (playground.backends.paced_core).")
    group.add_argument("--cpu-n", type=int, nargs="+", default=[64, 256], metavar="N",
                       help="n of --cpu-per-token (default 64 256).")
    group.add_argument("--cpu-tokens", type=int, default=128, metavar="TOKENS",
                       help="Tokens per sample of --cpu-per-token (default 128).")
    group.add_argument("--cpu-repeat", type=int, default=1, metavar="K",
                       help="Measure every path of --cpu-per-token K times, each beside vLLM's own, and report the "
                            "median (default 1): one request's figure moves by a fifth on a shared machine.")


def run(args, engine_kwargs: dict) -> int:
    """Measure what the flags ask, publish, and end stdout with the summary line(s)."""
    from playground.bench.browser import CHROMIUM_ARGS, chromium_path
    from playground.bench.probes import free_port
    from playground.commands import exits

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    paced_rows: list[dict] = []
    cpu_rows: list[dict] = []
    try:
        with contextlib.ExitStack() as stack:
            backend = None
            if args.cpu_per_token:  # before Playwright: its sync API keeps an event loop on this thread, and
                backend = stack.enter_context(in_process_backend(args, engine_kwargs))  # AsyncLLM would bind
                cpu_rows = cpu_in_process(args, backend)  # its output handler to it
                (out / "gpu-cpu-in-process.json").write_text(json.dumps(cpu_rows, indent=1))  # kept, whatever follows
            browser = None
            if chromium_path() is not None:
                from playwright.sync_api import sync_playwright

                playwright = stack.enter_context(sync_playwright())
                browser = playwright.chromium.launch(executable_path=chromium_path(),
                                                     args=[*CHROMIUM_ARGS, "--enable-precise-memory-info"])
                stack.callback(browser.close)
            else:
                print("Chromium not found: the page is not measured", file=sys.stderr)
            if args.paced:
                from playground.bench.paced import measure_case

                for case in args.paced_cases or CASES:
                    print(f"paced: {case.name}...", file=sys.stderr)
                    paced_rows += measure_case(case, free_port(), out, browser)
            if args.cpu_per_token:
                cpu_rows = cpu_through_app(args, engine_kwargs, cpu_rows, out, browser, free_port(), backend)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return exits.INTERRUPTED
    document = publish(paced_rows, cpu_rows, out, time.monotonic() - started)
    if args.baseline is not None:
        print_baseline(document, args.baseline)
    for line in document["headlines"]:
        print(line)
    return exits.OK


def _sizes(args) -> list[tuple[int, int, int | None]]:
    """Every size of --cpu-per-token, after one tiny request that pays for lazy setup (not kept)."""
    return [(2, 2, None), *((n, args.cpu_tokens, logprobs) for n in args.cpu_n for logprobs in (None, 5))]


def in_process_backend(args, engine_kwargs: dict):
    """The in-process paths' engine, settled as the app settles once it has started; kept until
    the app's paths are measured too (vLLM's own path runs on it beside each of theirs)."""
    from playground.backends.embedded import EmbeddedBackend
    from playground.backends.engine import settle
    from playground.backends.resources import Workload

    most = max(256, *args.cpu_n)
    backend = EmbeddedBackend.start(args.model, max_n=most, workload=Workload(max_n=most, concurrency=1),
                                    **engine_kwargs)
    settle()
    return backend


def cpu_in_process(args, backend) -> list[dict]:
    from playground.bench.cpu import in_process

    print("cpu per token: the in-process paths...", file=sys.stderr)
    rows = []
    for n, tokens, logprobs in _sizes(args):
        for _ in range(args.cpu_repeat):
            rows += in_process(backend, n, tokens, logprobs)
    return rows


def cpu_through_app(args, engine_kwargs: dict, rows: list[dict], out: Path, browser, port: int,
                    backend=None) -> list[dict]:
    from playground.bench.cpu import engine_flags, medians, through_app, vllm_own, with_ratios, without_source

    print("cpu per token: python app.py, /sample and the page...", file=sys.stderr)
    beside = None if backend is None else functools.partial(vllm_own, backend)
    rows = rows + through_app(port, out, _sizes(args), browser, engine_flags(args.model, engine_kwargs), beside,
                              args.cpu_repeat)
    pace = engine_kwargs.get("paced_core")  # a GPU's pace: vLLM's front end fed by a paced source, no engine
    return medians(with_ratios(without_source([{**r, "paced_core": pace} for r in rows
                                               if (r["n"], r["max_tokens"]) != (2, 2)])))


def figures(paced_rows: list[dict], cpu_rows: list[dict]) -> dict[str, float]:
    """Every figure by name, for a later run's --baseline."""
    found: dict[str, float] = {}
    for r in paced_rows:
        for name in PACED_FIGURES:
            if isinstance(r.get(name), int | float) and not math.isnan(r[name]):
                found[f"paced {r['case']} {r['client']}: {name}"] = r[name]
    for r in cpu_rows:
        size = f"n={r['n']}{' top-' + str(r['logprobs']) if r['logprobs'] else ''}"
        for name in ("app_ms_per_token", "engine_ms_per_token", "ratio", "tok_per_s"):
            if r.get(name) is not None:
                found[f"cpu {r['path']} {size}: {name}"] = r[name]
    return found


def paced_summary(rows: list[dict]) -> str:
    parts = []
    for case in dict.fromkeys(r["case"] for r in rows):
        here = {r["client"]: r for r in rows if r["case"] == case and "error" not in r}
        sample, page = here.get("/sample", {}), here.get("page", {})
        client = here.get("/sample gradio_client", {})
        parts.append(f"paced[{case}] sample_lag_s={sample.get('end_lag_s', math.nan):.2f} "
                     f"gradio_client_lag_s={client.get('end_lag_s', math.nan):.2f} "
                     f"page_lag_s={page.get('end_lag_s', math.nan):.2f} "
                     f"updates_per_s={page.get('updates_per_s', math.nan):.1f} "
                     f"gap_ms={page.get('longest_frame_gap_ms', math.nan):.0f} "
                     f"heap_mb={page.get('heap_mb', math.nan):.0f} "
                     f"app_ms_per_token={sample.get('app_ms_per_token', math.nan):.3f}/"
                     f"{page.get('app_ms_per_token', math.nan):.3f}")
    return "; ".join(parts)


def publish(paced_rows: list[dict], cpu_rows: list[dict], out: Path, total_s: float) -> dict[str, Any]:
    """Write the files, print the tables; the document written (with its summary lines)."""
    from playground.bench.cpu import summary as cpu_summary

    headlines = ([paced_summary(paced_rows)] if paced_rows else []) + ([cpu_summary(cpu_rows)] if cpu_rows else [])
    document = {"paced": paced_rows, "cpu": cpu_rows, "figures": figures(paced_rows, cpu_rows),
                "total_s": total_s, "headlines": headlines}
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        if paced_rows:
            frame = pd.DataFrame(paced_rows)
            frame.to_csv(out / "gpu-paced.csv", index=False)
            print("\nAt a GPU's pace (python app.py --replay; lag from the source's scheduled last event; the app's "
                  "CPU per token without the source's own):")
            print(frame.drop(columns=[c for c in ("rate", "app_start_s") if c in frame]).to_string(
                index=False, float_format="{:.3f}".format))
        if cpu_rows:
            frame = pd.DataFrame(cpu_rows)
            frame.to_csv(out / "gpu-cpu.csv", index=False)
            print("\nApp CPU per sampled token (process CPU time; the engine core's beside it; ratio: over vLLM's own "
                  "generate on the same request):")
            print(frame.to_string(index=False, float_format="{:.3f}".format))
    (out / "gpu-results.json").write_text(json.dumps(document, indent=1, default=str))
    print(f"\nFiles: {out / 'gpu-results.json'}; total {total_s:.0f} s")
    return document


def print_baseline(document: dict[str, Any], baseline: Path) -> None:
    from playground.bench.results import TWO_PLACES, against_baseline

    table = against_baseline(document, json.loads(baseline.read_text()))
    print(f"\nAgainst the baseline {baseline}:")
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        print(table.to_string(index=False, float_format=TWO_PLACES) if len(table) else "(no figure in common)")
