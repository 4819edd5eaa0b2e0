"""The engine factory: its defaults, explicit overrides, the threads and memory it takes, and a
plain script that uses it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from playground.backends import resources
from playground.backends.engine import describe_engine, engine_args, plan_engine, platform_defaults
from playground.backends.resources import CpuPlan, Workload, kv_cache_tokens, plan_cpu

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import asyncio

    from vllm import SamplingParams

    from playground.backends.engine import create_engine


    async def main():
        engine = create_engine()
        try:
            async for output in engine.generate("The capital of France is",
                                                SamplingParams(max_tokens=5, seed=1), "script-0"):
                pass
            sample = output.outputs[0]
            print("TOKENS", len(sample.token_ids), "FINISHED", output.finished, "TEXT", repr(sample.text))
        finally:
            engine.shutdown()


    if __name__ == "__main__":
        asyncio.run(main())
""")


def test_explicit_arguments_override_the_platform_defaults(model_path):
    args = engine_args(model_path)
    for name, value in platform_defaults().items():
        assert getattr(args, name) == value
    assert args.disable_log_stats is False, "per-request metrics need stats logging"

    args = engine_args(model_path, max_model_len=512, enable_prefix_caching=False, disable_log_stats=True)
    assert (args.max_model_len, args.enable_prefix_caching, args.disable_log_stats) == (512, False, True)


@pytest.mark.slow
def test_create_engine_works_from_a_plain_script_with_a_main_guard(model_path, tmp_path):
    """The README's promise for scripts: ``create_engine()`` with no arguments starts the default
    model, generates and shuts down. A fresh interpreter, so nothing from the test session helps."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=420,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("TOKENS"))
    assert line.startswith("TOKENS 5 FINISHED True TEXT "), line


@pytest.mark.parametrize("threads, environ, cores, expected", [
    (None, {}, 2, (2, True)),  # a small machine: every core, worker in the engine core
    (None, {}, 4, (4, True)),
    (1, {}, 2, (1, True)),  # --cpu-threads wins
    (None, {}, 64, (None, False)),  # a large machine: vLLM's own binding
    (8, {}, 64, (8, True)),
    (None, {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, 2, (None, False)),  # the user's binding is vLLM's to apply
    (1, {"VLLM_CPU_OMP_THREADS_BIND": "0"}, 2, (None, False)),
])
def test_cpu_plan_per_machine(threads, environ, cores, expected):
    plan = plan_cpu(threads, environ, cores)
    assert (plan.threads, plan.one_process) == expected
    if plan.one_process:
        assert plan.environment == {"OMP_NUM_THREADS": str(plan.threads), "OMP_WAIT_POLICY": "PASSIVE"}
    else:
        assert plan.environment == {}
    assert plan_cpu(None, {"OMP_WAIT_POLICY": "ACTIVE"}, 2).environment["OMP_WAIT_POLICY"] == "ACTIVE"


def test_engine_environment_is_set_only_while_the_engine_starts(monkeypatch, engines_started):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    plan = CpuPlan(2, True, {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"})
    with resources.engine_environment(plan):
        assert (os.environ["OMP_NUM_THREADS"], os.environ["OMP_WAIT_POLICY"]) == ("2", "PASSIVE")
    assert os.environ["OMP_NUM_THREADS"] == "7" and "OMP_WAIT_POLICY" not in os.environ


def test_kv_cache_is_sized_from_the_work():
    # A block for every sample that may run at once (capped by the scheduler), at least one full-length
    # sample, and the block vLLM keeps aside.
    assert kv_cache_tokens(Workload(max_n=32, concurrency=1), 2048, 128, max_num_seqs=128) == 33 * 128
    assert kv_cache_tokens(Workload(max_n=32, concurrency=8), 2048, 128, max_num_seqs=128) == 129 * 128
    assert kv_cache_tokens(Workload(max_n=4, concurrency=2), 2048, 128, max_num_seqs=128) == 17 * 128
    assert not resources.sizes_memory_itself({}, {})
    assert resources.sizes_memory_itself({"kv_cache_memory_bytes": 2**30}, {})
    assert resources.sizes_memory_itself({"gpu_memory_utilization": 0.3}, {})
    assert resources.sizes_memory_itself({}, {"VLLM_CPU_KVCACHE_SPACE": "1"})


def test_a_memory_flag_leaves_the_kv_cache_to_vllm(model_path):
    sized = plan_engine(model_path, workload=Workload(max_n=8, concurrency=1))
    per_token = resources.kv_bytes_per_token(sized.config)
    assert sized.kv_cache_bytes == sized.config.cache_config.kv_cache_memory_bytes == (2048 + 128) * per_token
    given = plan_engine(model_path, kv_cache_memory_bytes=3 * 2**28)
    assert given.kv_cache_bytes is None and given.config.cache_config.kv_cache_memory_bytes == 3 * 2**28


def test_the_session_engine_runs_as_planned(host):
    """On this machine (up to 4 cores): the worker computes inside the engine-core process, with
    one OpenMP thread per usable core, and the KV cache holds what the test workload needs."""
    from tests.session_start import WORKLOAD

    info = describe_engine(host.engine)
    cores = len(os.sched_getaffinity(0))
    assert cores <= resources.SMALL_MACHINE_CORES, "this test describes a small machine"
    assert info["cpu_threads"] == cores and info["OMP_WAIT_POLICY"] == "PASSIVE"
    assert info["logprobs_mode"] == "raw_logprobs"  # vLLM's default: what a p shown says it is
    config = host.engine.vllm_config
    assert config.parallel_config.distributed_executor_backend == "uni"
    assert info["kv_cache_tokens"] == kv_cache_tokens(Workload(**WORKLOAD), info["max_model_len"],
                                                      info["block_size"], info["max_num_seqs"])
    engine_cores = [p for p in psutil.Process().children() if p.name() == "VLLM::EngineCore"]  # not a vllm serve's
    assert engine_cores and not any(p.name() == "VLLM::Worker" for core in engine_cores for p in core.children())
    assert all(len(p.cpu_affinity()) == cores for p in engine_cores), "not pinned: the kernel places the threads"
