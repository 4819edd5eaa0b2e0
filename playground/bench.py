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

Figures, per path and n:
- tokens per second: generated tokens / wall time of the request, as its caller saw it;
- time to first token (median over the samples) and p50/p99 inter-token latency, from each
  sample's token arrival times on the caller's side. Tokens that arrive in one output share a
  timestamp and give latencies of 0 (kept: that is what the caller saw). For ``ui`` the caller is
  the API client, and ``/sample`` paces its snapshots (every 0.25 s), which its ITL shows;
  for ``hf`` every sample gets the time of each decoding step (a streamer's ``put``).
- the prefix-cache hit of children 1..n-1: tokens each child read from the cache over its
  block-aligned prompt (vLLM caches only full blocks and always computes the last prompt token,
  so at most ``(prompt_len - 1) // block_size * block_size`` can be read). The cache is reset
  before every request, so child 0 reads nothing and children can only read what child 0 wrote.
  The wrapper reports each child's ``num_cached_tokens`` (``on_child``); vLLM's native path
  merges its children into one parent output, so there it is the engine's prefix-cache hit
  counter over the request, divided by n - 1 children. The throughput prompt is short (what a
  playground prompt looks like, and what keeps HF's n-fold prefill affordable here), so the hit is
  measured by a probe of its own: a prompt of several blocks, max_tokens=1, both fan-outs, after
  each repetition (the first only in --quick). ``--long-prompt`` runs the whole benchmark on that prompt instead.
- CPU seconds per request, of this process (engine front end, wrapper, app and API client; for
  ``hf`` the whole generation) and of the engine-core processes: steadier than wall time, so a
  layer's cost shows even when the neighbours' noise hides it in tokens per second;
- the app's resident memory: RSS (and PSS, which counts shared pages once) of this process plus
  the engine-core processes it spawned, taken after the engine and UI warmed up and before the HF
  model is loaded; the KV cache size from the engine's cache config.

Fairness caveats (also written into the results):
- threads: vLLM's CPU worker binds its OpenMP threads to cores of its own and leaves one core to
  the engine core and this process (on 2 cores: 1 compute thread, on core 0). By default HF gets
  the same: as many torch threads as the worker has cores, and the calling thread pinned to those
  cores while it generates, so both engines do their matmuls on the same silicon. (Unpinned
  multi-thread HF was also unstable here: every vLLM engine on a machine binds its worker to the
  same core, and one OpenMP thread stuck behind them stalls every step of the others.)
  ``--hf-threads N`` runs N threads unpinned instead, what a user gets by default with N = cores.
  The engine idles (0 % CPU) while HF runs.
- dtype: both run the same one: HF loads whatever dtype the engine runs (``--hf-dtype``
  overrides). On a CPU without native bf16 that is float32 (playground.engine.platform_defaults).
- HF seeds one generator for the whole batch (torch.manual_seed(seed)); vLLM seeds each sample.
  Token streams differ; the number of tokens does not.
- HF's ``num_return_sequences`` copies the prompt n times and prefills every copy; vLLM prefills
  it once and the children read it from the prefix cache. That is a real difference between the
  two, and ``--long-prompt`` shows how much it weighs.
- The API client runs in this process (polling every few ms), beside the server it measures.
- Memory: the engine reserves its KV cache up front, and that dominates the RSS. The benchmark
  sets ``VLLM_CPU_KVCACHE_SPACE=2`` (GiB) unless it is set (or ``--kv-cache-memory-bytes`` is
  given): enough for n=32 on the long prompt, and polite on a shared machine; the app itself
  reserves ``gpu_memory_utilization=0.5`` of the node by default (10-12 GiB here).

``--quick`` (n=16 only, 16 tokens, 2 repetitions) finishes in under 3 minutes on a 2-core machine,
engine start included. The last line of stdout is always
``wrapper/native=X ui/native=Y native/hf=Z`` (paired medians at n=16, or at the largest n measured
when 16 is not among them). Results go to ``bench-results/`` (or ``--out``): CSV and JSON tables
and a plotly chart of tokens per second against n.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PATHS = ("native", "wrapper", "ui", "hf")
ENGINE_PATHS = ("native", "wrapper")
BASELINE = "native"
HEADLINE_N = 16
# The throughput prompt: short, like a playground prompt, so HF's n copies prefill quickly.
PROMPT = "Once upon a time, in a village at the edge of the sea, there lived an old lighthouse keeper who"
# The prefix-cache prompt: 409 tokens with the default tokenizer, 3 full blocks of 128 and a tail.
LONG_PROMPT = (
    "The lighthouse keeper wrote in his log every evening. He noted the wind, the colour of the "
    "sea, the ships that passed and the birds that rested on the rail. "
) * 12
UI_POLL = 0.005  # seconds between looks at the API client's received outputs


@dataclass(frozen=True)
class Settings:
    ns: tuple[int, ...] = (1, 4, 8, 16, 32)
    max_tokens: int = 64
    repetitions: int = 3
    paths: tuple[str, ...] = PATHS
    prompt: str = PROMPT
    cache_prompt: str = LONG_PROMPT
    seed: int = 1234
    temperature: float = 1.0
    output_kind: str = "DELTA"
    ui_mode: str = "native"
    hf_threads: int = 0  # 0: as many as vLLM's worker has cores, pinned to them
    hf_dtype: str = "auto"  # auto: the engine's dtype
    warmup: bool = True
    cache_probes: int = 3  # repetitions followed by a prefix-cache probe

    @classmethod
    def quick(cls, **changes) -> Settings:
        """Sized for < 3 minutes on a 2-core machine, engine start (~45-60 s) included."""
        return cls(**{"ns": (16,), "max_tokens": 16, "repetitions": 2, "cache_probes": 1, **changes})


@dataclass
class Arrivals:
    """When each sample's tokens reached the caller, in seconds since the request was sent."""

    times: list[list[float]]
    wall: float
    child_cached: list[int | None] | None = None  # per child num_cached_tokens (wrapper only)
    cache_hits: float | None = None  # the engine's prefix-cache hit counter over the request


# --- pure parts: schedule, statistics, ratios -------------------------------------------------


def schedule(paths: Iterable[str], ns: Iterable[int], repetitions: int) -> list[tuple[int, int, str]]:
    """(repetition, n, path) in run order: every path back to back for one n, then the next n,
    then the next repetition (A B C D, A B C D, ...), so drift and neighbours hit paths alike."""
    paths, ns = list(paths), list(ns)
    return [(rep, n, path) for rep in range(repetitions) for n in ns for path in paths]


def aligned_prompt_tokens(prompt_len: int, block_size: int) -> int:
    """The most prompt tokens a request can read from the prefix cache: full blocks only, and the
    last prompt token is always computed (it yields the first sampled token)."""
    return max(0, (prompt_len - 1) // block_size * block_size)


def inter_token_latencies(times: list[list[float]]) -> np.ndarray:
    """Every gap between consecutive token arrivals of a sample, pooled over the samples."""
    gaps = [np.diff(t) for t in times if len(t) > 1]
    return np.concatenate(gaps) if gaps else np.array([])


def measurement(path: str, n: int, repetition: int, arrivals: Arrivals, prompt_tokens: int,
                block_size: int) -> dict[str, Any]:
    """One row of the results: a request's figures from its token arrival times."""
    tokens = sum(len(t) for t in arrivals.times)
    firsts = [t[0] for t in arrivals.times if t]
    itl = inter_token_latencies(arrivals.times)
    row = {
        "path": path, "n": n, "repetition": repetition, "tokens": tokens, "wall_s": arrivals.wall,
        "tokens_per_s": tokens / arrivals.wall if arrivals.wall > 0 else math.nan,
        "ttft_ms": float(np.median(firsts)) * 1000 if firsts else math.nan,
        "itl_p50_ms": float(np.percentile(itl, 50)) * 1000 if itl.size else math.nan,
        "itl_p99_ms": float(np.percentile(itl, 99)) * 1000 if itl.size else math.nan,
        "prompt_tokens": prompt_tokens,
    }
    return row | cache_figures(n, arrivals, prompt_tokens, block_size)


def cache_figures(n: int, arrivals: Arrivals, prompt_tokens: int, block_size: int) -> dict[str, Any]:
    """Children 1..n-1's mean cached tokens and their share of the block-aligned prompt."""
    aligned = aligned_prompt_tokens(prompt_tokens, block_size)
    figures = {"aligned_prompt_tokens": aligned, "children_cached_tokens": math.nan, "cache_hit": math.nan,
               "cache_source": ""}
    if n < 2 or aligned == 0:
        return figures
    if arrivals.child_cached is not None:
        children = [c for c in arrivals.child_cached[1:] if c is not None]
        cached, source = (float(np.mean(children)) if children else math.nan), "per child"
    elif arrivals.cache_hits is not None:
        cached, source = arrivals.cache_hits / (n - 1), "engine counter / (n-1)"
    else:
        return figures
    return figures | {"children_cached_tokens": cached, "cache_hit": cached / aligned, "cache_source": source}


FIGURES = ["tokens_per_s", "ttft_ms", "itl_p50_ms", "itl_p99_ms", "cache_hit", "cpu_s_here", "cpu_s_engine"]


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max of every figure per (n, path)."""
    stats = rows.groupby(["n", "path"], sort=True)[FIGURES].agg(["median", "min", "max"])
    stats.columns = [f"{figure}_{stat}" for figure, stat in stats.columns]
    return stats.reset_index()


def ratio_pairs(paths: Iterable[str]) -> list[tuple[str, str]]:
    """(numerator, denominator): each path against native, and native against HF (the goal)."""
    paths = list(paths)
    pairs = [(p, BASELINE) for p in paths if p != BASELINE and BASELINE in paths]
    if "hf" in paths and BASELINE in paths:
        pairs.append((BASELINE, "hf"))
    return pairs


def paired_ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """Tokens-per-second ratios taken within each repetition (the paths ran back to back)."""
    frames = []
    tps = rows.pivot_table(index=["n", "repetition"], columns="path", values="tokens_per_s") if len(rows) else None
    for top, bottom in ratio_pairs(tps.columns if tps is not None else []):
        value = (tps[top] / tps[bottom]).rename("ratio").reset_index()
        frames.append(value.assign(name=f"{top}/{bottom}"))
    if not frames:
        return pd.DataFrame(columns=["n", "repetition", "ratio", "name"])
    return pd.concat(frames, ignore_index=True)


def ratio_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max of each paired ratio per n."""
    stats = ratios.groupby(["n", "name"], sort=True)["ratio"].agg(["median", "min", "max"])
    return stats.reset_index()


def headline_n(ns: Iterable[int]) -> int:
    ns = sorted(set(ns))
    return HEADLINE_N if HEADLINE_N in ns else ns[-1]


def headline(ratios: pd.DataFrame, n: int = HEADLINE_N) -> str:
    """The last stdout line: ``wrapper/native=X ui/native=Y native/hf=Z`` (medians at n)."""
    def median(name: str) -> float:
        values = ratios.loc[(ratios["n"] == n) & (ratios["name"] == name), "ratio"].dropna()
        return float(values.median()) if len(values) else math.nan

    return " ".join(f"{name}={median(name):.2f}" for name in ("wrapper/native", "ui/native", "native/hf"))


GOALS = [  # (ratio or figure, at n (None: every n), at least)
    ("wrapper/native", None, 0.97),
    ("ui/native", HEADLINE_N, 0.90),
    ("native/hf", HEADLINE_N, 2.0),
    ("children cache hit", None, 0.90),
]


def goals(ratios: pd.DataFrame, cache: pd.DataFrame) -> pd.DataFrame:
    """Each goal against the medians measured (the worst n where a goal holds at every n)."""
    rows = []
    by_ratio = ratio_summary(ratios) if len(ratios) else pd.DataFrame(columns=["n", "name", "median"])
    for name, at_n, target in GOALS:
        if name == "children cache hit":
            medians = cache.groupby(["path", "n"])["cache_hit"].median().dropna() if len(cache) else pd.Series()
            worst = (medians.idxmin(), medians.min()) if len(medians) else (None, math.nan)
            where = f"{worst[0][0]} n={worst[0][1]}" if worst[0] else "-"
            value = worst[1]
        else:
            picked = by_ratio[by_ratio["name"] == name]
            if at_n is not None:
                picked = picked[picked["n"] == at_n]
            if len(picked):
                row = picked.loc[picked["median"].idxmin()]
                where, value = f"n={int(row['n'])}", float(row["median"])
            else:
                where, value = "-", math.nan
        rows.append({"goal": f"{name} >= {target:g}" + (f" at n={at_n}" if at_n else " at every n"),
                     "worst median": value, "where": where,
                     "met": "n/a" if math.isnan(value) else ("yes" if value >= target else "NO")})
    return pd.DataFrame(rows)


def readable_table(summary: pd.DataFrame, ratios: pd.DataFrame) -> pd.DataFrame:
    """One row per (n, path): tokens/s and its ratio to native side by side, then the latencies."""
    table = summary.copy()
    to_native = ratio_summary(ratios) if len(ratios) else pd.DataFrame(columns=["n", "name", "median"])
    to_native = to_native[to_native["name"].str.endswith(f"/{BASELINE}")].copy()
    to_native["path"] = to_native["name"].str.split("/").str[0]
    table = table.merge(to_native[["n", "path", "median", "min", "max"]], on=["n", "path"], how="left")
    table.loc[table["path"] == BASELINE, ["median", "min", "max"]] = 1.0
    order = {p: i for i, p in enumerate(PATHS)}
    table = table.sort_values(["n", "path"], key=lambda c: c.map(order) if c.name == "path" else c)
    return pd.DataFrame({
        "n": table["n"], "path": table["path"],
        "tok/s": table["tokens_per_s_median"],
        "tok/s [min-max]": [f"{lo:.1f}-{hi:.1f}" for lo, hi in
                            zip(table["tokens_per_s_min"], table["tokens_per_s_max"])],
        "x native": table["median"],
        "x native [min-max]": [f"{lo:.2f}-{hi:.2f}" for lo, hi in zip(table["min"], table["max"])],
        "TTFT ms": table["ttft_ms_median"],
        "ITL p50 ms": table["itl_p50_ms_median"],
        "ITL p99 ms": table["itl_p99_ms_median"],
        "CPU s here": table["cpu_s_here_median"],
        "CPU s engine": table["cpu_s_engine_median"],
    })


# --- environment: machine, memory, KV cache ---------------------------------------------------


def machine() -> dict[str, Any]:
    """What the numbers were measured on (they mean little without it)."""
    import torch
    import transformers
    import vllm

    model_name, flags = platform.processor() or "", set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model_name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    return {
        "cpu": model_name,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "simd": " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags) or "-",
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "python": platform.python_version(),
        "vllm": vllm.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
    }


def resident_memory() -> dict[str, float]:
    """RSS and PSS (MiB) of this process and every process it spawned (engine core, worker)."""
    import psutil

    me = psutil.Process()
    rss = pss = 0
    processes = 0
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            info = proc.memory_full_info()
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
            processes += 1
    return {"rss_mib": rss / 2**20, "pss_mib": pss / 2**20, "processes": processes}


def worker_cores() -> list[int] | None:
    """The cores vLLM's CPU worker bound itself to (None when no worker process is found)."""
    import psutil

    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "Worker" in proc.name():
                return proc.cpu_affinity()
    return None


def kv_cache(engine) -> dict[str, Any]:
    """KV cache size from the engine's config (num_gpu_blocks is set once the engine started)."""
    config = engine.vllm_config
    blocks, block_size = config.cache_config.num_gpu_blocks, config.cache_config.block_size
    model = config.model_config
    info: dict[str, Any] = {"blocks": blocks, "block_size": block_size,
                            "tokens": blocks * block_size if blocks else None}
    with contextlib.suppress(Exception):
        per_token = (2 * model.get_num_layers(config.parallel_config)
                     * model.get_num_kv_heads(config.parallel_config) * model.get_head_size()
                     * model.dtype.itemsize)
        info["bytes_per_token"] = per_token
        info["gib"] = blocks * block_size * per_token / 2**30 if blocks else None
    return info


def cpu_seconds() -> tuple[float, float]:
    """CPU time (user + system) of this process and of the processes it spawned (engine core and
    worker). Per request, far steadier than wall time on a shared machine: what a layer costs in
    CPU shows here even when the neighbours' noise hides it in tokens per second."""
    import psutil

    def used(proc) -> float:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            return t.user + t.system
        return 0.0

    me = psutil.Process()
    return used(me), sum(used(child) for child in me.children(recursive=True))


def prefix_cache_hits() -> float | None:
    """The engine's prefix-cache hit counter (tokens), summed over engines; None without stats."""
    from prometheus_client import REGISTRY

    total, found = 0.0, False
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "vllm:prefix_cache_hits_total":
                total, found = total + sample.value, True
    return total if found else None


# --- the paths ----------------------------------------------------------------------------------


def engine_path(host, mode: str, settings: Settings, prompt_ids: list[int]) -> Callable[..., Arrivals]:
    """Native or wrapper: ParallelSampler on the engine's own loop, timed there."""
    from vllm import SamplingParams, TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    from playground.sampler import ParallelSampler

    async def sample(n: int, max_tokens: int, ids: list[int]) -> Arrivals:
        engine = host.engine
        await engine.reset_prefix_cache()
        sampler = ParallelSampler(engine, max_n=max(n, 1))
        params = SamplingParams(n=n, seed=settings.seed, temperature=settings.temperature, top_p=1.0, top_k=0,
                                max_tokens=max_tokens, ignore_eos=True,
                                output_kind=RequestOutputKind[settings.output_kind])
        cumulative = settings.output_kind == "CUMULATIVE"
        times: list[list[float]] = [[] for _ in range(n)]
        cached: list[int | None] = [None] * n

        def on_child(index: int, output) -> None:
            if cached[index] is None:
                cached[index] = output.num_cached_tokens

        hits = prefix_cache_hits()
        tokens = TokensPrompt(prompt_token_ids=ids)
        request_id = f"bench-{mode}-{time.monotonic_ns()}"
        start = time.monotonic()
        async for output in sampler.generate(tokens, params, request_id, mode,
                                             on_child=on_child if mode == "wrapper" else None):
            now = time.monotonic() - start
            for completion in output.outputs:
                seen = times[completion.index]
                new = len(completion.token_ids) - (len(seen) if cumulative else 0)
                seen.extend([now] * new)
        wall = time.monotonic() - start
        after = prefix_cache_hits()
        return Arrivals(times, wall, child_cached=cached if mode == "wrapper" else None,
                        cache_hits=after - hits if hits is not None and after is not None else None)

    def run(n: int, max_tokens: int | None = None, ids: list[int] | None = None) -> Arrivals:
        return host.run(sample(n, max_tokens or settings.max_tokens, ids or prompt_ids))

    return run


def ui_path(host, app_url: str, settings: Settings) -> Callable[..., Arrivals]:
    """A gradio_client streaming call to /sample; token arrivals are read from its snapshots."""
    from gradio_client import Client

    from playground.run import Run

    client = Client(app_url, verbose=False)

    def run(n: int, max_tokens: int | None = None) -> Arrivals:
        host.run(host.engine.reset_prefix_cache())
        hits = prefix_cache_hits()
        times: list[list[float]] = [[] for _ in range(n)]
        start = time.monotonic()
        job = client.submit(prompt=settings.prompt, n=n, seed=settings.seed, output_kind=settings.output_kind,
                            mode=settings.ui_mode, temperature=settings.temperature, top_p=1.0, top_k=0,
                            max_tokens=max_tokens or settings.max_tokens, ignore_eos=True, api_name="/sample")
        read = 0
        while True:
            done = job.done()
            outputs = job.outputs()
            now = time.monotonic() - start
            for value in outputs[read:]:
                snapshot = json.loads(value)
                for s in snapshot.get("samples", []) if "bundle_version" not in snapshot else []:
                    seen = times[s["index"]]
                    seen.extend([now] * (s["num_tokens"] - len(seen)))
            read = len(outputs)
            if done:
                break
            time.sleep(UI_POLL)
        final = Run.from_json(job.result())
        wall = time.monotonic() - start
        for s in final.samples:  # tokens that arrived with the final bundle
            times[s.index].extend([wall] * (len(s.token_ids) - len(times[s.index])))
        after = prefix_cache_hits()
        return Arrivals(times, wall, cache_hits=after - hits if hits is not None and after is not None else None)

    run.close = client.close  # type: ignore[attr-defined]
    return run


class HFBaseline:
    """HF transformers ``generate(num_return_sequences=n)`` on the engine's checkpoint.

    Torch threads are set around each call only, so the rest of this process (the engine's
    front end, the app) keeps its own setting.
    """

    def __init__(self, model_path: str, dtype: str, threads: int = 0, pin: list[int] | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        self.dtype = dtype
        self.pin = pin if not threads else None  # the cores vLLM's worker computes on
        self.threads = threads or (len(pin) if pin else len(os.sched_getaffinity(0)))
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype)).eval()

    def __call__(self, n: int, max_tokens: int, prompt_ids: list[int], settings: Settings) -> Arrivals:
        import torch
        from transformers.generation.streamers import BaseStreamer

        steps: list[float] = []

        class Clock(BaseStreamer):
            """Stamps each decoding step; the first put is the prompt itself."""

            def __init__(self):
                self.prompt_seen = False

            def put(self, value):
                if self.prompt_seen:
                    steps.append(time.monotonic())
                self.prompt_seen = True

            def end(self):
                pass

        ids = torch.tensor([prompt_ids])
        previous, affinity = torch.get_num_threads(), os.sched_getaffinity(0)
        torch.set_num_threads(self.threads)
        if self.pin:
            os.sched_setaffinity(0, self.pin)  # this thread only (Linux): torch computes on it
        try:
            torch.manual_seed(settings.seed)
            start = time.monotonic()
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                    temperature=settings.temperature, top_p=1.0, top_k=0, num_return_sequences=n,
                    max_new_tokens=max_tokens, min_new_tokens=max_tokens, streamer=Clock(),
                    pad_token_id=self.model.generation_config.eos_token_id)
            wall = time.monotonic() - start
        finally:
            torch.set_num_threads(previous)
            if self.pin:
                os.sched_setaffinity(0, affinity)
        generated = out.shape[1] - len(prompt_ids)
        step_times = [t - start for t in steps][:generated]
        return Arrivals([list(step_times) for _ in range(n)], wall)

    def close(self) -> None:
        self.model = None
        gc.collect()


# --- running ------------------------------------------------------------------------------------


@dataclass
class Report:
    settings: Settings
    rows: pd.DataFrame
    cache: pd.DataFrame
    environment: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False

    @property
    def ratios(self) -> pd.DataFrame:
        return paired_ratios(self.rows)

    @property
    def summary(self) -> pd.DataFrame:
        return summarize(self.rows)

    def headline(self) -> str:
        return headline(self.ratios, headline_n(self.rows["n"] if len(self.rows) else [HEADLINE_N]))


def run_benchmark(settings: Settings, host, app_url: str | None = None, model_path: str | None = None,
                  progress: bool = True) -> Report:
    """Measure every path on an engine that is already running (``host``) and, for the ``ui``
    path, an app already launched on it (``app_url``). HF loads and unloads here.

    Ctrl-C stops the measuring: what was measured so far is returned, marked interrupted.
    """
    from tqdm import tqdm

    engine = host.engine
    block_size = engine.vllm_config.cache_config.block_size
    prompt_ids = engine.tokenizer.encode(settings.prompt)
    cache_ids = engine.tokenizer.encode(settings.cache_prompt)
    runners: dict[str, Callable[[int], Arrivals]] = {}
    environment: dict[str, Any] = {"machine": machine(), "kv_cache": kv_cache(engine),
                                   "engine_dtype": str(engine.vllm_config.model_config.dtype).removeprefix("torch."),
                                   "vllm_worker_cores": worker_cores(), "load_before": os.getloadavg()}
    rows: list[dict] = []
    cache_rows: list[dict] = []
    hf: HFBaseline | None = None
    ui = None
    interrupted = False
    with contextlib.ExitStack() as cleanup:
        for mode in ENGINE_PATHS:
            if mode in settings.paths:
                runners[mode] = engine_path(host, mode, settings, prompt_ids)
        if "ui" in settings.paths:
            if app_url is None:
                raise ValueError("the ui path needs an app launched on the engine (app_url)")
            ui = ui_path(host, app_url, settings)
            cleanup.callback(ui.close)
            runners["ui"] = ui
        try:
            if settings.warmup:  # first calls pay for lazy setup (kernels, HTTP, JIT): not timed
                for path, runner in runners.items():
                    runner(1, 2)
            environment["memory_app"] = resident_memory()
            if "hf" in settings.paths:
                model = engine.vllm_config.model_config
                dtype = str(model.dtype).removeprefix("torch.") if settings.hf_dtype == "auto" else settings.hf_dtype
                hf = HFBaseline(model_path or model.model, dtype, settings.hf_threads,
                                pin=environment["vllm_worker_cores"])
                cleanup.callback(hf.close)
                environment["memory_with_hf"] = resident_memory()
                environment["hf"] = {"dtype": hf.dtype, "threads": hf.threads, "pinned_to": hf.pin}
                runners["hf"] = lambda n, max_tokens=None: hf(n, max_tokens or settings.max_tokens, prompt_ids,
                                                              settings)
                if settings.warmup:
                    runners["hf"](1, 2)
            order = [step for step in schedule(settings.paths, settings.ns, settings.repetitions)
                     if step[2] in runners]
            probes = [mode for mode in ENGINE_PATHS if mode in runners]
            probe_n = max(2, headline_n(settings.ns))
            bar = tqdm(total=len(order) + len(probes) * min(settings.cache_probes, settings.repetitions),
                       desc="bench", unit="run",
                       disable=not progress, file=sys.stderr)
            cleanup.callback(bar.close)
            for step, (rep, n, path) in enumerate(order):
                bar.set_postfix_str(f"rep {rep + 1} n={n} {path}")
                here, engine_cpu = cpu_seconds()
                arrivals = runners[path](n)
                after = cpu_seconds()
                row = measurement(path, n, rep, arrivals, len(prompt_ids), block_size)
                rows.append(row | {"cpu_s_here": after[0] - here, "cpu_s_engine": after[1] - engine_cpu,
                                   "load_1min": os.getloadavg()[0]})
                bar.update()
                if rep < settings.cache_probes and (step + 1 == len(order) or order[step + 1][0] != rep):
                    # Last of this repetition: the prefix-cache probe (a prompt of several blocks).
                    for mode in probes:
                        bar.set_postfix_str(f"rep {rep + 1} cache probe {mode}")
                        probe = runners[mode](probe_n, 1, cache_ids)
                        cache_rows.append(measurement(mode, probe_n, rep, probe, len(cache_ids), block_size))
                        bar.update()
        except KeyboardInterrupt:
            interrupted = True
    environment["memory_end"] = resident_memory()
    environment["load_after"] = os.getloadavg()
    return Report(settings, pd.DataFrame(rows), pd.DataFrame(cache_rows), environment, interrupted)


# --- output -------------------------------------------------------------------------------------


def caveats(report: Report) -> list[str]:
    env = report.environment
    hf = env.get("hf", {})
    pinned = f"pinned to cores {hf['pinned_to']}" if hf.get("pinned_to") else "unpinned"
    return [
        (f"vLLM's CPU worker is bound to cores {env.get('vllm_worker_cores')}; HF ran with {hf.get('threads')} "
         f"torch thread(s) in this process, {pinned}; dtype: vLLM {env.get('engine_dtype')}, HF {hf.get('dtype')}."),
        ("vLLM's engine-core process polls while its worker computes (CPU s engine is about twice the wall "
         "time on 2 cores), so vLLM keeps both cores busy where pinned HF uses one."),
        ("HF prefills n copies of the prompt (num_return_sequences); vLLM prefills it once and the children "
         "read it from the prefix cache. HF seeds one generator for the batch; vLLM seeds each sample."),
        ("Token times are arrivals at the caller; tokens in one output share a time (ITL 0). The ui path's "
         "caller is the API client in this process; /sample sends snapshots every 0.25 s."),
        f"The ui path ran mode={report.settings.ui_mode!r} through /sample on the same engine.",
        "Ratios are paired: taken within one repetition (the paths ran back to back), then median/min/max.",
    ]


def write_results(report: Report, out: Path, label: str) -> dict[str, Path]:
    """CSV and JSON tables, and the plotly chart of tokens per second against n."""
    import plotly.graph_objects as go

    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / f"{label}-{name}" for name in
             ("measurements.csv", "summary.csv", "ratios.csv", "cache.csv", "results.json", "tokens_per_s.html")}
    summary, ratios = report.summary, report.ratios
    report.rows.to_csv(files["measurements.csv"], index=False)
    summary.to_csv(files["summary.csv"], index=False)
    ratio_summary(ratios).to_csv(files["ratios.csv"], index=False)
    report.cache.to_csv(files["cache.csv"], index=False)

    def records(frame: pd.DataFrame) -> list:
        return json.loads(frame.to_json(orient="records")) if len(frame) else []

    document = {
        "settings": asdict(report.settings), "environment": report.environment, "caveats": caveats(report),
        "interrupted": report.interrupted, "headline": report.headline(),
        "measurements": records(report.rows), "summary": records(summary),
        "ratios": records(ratio_summary(ratios)), "cache_probe": records(report.cache),
        "goals": records(goals(ratios, cache_frame(report))),
    }
    files["results.json"].write_text(json.dumps(document, indent=1, default=str))

    fig = go.Figure()
    for path, rows in summary.groupby("path", sort=False):
        fig.add_trace(go.Scatter(
            x=rows["n"], y=rows["tokens_per_s_median"], mode="lines+markers", name=path,
            error_y={"type": "data", "symmetric": False,
                     "array": rows["tokens_per_s_max"] - rows["tokens_per_s_median"],
                     "arrayminus": rows["tokens_per_s_median"] - rows["tokens_per_s_min"]}))
    machine_text = report.environment.get("machine", {})
    fig.update_layout(
        title=f"Generated tokens per second against n (median, bars min-max; {report.settings.max_tokens} tokens "
              f"each; {machine_text.get('cpu', '')}, {machine_text.get('usable_cores', '?')} cores)",
        xaxis={"title": "n (samples per request)", "type": "log", "dtick": math.log10(2),
               "tickvals": sorted(summary["n"].unique())},
        yaxis_title="generated tokens / s", height=520)
    fig.write_html(files["tokens_per_s.html"], include_plotlyjs=True)
    return files


def cache_frame(report: Report) -> pd.DataFrame:
    """Every measured cache hit: the probe's, and the main runs' when their prompt spans blocks."""
    frames = [f for f in (report.cache, report.rows) if len(f) and "cache_hit" in f]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["path", "n", "cache_hit"])


def print_report(report: Report, files: dict[str, Path]) -> None:
    env = report.environment
    m = env.get("machine", {})
    kv = env.get("kv_cache", {})
    mem = env.get("memory_app", {})
    print(f"\nMachine: {m.get('cpu')}, {m.get('usable_cores')} cores ({m.get('simd')}), GPU {m.get('gpu')}; "
          f"vLLM {m.get('vllm')}, torch {m.get('torch')}, transformers {m.get('transformers')}")
    print(f"Load average (1 min) before/after: {env.get('load_before', [math.nan])[0]:.1f} / "
          f"{env.get('load_after', [math.nan])[0]:.1f}")
    s = report.settings
    print(f"Settings: n={list(s.ns)}, max_tokens={s.max_tokens} (ignore_eos), {s.repetitions} repetitions, "
          f"seed={s.seed}, temperature={s.temperature}, output_kind={s.output_kind}, "
          f"prompt {report.rows['prompt_tokens'].iloc[0] if len(report.rows) else '?'} tokens; "
          f"dtype vLLM {env.get('engine_dtype')}, HF {env.get('hf', {}).get('dtype')}")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        if len(report.rows):
            print("\nTokens per second (median of repetitions) and the paired ratio to native:")
            print(readable_table(report.summary, report.ratios).to_string(index=False, float_format="%.2f"))
            print("\nGoal ratios (paired, per repetition):")
            print(ratio_summary(report.ratios).to_string(index=False, float_format="%.2f"))
        cache = cache_frame(report).dropna(subset=["cache_hit"])
        if len(cache):
            print("\nPrefix cache, children 1..n-1 (cached tokens / block-aligned prompt tokens):")
            table = cache.groupby(["path", "n", "prompt_tokens", "aligned_prompt_tokens", "cache_source"])
            print(table[["children_cached_tokens", "cache_hit"]].median().reset_index()
                  .to_string(index=False, float_format="%.2f"))
        print(f"\nMemory (engine + UI, before HF loaded): RSS {mem.get('rss_mib', math.nan):.0f} MiB, "
              f"PSS {mem.get('pss_mib', math.nan):.0f} MiB over {mem.get('processes')} processes"
              + (f"; with HF loaded: RSS {env['memory_with_hf']['rss_mib']:.0f} MiB" if "memory_with_hf" in env
                 else ""))
        if kv.get("blocks"):
            print(f"KV cache: {kv['blocks']} blocks x {kv['block_size']} = {kv['tokens']:,} tokens"
                  + (f", {kv['gib']:.2f} GiB" if kv.get("gib") else ""))
        print("\nGoals:")
        print(goals(report.ratios, cache_frame(report)).to_string(index=False, float_format="%.2f"))
    print("\nCaveats:\n" + "\n".join(f"- {c}" for c in caveats(report)))
    print("\nFiles: " + ", ".join(str(p) for p in files.values()))
    if report.interrupted:
        print("(interrupted: the figures cover what was measured before Ctrl-C)")


# --- command line -------------------------------------------------------------------------------


def add_bench_flags(group) -> None:
    from playground.cli import positive_int

    group.add_argument("--quick", action="store_true",
                       help="n=16 only, 16 tokens, 2 repetitions: under 3 minutes on 2 cores, engine start included.")
    group.add_argument("--n", dest="ns", type=positive_int("--n", 256), nargs="+",
                       help="Values of n to measure (default 1 4 8 16 32; --quick: 16).")
    group.add_argument("--max-tokens", type=positive_int("--max-tokens", 4096),
                       help="Tokens per sample, with ignore_eos (default 64; --quick: 16).")
    group.add_argument("--repetitions", type=positive_int("--repetitions", 1000),
                       help="Interleaved repetitions of every path (default 3; --quick: 2).")
    group.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS),
                       help="Paths to measure, in run order (default: native wrapper ui hf).")
    group.add_argument("--prompt", default=None, help="The prompt every path samples (default: a short story start).")
    group.add_argument("--long-prompt", action="store_true",
                       help="Sample the prefix-cache probe's prompt of several KV blocks on every path.")
    group.add_argument("--sample-seed", type=int, default=Settings.seed, help="Seed (sample i: seed + i in vLLM).")
    group.add_argument("--output-kind", choices=("DELTA", "CUMULATIVE"), default=Settings.output_kind,
                       help="output_kind of every vLLM path (default DELTA).")
    group.add_argument("--ui-mode", choices=("native", "wrapper"), default=Settings.ui_mode,
                       help="Mode the ui path asks /sample for (default native: ui/native is then the UI's cost).")
    group.add_argument("--hf-threads", type=int, default=0,
                       help="Torch threads for HF, unpinned (default 0: as many as vLLM's worker has cores, "
                            "pinned to them).")
    group.add_argument("--hf-dtype", choices=("auto", "bfloat16", "float32"), default="auto",
                       help="HF dtype (default auto: the engine's dtype).")
    group.add_argument("--no-warmup", action="store_true", help="Skip the untimed first call of every path.")
    group.add_argument("--out", type=Path, default=Path("bench-results"),
                       help="Folder for the CSV, JSON and HTML results (default bench-results/).")


def settings_from_args(args) -> Settings:
    base = Settings.quick() if args.quick else Settings()
    prompt = LONG_PROMPT if args.long_prompt else (args.prompt or base.prompt)
    return replace(
        base, ns=tuple(args.ns or base.ns), max_tokens=args.max_tokens or base.max_tokens,
        repetitions=args.repetitions or base.repetitions, paths=tuple(dict.fromkeys(args.paths)), prompt=prompt,
        seed=args.sample_seed, output_kind=args.output_kind, ui_mode=args.ui_mode, hf_threads=args.hf_threads,
        hf_dtype=args.hf_dtype, warmup=not args.no_warmup,
        cache_probes=0 if args.long_prompt else base.cache_probes)  # a long prompt measures it in line


def main(argv: list[str] | None = None) -> int:
    # Before vLLM is imported: its log (shutdown included) must not follow our last stdout line.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    from playground.cli import PlaygroundParser

    parser = PlaygroundParser("python -m playground.bench", "Benchmark the playground's sampling paths.",
                              add_bench_flags)
    args, engine_kwargs = parser.parse(list(sys.argv[1:] if argv is None else argv))
    settings = settings_from_args(args)
    if max(settings.ns) > 256:
        parser.parser.error("--n: at most 256")

    from playground.embedded import EmbeddedBackend
    from playground.engine import EngineHost

    if "kv_cache_memory_bytes" not in engine_kwargs:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB, before the engine starts

    started = time.monotonic()
    report = None
    with contextlib.ExitStack() as cleanup:  # closed in reverse: app, then engine, even on Ctrl-C
        try:
            print("starting the engine...", file=sys.stderr)
            host = EngineHost.start(args.model, **engine_kwargs)
            cleanup.callback(host.shutdown)
            app_url = None
            if "ui" in settings.paths:
                from playground.ui import build_app, launch_app

                demo = build_app(EmbeddedBackend(host, max_n=max(32, *settings.ns)))
                _, app_url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1",
                                           server_port=_free_port(), quiet=True)
                cleanup.callback(demo.close)
            report = run_benchmark(settings, host, app_url)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
    if report is None or not len(report.rows):
        return 130
    report.environment["total_s"] = time.monotonic() - started
    publish(report, args.out, "quick" if args.quick else "bench")
    return 130 if report.interrupted else 0


def publish(report: Report, out: Path, label: str) -> None:
    """Write the files, print the tables, and end stdout with the headline ratios."""
    files = write_results(report, out, label)
    print_report(report, files)
    if "total_s" in report.environment:
        print(f"Total time {report.environment['total_s']:.0f} s (after imports)")
    print(report.headline())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
