"""How much of the machine the embedded engine takes: its CPU threads and its KV cache.

Threads. vLLM's CPU default (``VLLM_CPU_OMP_THREADS_BIND=auto``) runs the model in a worker process
bound to the cores of one NUMA node, less one core it reserves for the engine-core process, which
polls the worker while it computes. On a 2-core machine that is one core computing and one core
polling. Measured on 2-core machines (paired A/B, engines side by side, requests alternating; the
README's Benchmark section has the numbers): binding the worker to both cores was fastest only
when nothing else ran, and 3-5x slower as soon as anything did (an OpenMP thread that loses its
core stalls every parallel region), while the engine core kept polling. What was fast in both
cases: the worker inside the engine-core process (vLLM's single-process executor, the GPU
default), one OpenMP thread per usable core, not pinned, sleeping between parallel regions
(``OMP_WAIT_POLICY=PASSIVE``). It also starts sooner and holds less memory: one process fewer
imports vLLM. So that is the default on machines of up to ``SMALL_MACHINE_CORES`` usable cores;
``--cpu-threads N`` chooses N threads on any machine; a ``VLLM_CPU_OMP_THREADS_BIND`` the user set
is vLLM's own binding and left to vLLM, and so are large machines, where one reserved core costs
little and per-NUMA-node binding is what vLLM is built for.

Memory. The CPU backend reads ``gpu_memory_utilization`` as a share of the NUMA node's memory and
turns it, less what is already used, into KV cache: 0.5 made a 5.7 GiB cache for a model whose
largest run needs a fraction of it. So on the CPU the cache is sized from the work instead
(``kv_cache_tokens``) and handed to vLLM as ``kv_cache_memory_bytes``; an explicit
``--kv-cache-memory-bytes``, ``--gpu-memory-utilization`` or ``VLLM_CPU_KVCACHE_SPACE`` wins. On a
GPU, vLLM's usual ``gpu_memory_utilization`` applies. With an explicit size and eager mode vLLM
also skips its warm-up pass on the CPU, which shortens the start.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from playground.request import DEFAULT_MAX_N

SMALL_MACHINE_CORES = 4
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"
# Engine flags that already say how much memory the KV cache gets.
MEMORY_FLAGS = ("kv_cache_memory_bytes", "gpu_memory_utilization", "num_gpu_blocks_override")


@dataclass(frozen=True)
class CpuPlan:
    """Where the engine computes on a CPU. ``threads`` None: vLLM decides (its own binding)."""

    threads: int | None
    one_process: bool
    environment: dict[str, str] = field(default_factory=dict)
    reason: str = ""

    def describe(self) -> dict[str, Any]:
        return {"cpu_threads": self.threads, "cpu_layout": "engine core + worker in one process"
                if self.one_process else "vLLM's worker process", "cpu_plan": self.reason,
                **{k: v for k, v in self.environment.items()}}


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def plan_cpu(cpu_threads: int | None = None, environ: Mapping[str, str] | None = None,
             cores: int | None = None) -> CpuPlan:
    """The thread layout for this machine (see the module's docstring for why)."""
    environ = os.environ if environ is None else environ
    cores = len(usable_cores()) if cores is None else cores
    if environ.get(BIND_ENV):
        return CpuPlan(None, False, reason=f"{BIND_ENV}={environ[BIND_ENV]} was set: vLLM's binding")
    if cpu_threads is None and cores > SMALL_MACHINE_CORES:
        return CpuPlan(None, False, reason=f"{cores} cores: vLLM's automatic binding")
    threads = cpu_threads or cores
    why = "--cpu-threads" if cpu_threads else f"{cores} usable cores"
    environment = {"OMP_NUM_THREADS": str(threads),
                   "OMP_WAIT_POLICY": environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    return CpuPlan(threads, True, environment, f"{threads} OpenMP thread(s) ({why}), worker in the engine core")


@contextlib.contextmanager
def engine_environment(plan: CpuPlan | None) -> Iterator[None]:
    """Set the plan's variables while the engine's processes are spawned (they read them at
    start), then restore this process's, so later subprocesses (a ``vllm serve``) are unaffected."""
    changes = plan.environment if plan else {}
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def apply_cpu_plan(config, plan: CpuPlan) -> None:
    """Run the worker in the engine-core process when the plan says so (vLLM's CPU platform
    forces its multiprocess executor only to set OpenMP variables per worker: the plan sets them)."""
    if plan.one_process and config.parallel_config.world_size == 1:
        config.parallel_config.distributed_executor_backend = "uni"


# --- memory --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """What the engine serves at most at once: ``concurrency`` runs of up to ``max_n`` samples."""

    max_n: int = DEFAULT_MAX_N
    concurrency: int = 1


def kv_cache_tokens(workload: Workload, max_model_len: int, block_size: int, max_num_seqs: int) -> int:
    """Tokens of KV cache the work needs.

    Every sample the engine may run at once gets a block of its own, which holds its answer at the
    usual lengths (children share the prompt's full blocks through the prefix cache). At once means
    ``concurrency`` runs of ``max_n``, but never more than the scheduler's ``max_num_seqs``. And
    one sample can always reach ``max_model_len`` (vLLM refuses to start otherwise). A run that
    needs more (many long samples) still runs: vLLM keeps samples waiting, or preempts and later
    recomputes them, until blocks free up; a bigger cache buys speed on such runs, not correctness.
    One block more is vLLM's own: it keeps one aside (its null block).
    """
    samples = min(workload.concurrency * workload.max_n, max_num_seqs)
    return (max(samples, math.ceil(max_model_len / block_size)) + 1) * block_size


def kv_bytes_per_token(config) -> int:
    """Bytes of KV cache one token takes in this engine (keys and values, every layer)."""
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    model, parallel = config.model_config, config.parallel_config
    dtype = kv_cache_dtype_str_to_dtype(config.cache_config.cache_dtype, model)
    return (2 * model.get_num_layers(parallel) * model.get_num_kv_heads(parallel) * model.get_head_size()
            * dtype.itemsize)


def sizes_memory_itself(explicit: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> bool:
    """True when the caller already chose the KV cache's memory (a flag or vLLM's variable)."""
    environ = os.environ if environ is None else environ
    return any(explicit.get(name) is not None for name in MEMORY_FLAGS) or bool(environ.get(KV_SPACE_ENV))


def size_batch(config, workload: Workload) -> None:
    """Let one run of ``max_n`` samples be scheduled in one batch: the scheduler's ``max_num_seqs``
    is at least ``max_n`` (vLLM's CPU default is 128 or 256), so no sample of a run waits for others
    of the same run to finish."""
    scheduler = config.scheduler_config
    scheduler.max_num_seqs = max(scheduler.max_num_seqs, workload.max_n)
    scheduler.max_num_batched_tokens = max(scheduler.max_num_batched_tokens, scheduler.max_num_seqs)


def size_kv_cache(config, workload: Workload) -> int:
    """Set the config's KV cache to what ``workload`` needs; returns its size in bytes."""
    cache = config.cache_config
    tokens = kv_cache_tokens(workload, config.model_config.max_model_len, cache.block_size,
                             config.scheduler_config.max_num_seqs)
    cache.kv_cache_memory_bytes = tokens * kv_bytes_per_token(config)
    return cache.kv_cache_memory_bytes
