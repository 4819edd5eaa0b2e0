"""What the machine and the engine report: the hardware, memory, CPU time, KV cache and the
engine's prefix-cache counter. Heavy imports (torch, vllm, psutil, prometheus_client) stay inside
the functions.

Measures, per path and n (the rest are in ``measure``):
- CPU seconds per request, of this process (engine front end, wrapper, app and API client; for
  ``hf`` the whole generation) and of the engine-core processes: steadier than wall time, so a
  layer's cost shows even when the neighbours' noise hides it in tokens per second;
- the app's resident memory: RSS (and PSS, which counts shared pages once) of this process plus
  the engine-core processes it spawned, taken after the engine and UI warmed up and before the HF
  model is loaded; the KV cache size from the engine's cache config.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A loopback port no one listens on now: for an app the bench (or a test) starts."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def engine_cores() -> list[int] | None:
    """The cores the engine computes on: those vLLM bound its worker process to, or, when the
    worker runs inside the engine-core process, that process's (None when neither is found)."""
    import psutil

    found = {}
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found.setdefault(proc.name(), proc.cpu_affinity())
    return found.get("VLLM::Worker") or found.get("VLLM::EngineCore")


@contextlib.contextmanager
def engine_threads(threads: int, pin: list[int] | None):
    """Torch threads, and the calling thread's cores, set like the engine's while the block runs:
    the baselines (HF, the machine's limit) compute in this process, on the engine's cores."""
    import torch

    previous, affinity = torch.get_num_threads(), os.sched_getaffinity(0)
    torch.set_num_threads(threads)
    if pin:
        os.sched_setaffinity(0, pin)  # this thread only (Linux): torch computes on it
    try:
        yield
    finally:
        torch.set_num_threads(previous)
        if pin:
            os.sched_setaffinity(0, affinity)


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

    # This process's own time from its CPU clock (nanoseconds): /proc counts in ticks of 10 ms, and
    # a short request's frontend work can fall inside one tick.
    return time.process_time(), sum(process_cpu(child) for child in psutil.Process().children(recursive=True))


def process_cpu(proc) -> float:
    """A psutil process's CPU time (user + system); 0.0 once it is gone."""
    import psutil

    with contextlib.suppress(psutil.Error):
        t = proc.cpu_times()
        return t.user + t.system
    return 0.0


def browser_cpu_seconds() -> float:
    """CPU time (user + system) of the headless Chromium this process drives (its browser, GPU,
    renderer and utility processes). Read before a page closes: a renderer's time goes with it.
    On a CPU machine the page's drawing runs on the engine's cores, so it is part of what a page
    run costs the engine."""
    import psutil

    def chromium(proc) -> bool:
        with contextlib.suppress(psutil.Error):
            return "chrom" in proc.name().lower() or "headless_shell" in proc.name()
        return False

    return sum(process_cpu(child) for child in psutil.Process().children(recursive=True) if chromium(child))


def prefix_cache_hits() -> float | None:
    """The engine's prefix-cache hit counter (tokens), summed over engines; None without stats."""
    from prometheus_client import REGISTRY

    total, found = 0.0, False
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "vllm:prefix_cache_hits_total":
                total, found = total + sample.value, True
    return total if found else None
