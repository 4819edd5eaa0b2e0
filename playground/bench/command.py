"""Running the benchmark: every path on one running engine (``run_benchmark``), and the command
line that starts the engine and the app, runs it and publishes the results (``main``), or runs the
soak instead."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from playground.bench.contenders import HFBaseline, engine_path, ui_path
from playground.bench.limit import MachineLimit
from playground.bench.measure import (
    ENGINE_PATHS,
    LONG_PROMPT,
    PATHS,
    Arrivals,
    Settings,
    bundle_sizes,
    measurement,
    schedule,
)
from playground.bench.probes import cpu_seconds, engine_cores, free_port, kv_cache, machine, resident_memory
from playground.bench.results import Report, headline_n, publish
from playground.commands import exits

# --- running ------------------------------------------------------------------------------------


def run_benchmark(settings: Settings, host, app_url: str | None = None, model_path: str | None = None,
                  progress: bool = True) -> Report:
    """Measure every path on an engine that is already running (``host``) and, for the ``ui``
    path, an app already launched on it (``app_url``). HF loads and unloads here.

    Ctrl-C stops the measuring: what was measured so far is returned, marked interrupted.
    """
    from tqdm import tqdm

    from playground.backends.engine import describe_engine

    engine = host.engine
    block_size = engine.vllm_config.cache_config.block_size
    prompt_ids = engine.tokenizer.encode(settings.prompt)
    cache_ids = engine.tokenizer.encode(settings.cache_prompt)
    runners: dict[str, Callable[[int], Arrivals]] = {}
    info = describe_engine(engine)
    cores = engine_cores()
    threads = info.get("cpu_threads") or (len(cores) if cores else len(os.sched_getaffinity(0)))
    environment: dict[str, Any] = {"machine": machine(), "kv_cache": kv_cache(engine), "engine_dtype": info["dtype"],
                                   "engine_cores": cores, "engine_threads": threads,
                                   "cpu_plan": info.get("cpu_plan"), "load_before": os.getloadavg()}
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
                for runner in runners.values():
                    runner(1, 2)
            environment["memory_app"] = resident_memory()
            pin = cores if cores and len(cores) < len(os.sched_getaffinity(0)) else None  # all: no pinning
            if "hf" in settings.paths:
                model = engine.vllm_config.model_config
                dtype = info["dtype"] if settings.hf_dtype == "auto" else settings.hf_dtype
                hf = HFBaseline(model_path or model.model, dtype, settings.hf_threads or threads,
                                pin=None if settings.hf_threads else pin)
                cleanup.callback(hf.close)
                environment["memory_with_hf"] = resident_memory()
                environment["hf"] = {"dtype": hf.dtype, "threads": hf.threads, "pinned_to": hf.pin}
                runners["hf"] = lambda n, max_tokens=None: hf(n, max_tokens or settings.max_tokens, prompt_ids,
                                                              settings)
                if settings.warmup:
                    runners["hf"](1, 2)
            if "limit" in settings.paths:
                try:
                    limit = MachineLimit(engine.vllm_config.model_config.hf_text_config, info["dtype"], threads, pin)
                except AttributeError as e:  # not a dense decoder with the usual config fields
                    environment["limit"] = f"not measured: {e}"
                else:
                    cleanup.callback(limit.close)
                    runners["limit"] = lambda n, max_tokens=None: limit(n, max_tokens or settings.max_tokens)
                    environment["limit"] = {"threads": threads, "pinned_to": pin}
                    if settings.warmup:
                        runners["limit"](1, 2)
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
    if not interrupted and "native" in runners:
        from playground.backends.embedded import EmbeddedBackend

        bar_n = headline_n(settings.ns)
        environment["bundles"] = bundle_sizes(EmbeddedBackend(host, max_n=bar_n), settings.prompt, settings.seed,
                                              bar_n, settings.max_tokens)
    environment["memory_end"] = resident_memory()
    environment["load_after"] = os.getloadavg()
    return Report(settings, pd.DataFrame(rows), pd.DataFrame(cache_rows), environment, interrupted)


# --- command line -------------------------------------------------------------------------------


def add_bench_flags(group) -> None:
    from playground.commands.cli import positive_int

    group.add_argument("--quick", action="store_true",
                       help="n=16 only, 16 tokens, 2 repetitions: about 3 minutes on 2 cores, the app included.")
    group.add_argument("--n", dest="ns", type=positive_int(256), nargs="+",
                       help="Values of n to measure (default 1 4 8 16 32; --quick: 16).")
    group.add_argument("--max-tokens", type=positive_int(4096),
                       help="Tokens per sample, with ignore_eos (default 64; --quick: 16).")
    group.add_argument("--repetitions", type=positive_int(1000),
                       help="Interleaved repetitions of every path (default 3; --quick: 2).")
    group.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS),
                       help="Paths to measure, in run order (default: native wrapper ui hf limit; limit is "
                            "the machine's: the model's decode matmuls alone).")
    group.add_argument("--prompt", default=None, help="The prompt every path samples (default: a short story start).")
    group.add_argument("--long-prompt", action="store_true",
                       help="Sample the prefix-cache probe's prompt of several KV blocks on every path.")
    group.add_argument("--sample-seed", type=int, default=Settings.seed, help="Seed (sample i: seed + i in vLLM).")
    group.add_argument("--output-kind", choices=("DELTA", "CUMULATIVE"), default=Settings.output_kind,
                       help="output_kind of every vLLM path (default DELTA).")
    group.add_argument("--ui-mode", choices=("native", "wrapper"), default=Settings.ui_mode,
                       help="Mode the ui path asks /sample for (default native: ui/native is then the UI's cost).")
    group.add_argument("--hf-threads", type=int, default=0,
                       help="Torch threads for HF, unpinned (default 0: as many as the engine computes with, "
                            "on its cores).")
    group.add_argument("--hf-dtype", choices=("auto", "bfloat16", "float32"), default="auto",
                       help="HF dtype (default auto: the engine's dtype).")
    group.add_argument("--no-warmup", action="store_true", help="Skip the untimed first call of every path.")
    group.add_argument("--app", action=argparse.BooleanOptionalAction, default=True,
                       help="Then start `python app.py` as a person does: time to a working page, its memory, "
                            "and the page in headless Chromium at n=32, 128 and 256 (--quick: 32 and 256), the "
                            "first run after start included (default on; --no-app skips it).")
    group.add_argument("--baseline", type=Path, default=None, metavar="RESULTS_JSON",
                       help="A results.json of an earlier run (another commit, another flag): print every figure "
                            "the two share side by side, with this run's over the baseline's.")
    group.add_argument("--out", type=Path, default=Path("bench-results"),
                       help="Folder for the CSV, JSON and HTML results (default bench-results/).")
    group.add_argument("--soak", type=float, default=None, metavar="SECONDS",
                       help="Instead of the benchmark: a soak of the app for SECONDS (several clients through "
                            "/sample at once, every mode and output_kind, some cancelled; see playground.bench.soak). "
                            "Exit 1 if a goal is missed.")
    group.add_argument("--soak-clients", type=positive_int(64), default=3,
                       help="Clients of the soak (default 3).")
    from playground.commands.cli import add_max_n_flag

    add_max_n_flag(group, "call of the soak")
    from playground.bench.gpu import add_gpu_flags

    add_gpu_flags(group)


def settings_from_args(args) -> Settings:
    base = Settings.quick() if args.quick else Settings()
    prompt = LONG_PROMPT if args.long_prompt else (args.prompt or base.prompt)
    return replace(
        base, ns=tuple(args.ns or base.ns), max_tokens=args.max_tokens or base.max_tokens,
        repetitions=args.repetitions or base.repetitions, paths=tuple(dict.fromkeys(args.paths)), prompt=prompt,
        seed=args.sample_seed, output_kind=args.output_kind, ui_mode=args.ui_mode, hf_threads=args.hf_threads,
        hf_dtype=args.hf_dtype, warmup=not args.no_warmup, app=args.app,
        cache_probes=0 if args.long_prompt else base.cache_probes)  # a long prompt measures it in line


def main(argv: list[str] | None = None) -> int:
    # Before vLLM is imported: its log (shutdown included) must not follow our last stdout line.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    from playground.commands.cli import PlaygroundParser

    parser = PlaygroundParser("python -m playground.bench", "Benchmark the playground's sampling paths.",
                              add_bench_flags)
    args, engine_kwargs = parser.parse(list(sys.argv[1:] if argv is None else argv))
    if args.soak is not None:
        return soak(args, engine_kwargs)
    settings = settings_from_args(args)
    if args.paced or args.cpu_per_token:  # the app where a GPU would put it (playground.bench.gpu)
        from playground.bench import gpu

        _check_baseline(parser, args.baseline)
        return gpu.run(args, engine_kwargs)
    if max(settings.ns) > 256:
        parser.parser.error("--n: at most 256")
    _check_baseline(parser, args.baseline)

    from playground.backends.embedded import EmbeddedBackend
    from playground.backends.resources import Workload
    from playground.commands.serve import DEFAULT_CONCURRENCY
    from playground.request import DEFAULT_MAX_N

    # The KV cache the app would have, so the memory measures are the app's.
    workload = Workload(max_n=max(DEFAULT_MAX_N, *settings.ns), concurrency=DEFAULT_CONCURRENCY)
    started = time.monotonic()
    report = None
    with contextlib.ExitStack() as cleanup:  # closed in reverse: app, then engine, even on Ctrl-C
        try:
            print("starting the engine...", file=sys.stderr)
            backend = cleanup.enter_context(EmbeddedBackend.start(args.model, max_n=workload.max_n,
                                                                  workload=workload, **engine_kwargs))
            host = backend.host
            app_url = None
            if "ui" in settings.paths:
                from playground.ui import build_app, launch_app

                demo = build_app(backend)
                _, app_url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1",
                                           server_port=free_port(), quiet=True)
                cleanup.callback(demo.close)
            report = run_benchmark(settings, host, app_url)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
    if report is None or not len(report.rows):
        return exits.INTERRUPTED
    if settings.app and not report.interrupted:
        report.environment["app"] = _measure_app(settings, args.out)
    report.environment["total_s"] = time.monotonic() - started
    publish(report, args.out, "quick" if args.quick else "bench", baseline=args.baseline)
    return exits.INTERRUPTED if report.interrupted else exits.OK


def _check_baseline(parser, baseline: Path | None) -> None:
    """A --baseline that cannot be read is said now, not after minutes of measuring."""
    if baseline is not None:
        try:
            json.loads(baseline.read_text())
        except (OSError, ValueError) as e:
            parser.parser.error(f"--baseline {baseline}: not a results.json ({e})")


def soak(args, engine_kwargs: dict) -> int:
    """``--soak SECONDS``: the engine and the app on loopback, then the soak; 0 if every goal held."""
    from playground.backends.embedded import EmbeddedBackend
    from playground.backends.resources import Workload
    from playground.bench.soak import SoakPlan, WatchedBackend, run_soak
    from playground.ui import build_app, launch_app

    plan = SoakPlan(seconds=args.soak, clients=args.soak_clients, max_n=args.max_n)
    with contextlib.ExitStack() as cleanup:
        print("starting the engine...", file=sys.stderr)
        backend = cleanup.enter_context(EmbeddedBackend.start(
            args.model, max_n=args.max_n, workload=Workload(max_n=args.max_n, concurrency=plan.clients),
            **engine_kwargs))
        watched = WatchedBackend(backend)
        demo = build_app(watched)
        _, url, _ = launch_app(demo, concurrency=plan.clients, prevent_thread_lock=True, server_name="127.0.0.1",
                               server_port=free_port(), quiet=True)
        cleanup.callback(demo.close)
        print(f"soaking {url} for {plan.seconds:g} s with {plan.clients} clients...", file=sys.stderr)
        report = run_soak(url, watched, plan)
    print("\n".join(report.lines()))
    return exits.OK if report.ok else exits.FAILED


def _measure_app(settings: Settings, out: Path) -> dict[str, Any]:
    """The app started as a person starts it (after this process's engine is gone)."""
    from playground.bench.browser import measure_app

    print("starting python app.py and its page in Chromium...", file=sys.stderr)
    try:
        return measure_app(free_port(), out, settings.browser_ns, settings.browser_tokens,
                           max(1, settings.repetitions), settings.seed)
    except KeyboardInterrupt:
        return {"error": "interrupted"}
    except Exception as e:  # noqa: BLE001 (whatever went wrong, the engine measures above still stand)
        return {"error": f"{type(e).__name__}: {e}"}
