"""What one request measures: the settings, the token arrivals and the figures taken from them.

Pure parts only (no vLLM, no Gradio): the run order, the block-aligned prompt, and one row of
results per request.

Figures, per path and n:
- tokens per second: generated tokens / wall time of the request, as its caller saw it;
- time to first token (median over the samples) and p50/p99 inter-token latency, from each
  sample's token arrival times on the caller's side. Tokens that arrive in one output share a
  timestamp and give latencies of 0 (kept: that is what the caller saw). For ``ui`` the caller is
  the API client, and ``/sample`` paces its snapshots (every 0.25 s), which its ITL shows;
  for ``hf`` every sample gets the time of each decoding step (a streamer's ``put``), and for
  ``limit`` the time each step's matmuls ended.
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

CPU seconds, memory and the KV cache size are in ``probes``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

PATHS = ("native", "wrapper", "ui", "hf", "limit")
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
    hf_threads: int = 0  # 0: as many as the engine computes with, on its cores
    hf_dtype: str = "auto"  # auto: the engine's dtype
    warmup: bool = True
    cache_probes: int = 3  # repetitions followed by a prefix-cache probe
    app: bool = True  # start `python app.py` too: its start, its memory, and the page in Chromium
    browser_ns: tuple[int, ...] = (32, 128, 256)
    browser_tokens: int = 64  # long enough to see the page's update rate

    @classmethod
    def quick(cls, **changes) -> Settings:
        """About 3 minutes on a 2-core machine, the engine's and the app's starts included."""
        return cls(**{"ns": (16,), "max_tokens": 16, "repetitions": 2, "cache_probes": 1, "browser_ns": (32, 256),
                      **changes})


@dataclass
class Arrivals:
    """When each sample's tokens reached the caller, in seconds since the request was sent."""

    times: list[list[float]]
    wall: float
    child_cached: list[int | None] | None = None  # per child num_cached_tokens (wrapper only)
    cache_hits: float | None = None  # the engine's prefix-cache hit counter over the request


# --- pure parts: schedule and the figures of one request ----------------------------------------


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
    return row | cache_measures(n, arrivals, prompt_tokens, block_size)


def cache_measures(n: int, arrivals: Arrivals, prompt_tokens: int, block_size: int) -> dict[str, Any]:
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


def bundle_sizes(backend, prompt: str, seed: int, n: int, max_tokens: int) -> list[dict[str, Any]]:
    """Bytes of a run's bundle per sampled token (``Run.to_json``), for every output_kind, without
    logprobs and with the page's top-5: a record must grow with the tokens, not their square."""
    import asyncio

    from playground.analysis import truncate
    from playground.backends.base import record_to_end
    from playground.bundle_format import bundle_bytes_per_token
    from playground.request import OUTPUT_KINDS, SampleRequest


    rows = []
    for kind in OUTPUT_KINDS:
        for logprobs in (None, 5):
            request = SampleRequest(prompt, n=n, seed=seed, max_tokens=max_tokens, ignore_eos=True, output_kind=kind,
                                    logprobs=logprobs, use_chat_template=False)
            run = asyncio.run(record_to_end(backend, request))
            rows.append({"output_kind": kind, "logprobs": logprobs or 0, "n": n, "max_tokens": max_tokens,
                         "bytes_per_token": round(bundle_bytes_per_token(run), 1), "prompt": truncate(prompt, 20)})
    return rows
