"""The ways the QA matrix runs a request: a front end, an engine, and a mode.

Every path records with ``watch=True``, so the backend keeps each output it yielded and the run
says which changed afterwards (the ``no-mutation`` rule), and every path can stop a run at its
first output, so the matrix can see the engine come back to 0 after a stop (``accounting``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from playground.analysis import model_name
from playground.backends.base import record, record_to_end
from playground.request import SampleRequest
from playground.run import Run

SERVER = "vLLM server"  # how a path on a remote server names its engine


@dataclass
class SamplingPath:
    """One way to run a SampleRequest into a Run: a front end, an engine, and a mode."""

    name: str  # "async wrapper", "sync native", "remote wrapper", ...
    mode: str  # "wrapper" or "native"
    engine: str  # which engine the cell runs on; cells on different engines never share a batch
    run: Callable[[SampleRequest], Awaitable[Run]]
    in_flight: Callable[[], Awaitable[int]]  # requests unfinished on that engine now, as it counts them
    # Run the request and stop it as soon as its first output arrived; returns the stopped Run.
    stop: Callable[[SampleRequest], Awaitable[Run]] | None = None


def backend_paths(backend, front_end: str = "async") -> list[SamplingPath]:
    """The wrapper and native paths of a Backend (the embedded AsyncLLM, or a remote server)."""
    info = backend.info()
    if info.get("backend") == "openai":
        engine = f"{SERVER} {info.get('base_url')}"
    else:
        engine = f"AsyncLLM ({model_name(info.get('model', '?'))})"

    async def run(request: SampleRequest) -> Run:
        return await record_to_end(backend, request, watch=True)

    async def stop(request: SampleRequest) -> Run:
        last = None
        # Closing the recording is the stop a closed tab or Ctrl-C makes: the backend's cleanup
        # aborts what is still running before the close returns.
        async with contextlib.aclosing(record(backend, request, watch=True)) as runs:
            async for last in runs:
                if last.events:
                    break
        return last

    return [SamplingPath(f"{front_end} {mode}", mode, engine, run, backend.num_unfinished, stop)
            for mode in ("wrapper", "native")]


def sync_paths(runner, front_end: str = "sync") -> list[SamplingPath]:
    """The wrapper and native paths of a SyncRunner (LLMEngine). A SyncRunner is not thread-safe,
    so its runs are serialized with one lock; each runs on a worker thread (it blocks)."""
    lock = threading.Lock()
    engine = f"LLMEngine ({model_name(runner.info().get('model', '?'))})"

    def record_to_end(request: SampleRequest) -> Run:
        with lock:
            return runner.record(request, watch=True)

    def record_and_stop(request: SampleRequest) -> Run:
        with lock:
            return runner.record(request, watch=True, until=lambda run: bool(run.events))

    async def run(request: SampleRequest) -> Run:
        return await asyncio.to_thread(record_to_end, request)

    async def stop(request: SampleRequest) -> Run:
        return await asyncio.to_thread(record_and_stop, request)

    async def in_flight() -> int:
        return runner.engine.get_num_unfinished_requests()  # the engine counts children

    return [SamplingPath(f"{front_end} {mode}", mode, engine, run, in_flight, stop) for mode in ("wrapper", "native")]
