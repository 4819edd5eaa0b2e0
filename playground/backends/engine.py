"""Build the embedded vLLM engine, and give it one home event loop.

``create_engine()`` is all a script needs (behind an ``if __name__ == "__main__":`` guard: the
engine core runs in a spawned process). ``EngineHost`` is what the app uses: AsyncLLM binds its
output handler to the event loop of its first request, and the playground has several callers on
different loops (Gradio's server, pytest, the benchmark). The host runs the engine on a thread of
its own and lets any loop stream from it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import gc
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

from playground.backends.conditions import engine_conditions
from playground.backends.model import resolve_model
from playground.backends.resources import (
    CpuPlan,
    Workload,
    apply_cpu_plan,
    engine_environment,
    plan_cpu,
    size_batch,
    size_kv_cache,
    sizes_memory_itself,
)
from playground.errors import SPLIT_PREFILL_CRASH, ModelUnavailable
from playground.request import SampleRequest

log = logging.getLogger(__name__)


def platform_defaults() -> dict[str, Any]:
    """Defaults that make a small model start fast.

    On the CPU: eager mode starts in ~35 s instead of ~130 s with torch.compile. Without native
    bf16 (AVX512-BF16 or AMX), bf16 matmuls take slow fallbacks: float32 decoded 4x faster,
    prefilled 7-10x faster and started 2.5x sooner on a 2-core AVX2 machine. The KV cache and the
    threads are sized in ``playground.backends.resources``.
    """
    from vllm.platforms import current_platform

    # No progress bar for loading weights: the start phases say how long each step took.
    defaults: dict[str, Any] = {"max_model_len": 2048, "enable_prefix_caching": True, "use_tqdm_on_load": False}
    if current_platform.is_cpu():
        defaults["enforce_eager"] = True
        if not cpu_has_native_bf16():
            defaults["dtype"] = "float32"
    return defaults


def cpu_has_native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True  # not Linux: leave the model's dtype alone
    return "avx512_bf16" in flags or "amx_bf16" in flags


def engine_args(model: str | None = None, **engine_kwargs: Any):
    """AsyncEngineArgs for ``model`` (None: the default model); explicit kwargs win over defaults.

    Stats logging stays on because per-request metrics (queue, first-token and last-token times)
    are only filled in when it is.
    """
    from vllm.engine.arg_utils import AsyncEngineArgs

    kwargs = platform_defaults() | {"disable_log_stats": False} | engine_kwargs
    kwargs["model"] = resolve_model(model)
    return AsyncEngineArgs(**kwargs)


@dataclasses.dataclass
class EnginePlan:
    """An engine's config with the playground's choices applied, and what they were."""

    args: Any  # AsyncEngineArgs
    config: Any  # VllmConfig
    cpu: CpuPlan | None
    kv_cache_bytes: int | None  # None: vLLM sized it (a flag, VLLM_CPU_KVCACHE_SPACE, or a GPU)
    prefill: str = "vLLM's default"  # how prompts are prefilled, and why

    def describe(self) -> dict[str, Any]:
        return {**(self.cpu.describe() if self.cpu else {}), "prefill": self.prefill,
                "kv_cache": "sized to the work" if self.kv_cache_bytes else "vLLM's sizing"}


def plan_engine(model: str | None = None, *, cpu_threads: int | None = None, workload: Workload | None = None,
                **engine_kwargs: Any) -> EnginePlan:
    """The engine's config: vLLM's, with the CPU threads, the batch and the KV cache sized to
    ``workload`` (``Workload()``: one run of up to 256 samples at a time) unless a flag already chose them, and
    every prompt prefilled whole where a seeded request's generator cannot be rewound."""
    from vllm.platforms import current_platform

    args = engine_args(model, **engine_kwargs)
    cpu = plan_cpu(cpu_threads) if current_platform.is_cpu() else None
    try:
        config = args.create_engine_config()
    except OSError as e:  # what transformers raises for a path that is not there, or a hub id out of reach
        why = str(e).strip().splitlines()[0].rstrip(".")
        raise ModelUnavailable(f"the model {args.model} cannot be loaded: {why}. Give --model a folder of a "
                               "Hugging Face model, or a hub id this machine can reach (without --model, the "
                               "default model)") from None
    kv_bytes = None
    if cpu is not None:
        apply_cpu_plan(config, cpu)
        if "max_num_seqs" not in engine_kwargs:
            size_batch(config, workload or Workload())
        if not sizes_memory_itself(engine_kwargs):
            kv_bytes = size_kv_cache(config, workload or Workload())
    prefill = "vLLM's default"
    if not generators_rewind(current_platform.device_type):
        prefill = plan_whole_prefill(config, engine_kwargs.get("enable_chunked_prefill"))
    return EnginePlan(args, config, cpu, kv_bytes, prefill)


def generators_rewind(device_type: str) -> bool:
    """Whether a seeded ``torch.Generator`` on ``device_type`` can be rewound (``set_offset``),
    as vLLM does after a step that prefilled a seeded request only in part. CPU generators cannot
    (torch raises); accelerators' Philox generators can, and are not probed, so that the app's
    process never initializes a GPU the engine core needs."""
    if device_type != "cpu":
        return True
    import torch

    try:
        torch.Generator(device="cpu").set_offset(0)
    except RuntimeError:
        return False
    return True


def plan_whole_prefill(config, chunked_flag: bool | None) -> str:
    """Prefill every prompt whole, so no step splits one (see ``SPLIT_PREFILL_CRASH``): chunked
    prefill off, and a step's token budget at least one full context. A person's own
    ``--enable-chunked-prefill`` wins, with a warning that names the crash. Set on the built
    config, as vLLM's own CPU platform does where it turns chunked prefill off."""
    scheduler = config.scheduler_config
    if chunked_flag:
        log.warning("--enable-chunked-prefill was given: %s. Runs whose prompts do not fit in "
                    "max_num_batched_tokens=%d may end the engine.", SPLIT_PREFILL_CRASH,
                    scheduler.max_num_batched_tokens)
        return "chunked (--enable-chunked-prefill): a seeded run whose prompts do not fit one step kills a CPU engine"
    scheduler.enable_chunked_prefill = False
    scheduler.max_num_batched_tokens = max(scheduler.max_num_batched_tokens, config.model_config.max_model_len)
    if scheduler.max_num_scheduled_tokens is not None:
        scheduler.max_num_scheduled_tokens = max(scheduler.max_num_scheduled_tokens, scheduler.max_num_batched_tokens)
    return ("whole prompts (chunked prefill off: a CPU engine cannot rewind a seeded request's generator "
            "after a partial prefill)")


def create_engine(model: str | None = None, *, paced_core: float | None = None, **kwargs: Any):
    """Start and return a running ``AsyncLLM`` (about 20-35 s on the CPU for the default model).

    ``kwargs``: ``cpu_threads``, ``workload`` and any ``AsyncEngineArgs`` field (see plan_engine).
    ``paced_core``: tokens a second from a paced source instead of an engine core (the bench's
    GPU pace, ``playground.backends.paced_core``).
    """
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.executor.abstract import Executor

    plan = plan_engine(model, **kwargs)

    def build():
        return AsyncLLM(vllm_config=plan.config, executor_class=Executor.get_class(plan.config),
                        log_requests=plan.args.enable_log_requests, log_stats=not plan.args.disable_log_stats)

    with engine_environment(plan.cpu):  # the engine core is spawned here and inherits them
        if paced_core:
            from playground.backends.paced_core import with_paced_core

            engine = with_paced_core(paced_core, build)
        else:
            engine = build()
    engine.playground_plan = plan  # what describe_engine reports
    engine.paced_core = paced_core
    return engine


# The collector's thresholds once the app has started (``settle``): a young generation of 50,000
# objects, not 700. At a GPU's pace a run records an object for every output it keeps (250,000 at
# n=256 x 1,000 tokens), and every ten collections of the middle generation may walk all of them
# again; with a young generation this size most short-lived objects are gone before it is
# collected, and a /sample call of that size saw no full collection where it saw five to seven.
# What it costs: cyclic garbage waits for up to 50,000 allocations (a few MB).
GC_THRESHOLDS = (50_000, 10, 10)


def settle() -> None:
    """Once the app has started, what vLLM's own server does once it has: the heap so far is
    frozen, so the garbage collector no longer walks the millions of objects the start made
    (vLLM's, torch's and Gradio's) while runs make new ones, and vLLM's environment variables are
    read once, where its front end would read two with ``os.getenv`` for every output. A variable
    set after this no longer reaches vLLM. And the collector runs less often (``GC_THRESHOLDS``).
    The benchmark's in-process paths settle too, so vLLM's own path is measured as the app runs it."""
    from vllm.envs import enable_envs_cache
    from vllm.utils.gc_utils import freeze_gc_heap

    freeze_gc_heap()
    gc.set_threshold(*GC_THRESHOLDS)
    enable_envs_cache()


def create_sync_engine(model: str | None = None, **kwargs: Any):
    """Start and return a V1 ``LLMEngine`` (add_request + step), with the same defaults as
    ``create_engine``, so the batch path and the app sample from the same engine setup.

    The engine core runs in a spawned process: stop it with ``stop_sync_engine``.
    """
    from vllm import envs
    from vllm.v1.engine.llm_engine import LLMEngine
    from vllm.v1.executor.abstract import Executor

    if kwargs.pop("paced_core", None):
        raise ValueError("--paced-core paces AsyncLLM's engine core (the app, the bench), not LLMEngine's")
    plan = plan_engine(model, **kwargs)
    with engine_environment(plan.cpu):
        engine = LLMEngine(vllm_config=plan.config, executor_class=Executor.get_class(plan.config),
                           log_stats=not plan.args.disable_log_stats,
                           multiprocess_mode=envs.VLLM_ENABLE_V1_MULTIPROCESSING)
    engine.playground_plan = plan
    return engine


def engine_kwargs_from_cli(explicit: dict[str, Any]) -> dict[str, Any]:
    """Keep the parsed CLI values that are AsyncEngineArgs fields (``explicit``: flags given)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    names = {f.name for f in dataclasses.fields(AsyncEngineArgs)} | {"cpu_threads", "paced_core"}
    return {k: v for k, v in explicit.items() if k in names and k != "model"}


def describe_engine(engine) -> dict[str, Any]:
    """What the UI's status line and every run bundle say about the engine."""
    import vllm
    from vllm.platforms import current_platform

    config = engine.vllm_config
    return {
        "backend": "embedded",
        "model": config.model_config.model,
        "served_model_name": config.model_config.served_model_name,
        "vllm_version": vllm.__version__,
        "device": "CPU" if current_platform.is_cpu() else current_platform.device_name.upper(),
        "max_model_len": config.model_config.max_model_len,
        "max_logprobs": config.model_config.max_logprobs,
        "logprobs_mode": str(config.model_config.logprobs_mode),  # what a p shown is (analysis.logprob_note)
        "vocab_size": config.model_config.get_vocab_size(),
        "block_size": config.cache_config.block_size,
        "prefix_caching": bool(config.cache_config.enable_prefix_caching),
        "enforce_eager": config.model_config.enforce_eager,
        "dtype": str(config.model_config.dtype).removeprefix("torch."),
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "kv_cache_tokens": (config.cache_config.num_gpu_blocks or 0) * config.cache_config.block_size or None,
        **(plan.describe() if (plan := getattr(engine, "playground_plan", None)) else {}),
        # An instruct model answers questions only inside its chat template: the UI turns it on.
        "has_chat_template": bool(getattr(engine.tokenizer, "chat_template", None)),
        "conditions": engine_conditions(engine),  # what a bundle needs to say how to reproduce it
        # the bench's source of random tokens at a pace: no model made these samples
        **({"paced_core_tokens_per_s": engine.paced_core} if getattr(engine, "paced_core", None) else {}),
    }


LATEST_EVERY_S = 0.02  # a caller following one changing object is told of its changes at most this often

WARM_UP_LOGPROBS = SampleRequest.logprobs  # the page's default top-k
WARM_UP_SIZES = (2, 1)  # batch sizes: compiled for the first, and checked not to recompile for the other


async def warm_up(engine) -> None:
    """Sample two tokens with logprobs at each of WARM_UP_SIZES before anyone else does.

    vLLM compiles its logprobs kernel (``batched_count_greater_than``, ``torch.compile``d) on the
    first request that asks for logprobs, not at engine start. The page asks for logprobs by
    default, so its first run after a start (or a restart) paid that compile: first text after 11 s
    instead of 1.3 s. A failure here is logged and left for the first run to report.
    """
    from vllm import SamplingParams, TokensPrompt

    from playground.sampling.prompts import for_engine

    try:
        prompt = for_engine(engine, TokensPrompt(prompt_token_ids=engine.tokenizer.encode("Hello")))
        for n in WARM_UP_SIZES:
            params = SamplingParams(n=n, seed=0, max_tokens=2, logprobs=WARM_UP_LOGPROBS, flat_logprobs=True)
            async for _ in engine.generate(dict(prompt), params, f"warm-up-{n}-{time.monotonic_ns()}"):
                pass
    except Exception:
        log.warning("warming up the engine failed; the first run will report why", exc_info=True)


class EngineHost:
    """One AsyncLLM on a dedicated event-loop thread, shared by callers on any loop.

    ``stream()`` runs an async generator on the engine's loop and hands its items to the caller's
    loop. Closing or cancelling the caller's iterator cancels the generator on the engine's loop
    and waits for it, so its ``finally`` (aborting engine requests) has run when the caller goes on.
    """

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="engine-loop", daemon=True)
        self._thread.start()
        self.engine = None

    @classmethod
    def start(cls, model: str | None = None, **engine_kwargs: Any) -> EngineHost:
        host = cls(lambda: create_engine(model, **engine_kwargs))
        host.restart()
        return host

    def restart(self) -> None:
        """(Re)build the engine; the old one, if any, is shut down first.

        The new engine is built on the calling thread, not on the host loop, so the loop keeps
        answering (and callers get a clear "restarting" rather than a hang) meanwhile. AsyncLLM
        starts its output handler on the loop of its first request, which is the host loop.
        """
        old, self.engine = self.engine, None
        if old is not None:
            _shut_down(old)
        engine = self._factory()
        self.run(warm_up(engine))
        self.engine = engine

    def run(self, coro, timeout: float | None = None):
        """Run a coroutine on the engine's loop from any thread that is not that loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def call(self, coro):
        """Await a coroutine on the engine's loop from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def stream(self, make_items: Callable[[], AsyncIterator[Any]], latest: bool = False) -> AsyncIterator[Any]:
        """Iterate ``make_items()`` on the engine's loop, yielding its items on the caller's loop.

        The one hand-off between the two threads: items wait in a deque, and the caller's loop is
        woken once for all the items that came while it was busy, not once per item. ``latest``:
        the items are one object that changes (a Run being recorded), so an item is not queued
        behind one the caller has not taken yet: the caller hears of a change once, and reads the
        object as it is by then.
        """
        caller = asyncio.get_running_loop()
        inbox: collections.deque = collections.deque()
        arrived = asyncio.Event()
        settled = asyncio.Event()

        told_at, due = [0.0], []  # when the caller was last told of a change; (timer, item) to tell it again

        def send(message):
            if latest and message[0] == "item":
                if due or inbox and inbox[-1][0] == "item":
                    return  # the caller will read the same object as it is by then
                wait = told_at[0] + LATEST_EVERY_S - time.monotonic()
                if wait > 0:  # told a moment ago: told again once the moment has passed
                    due.append((self.loop.call_later(wait, put, message), message))
                    return
            elif due:  # the end: the change the caller was to be told of comes first
                timer, item = due[0]
                timer.cancel()
                put(item)
            put(message)

        def put(message):
            due.clear()
            told_at[0] = time.monotonic()
            inbox.append(message)
            if len(inbox) == 1:  # the caller drains the deque before it waits again
                caller.call_soon_threadsafe(arrived.set)

        async def pump():
            try:
                async for item in make_items():
                    send(("item", item))
                send(("end", None))
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # re-raised on the caller's side
                send(("error", e))
            finally:
                if due:  # cancelled: the caller has gone, and is told nothing more
                    due[0][0].cancel()

        async def start():
            task = asyncio.get_running_loop().create_task(pump())
            # A done-callback fires even for a task cancelled before it ever ran.
            task.add_done_callback(lambda _: caller.call_soon_threadsafe(settled.set))
            return task

        task = await self.call(start())
        try:
            while True:
                arrived.clear()
                while inbox:
                    kind, item = inbox.popleft()
                    if kind == "item":
                        yield item
                    elif kind == "end":
                        return
                    else:
                        raise item
                await arrived.wait()
        finally:
            self.loop.call_soon_threadsafe(task.cancel)
            await settled.wait()  # the engine-side finally (aborts) has run

    def shutdown(self) -> None:
        if self.engine is not None:
            engine, self.engine = self.engine, None
            self.run(_call_sync(partial(_shut_down, engine)))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


async def _call_sync(fn):
    fn()


def _shut_down(engine) -> None:
    """Shut an AsyncLLM down once. Its ``__del__`` shuts it down again whenever it is collected,
    which for an engine still referenced at exit is during interpreter teardown, when the
    functions it calls are gone (a TypeError printed at every exit); once done, that is a no-op."""
    engine.shutdown(timeout=exit_wait_s())
    engine.shutdown = lambda *args, **kwargs: None


def stop_sync_engine(engine) -> None:
    """Stop an LLMEngine's engine-core process (``exit_wait_s``)."""
    engine.engine_core.shutdown(timeout=exit_wait_s())


def exit_wait_s() -> float | None:
    """How long a stop waits for the engine-core process to exit before vLLM kills it. On the
    CPU, once its requests have stopped, its teardown is a collection of its whole heap, twice
    (about 4 s here); nothing it holds outlives its process, so a second is enough. Elsewhere
    vLLM's own wait (None): a GPU process releases device memory as it exits."""
    from vllm.platforms import current_platform

    return 1.0 if current_platform.is_cpu() else None
