"""What an engine was, in every way that can change sampled tokens, for the run bundle.

Seeded sampling reproduces only under the same conditions: the same weights in the same dtype,
the same kernels (versions, device, eager or compiled), the same batching limits, and the same
environment settings that change the engine's arithmetic or thread layout. A replay that
diverges can then say which of these differed (``playground.analysis.reproduce``).
"""

from __future__ import annotations

import os
import platform
from typing import Any

# Environment settings that change how the engine computes (thread layout, batch invariance,
# kernels, memory that decides batching). Recorded as set, None when unset.
ENVIRONMENT = (
    "VLLM_CPU_OMP_THREADS_BIND",
    "VLLM_CPU_NUM_OF_RESERVED_CPU",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_BATCH_INVARIANT",
    "VLLM_ATTENTION_BACKEND",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "CUBLAS_WORKSPACE_CONFIG",
    "LD_PRELOAD",
)


def engine_conditions(engine) -> dict[str, Any]:
    """The conditions of ``engine`` (an AsyncLLM or LLMEngine) that a bundle records."""
    import torch
    import vllm
    from vllm.platforms import current_platform

    config = engine.vllm_config
    model, cache, scheduler = config.model_config, config.cache_config, config.scheduler_config
    environment = {name: os.environ.get(name) for name in ENVIRONMENT}
    plan = getattr(engine, "playground_plan", None)  # the thread layout the engine was started with
    if plan is not None and plan.cpu is not None:
        environment |= plan.cpu.environment
    return {
        "model": model.model,
        "dtype": str(model.dtype).removeprefix("torch."),
        "enforce_eager": bool(model.enforce_eager),
        "block_size": cache.block_size,
        "prefix_caching": bool(cache.enable_prefix_caching),
        "max_num_seqs": scheduler.max_num_seqs,
        "max_num_batched_tokens": scheduler.max_num_batched_tokens,
        "chunked_prefill": bool(scheduler.enable_chunked_prefill),
        "max_model_len": model.max_model_len,
        "engine_seed": model.seed,
        "tensor_parallel_size": config.parallel_config.tensor_parallel_size,
        "vllm_version": vllm.__version__,
        "torch_version": torch.__version__,
        "device": "CPU" if current_platform.is_cpu() else current_platform.device_name.upper(),
        "processor": _processor(),
        "cpu_threads": plan.cpu.threads if plan is not None and plan.cpu is not None else None,
        "executor": config.parallel_config.distributed_executor_backend,
        "environment": environment,
    }


def _processor() -> str:
    """The CPU model: kernels (AVX2, AVX-512, AMX) and so rounding differ between them."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
