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
first run after start as its own figure (``browser``).

``--quick`` (n=16 only, 16 tokens, 2 repetitions) takes about 3-4 minutes on a 2-core machine,
engine and app starts included. The last line of stdout is always
``wrapper/native=X ui/native=Y native/hf=Z native/limit=W rss_gib=M`` (paired medians at n=16, or at
the largest n measured when 16 is not among them; the app's resident memory in GiB). Results go
to ``bench-results/`` (or ``--out``): CSV and JSON tables, a plotly chart of tokens per second
against n, and the app's log.

Modules, each importing only those above it (none imports vLLM at import time):

- ``measure``: settings, constants, token arrivals and the figures of one request (what each
  figure means is written there);
- ``probes``: what the machine and the engine report (CPU time, memory, KV cache, cache hits,
  the engine's cores);
- ``contenders`` and ``limit``: the paths, and the fairness caveats between them;
- ``browser``: the app started as a person starts it, and its page in Chromium;
- ``results``: statistics, paired ratios, the goals and the headline, the files and the printed
  report;
- ``soak``: the app under several clients at once, for a bounded time (``--soak``);
- ``command``: ``run_benchmark`` on a running engine, and ``main``, the command line.

Below: the names used from outside the package (by the tests), and ``main``.
"""

from playground.bench.browser import app_memory, page_run
from playground.bench.command import add_bench_flags, main, run_benchmark, settings_from_args
from playground.bench.measure import (
    LONG_PROMPT,
    PATHS,
    Arrivals,
    Settings,
    aligned_prompt_tokens,
    cache_measures,
    inter_token_latencies,
    measurement,
    schedule,
)
from playground.bench.results import (
    against_baseline,
    browser_summary,
    goals,
    headline,
    headline_n,
    paired_ratios,
    publish,
    ratio_summary,
    readable_table,
    summarize,
)

__all__ = [
    "LONG_PROMPT",
    "PATHS",
    "Arrivals",
    "Settings",
    "add_bench_flags",
    "against_baseline",
    "aligned_prompt_tokens",
    "app_memory",
    "browser_summary",
    "cache_measures",
    "goals",
    "headline",
    "headline_n",
    "inter_token_latencies",
    "main",
    "measurement",
    "page_run",
    "paired_ratios",
    "publish",
    "ratio_summary",
    "readable_table",
    "run_benchmark",
    "schedule",
    "settings_from_args",
    "summarize",
]
