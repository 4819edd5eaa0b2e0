"""Benchmark: vLLM's native n, our wrapper, the full UI/API path and HF transformers, as ratios.

    python -m playground.bench [--quick] [--model ...] [any vLLM engine flag] [--out DIR] ...

Four paths sample the same prompt with the same seed, n in {1, 4, 8, 16, 32}, a fixed max_tokens
and ``ignore_eos`` (every sample runs to max_tokens, so every path makes the same number of tokens):

- ``native``: ``ParallelSampler.generate(mode="native")``, n handed to vLLM's own fan-out;
- ``wrapper``: ``mode="wrapper"``, our fan-out into n children seeded seed + i;
- ``ui``: a gradio_client streaming call to ``/sample`` on the playground app launched in this
  process on the SAME engine, so ui/native isolates what the UI and API layers cost (its mode is
  ``--ui-mode``, native by default, for the same reason);
- ``hf``: HF transformers ``generate(num_return_sequences=n, do_sample=True)`` on the same
  checkpoint (``min_new_tokens = max_new_tokens`` matches ``ignore_eos``), the baseline a user
  might pick instead.

Why ratios, interleaving and repetitions: the machines this runs on are small and shared, so a
time alone says more about the neighbours than about the code. Within each repetition the paths
run back to back (A B C D, A B C D, ...), so slow spells hit all of them alike, and each ratio is
taken within one repetition (paired) before its median, minimum and maximum are reported.

``--quick`` (n=16 only, 16 tokens, 2 repetitions) finishes in under 3 minutes on a 2-core machine,
engine start included. The last line of stdout is always
``wrapper/native=X ui/native=Y native/hf=Z`` (paired medians at n=16, or at the largest n measured
when 16 is not among them). Results go to ``bench-results/`` (or ``--out``): CSV and JSON tables
and a plotly chart of tokens per second against n.

Modules, each importing only those above it (none imports vLLM at import time):

- ``measure``: settings, constants, token arrivals and the figures of one request (what each
  figure means is written there);
- ``probes``: what the machine and the engine report (CPU time, memory, KV cache, cache hits);
- ``paths``: the four paths, and the fairness caveats between them;
- ``report``: statistics, paired ratios, goals, the files, the printed report and the headline;
- ``cli``: ``run_benchmark`` on a running engine, and ``main``, the command line.
"""

from playground.bench.cli import add_bench_flags, main, run_benchmark, settings_from_args
from playground.bench.measure import (
    BASELINE,
    ENGINE_PATHS,
    HEADLINE_N,
    LONG_PROMPT,
    PATHS,
    PROMPT,
    Arrivals,
    Settings,
    aligned_prompt_tokens,
    cache_figures,
    inter_token_latencies,
    measurement,
    schedule,
)
from playground.bench.paths import UI_POLL, HFBaseline, engine_path, ui_path
from playground.bench.probes import cpu_seconds, kv_cache, machine, prefix_cache_hits, resident_memory, worker_cores
from playground.bench.report import (
    FIGURES,
    GOALS,
    Report,
    cache_frame,
    caveats,
    goals,
    headline,
    headline_n,
    paired_ratios,
    print_report,
    publish,
    ratio_pairs,
    ratio_summary,
    readable_table,
    summarize,
    write_results,
)

__all__ = [
    # measure
    "PATHS", "ENGINE_PATHS", "BASELINE", "HEADLINE_N", "PROMPT", "LONG_PROMPT", "Settings", "Arrivals",
    "schedule", "aligned_prompt_tokens", "inter_token_latencies", "measurement", "cache_figures",
    # probes
    "machine", "resident_memory", "worker_cores", "kv_cache", "cpu_seconds", "prefix_cache_hits",
    # paths
    "UI_POLL", "engine_path", "ui_path", "HFBaseline",
    # report
    "FIGURES", "summarize", "ratio_pairs", "paired_ratios", "ratio_summary", "headline_n", "headline", "GOALS",
    "goals", "readable_table", "Report", "caveats", "write_results", "cache_frame", "print_report", "publish",
    # cli
    "run_benchmark", "add_bench_flags", "settings_from_args", "main",
]
