"""Benchmark: vLLM's native n, our wrapper, the full UI/API path, HF transformers and the
machine's own limit, as paired ratios; then the app as a person starts it, and its page in a browser.

    python -m playground.bench [--quick] [--no-app] [--model ...] [any vLLM engine flag] [--out DIR] ...

Five paths make the same number of tokens for the same prompt and seed, n in {1, 4, 8, 16, 32}, a
fixed max_tokens and ``ignore_eos`` (every sample runs to max_tokens):

- ``native``: ``ParallelSampler.generate(mode="native")``, n handed to vLLM's own fan-out;
- ``wrapper``: ``mode="wrapper"``, our fan-out into n children seeded seed + i;
- ``ui``: a gradio_client streaming call to ``/sample`` on the playground app launched in this
  process on the SAME engine, so ui/native isolates what the UI and API layers cost (its mode is
  ``--ui-mode``, native by default, for the same reason);
- ``hf``: HF transformers ``generate(num_return_sequences=n, do_sample=True)`` on the same
  checkpoint (``min_new_tokens = max_new_tokens`` matches ``ignore_eos``), with the engine's
  threads on the engine's cores: the baseline a user might pick instead;
- ``limit``: the model's decode-step matrix multiplications alone, through vLLM's own kernels, on
  the engine's threads and cores: the most this machine could do (``limit``).

Why ratios, interleaving and repetitions: the machines this runs on are small and shared, so a
time alone says more about the neighbours than about the code. Within each repetition the paths
run back to back (A B C D E, A B C D E, ...), so slow spells hit all of them alike, and each ratio
is taken within one repetition (paired) before its median, minimum and maximum are reported.

Then (unless ``--no-app``) ``python app.py`` is started with its defaults: the seconds to a page
that answers, its resident memory, and in headless Chromium the time from the Run click to the
first visible token, the page's update rate and its longest stall, at n=8 and n=32, with the
first run after start measured on its own (``browser``).

``--quick`` (n=16 only, 16 tokens, 2 repetitions) takes about 3-4 minutes on a 2-core machine,
engine and app starts included. The last line of stdout is always
``wrapper/native=X ui/native=Y native/hf=Z native/limit=W rss_gib=M`` (paired medians at n=16, or at
the largest n measured when 16 is not among them; the app's resident memory in GiB). Results go
to ``bench-results/`` (or ``--out``): CSV and JSON tables, a plotly chart of tokens per second
against n, and the app's log.

Modules, each importing only those above it (none imports vLLM at import time):

- ``measure``: settings, constants, token arrivals and the measures of one request (what each
  measure means is written there);
- ``probes``: what the machine and the engine report (CPU time, memory, KV cache, cache hits,
  the engine's cores);
- ``paths`` and ``limit``: the paths, and the fairness caveats between them;
- ``browser``: the app started as a person starts it, and its page in Chromium;
- ``goals``: the goals and the headline; ``report``: statistics, paired ratios, the files and the
  printed report;
- ``cli``: ``run_benchmark`` on a running engine, and ``main``, the command line.
"""

from playground.bench.browser import app_memory, measure_app, page_run
from playground.bench.cli import add_bench_flags, main, run_benchmark, settings_from_args
from playground.bench.goals import GOALS, browser_summary, goals, headline, headline_n
from playground.bench.limit import MachineLimit, decode_shapes, step_flops
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
    cache_measures,
    inter_token_latencies,
    measurement,
    schedule,
)
from playground.bench.paths import UI_POLL, HFBaseline, engine_path, ui_path
from playground.bench.probes import (
    cpu_seconds,
    engine_cores,
    engine_threads,
    kv_cache,
    machine,
    prefix_cache_hits,
    resident_memory,
)
from playground.bench.report import (
    MEASURES,
    Report,
    cache_frame,
    caveats,
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
    "schedule", "aligned_prompt_tokens", "inter_token_latencies", "measurement", "cache_measures",
    # probes
    "machine", "resident_memory", "engine_cores", "engine_threads", "kv_cache", "cpu_seconds", "prefix_cache_hits",
    # paths, limit, browser
    "UI_POLL", "engine_path", "ui_path", "HFBaseline", "MachineLimit", "decode_shapes", "step_flops",
    "measure_app", "page_run", "app_memory",
    # goals, report
    "GOALS", "goals", "headline", "headline_n", "browser_summary",
    "MEASURES", "summarize", "ratio_pairs", "paired_ratios", "ratio_summary",
    "readable_table", "Report", "caveats", "write_results", "cache_frame", "print_report", "publish",
    # cli
    "run_benchmark", "add_bench_flags", "settings_from_args", "main",
]
