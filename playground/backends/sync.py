"""The LLMEngine backend: SampleRequests through the sync sampler, each recorded as a Run.

It records through the same ``Recording`` as the async backends (the same checks, seeds, request
header and recorder), with time stamps from ``time.monotonic()``, so every view, analysis and
export reads a batch run like a run from the browser. It is what ``batch`` and the QA matrix's
sync paths use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from vllm import RequestOutput
from vllm.v1.engine.exceptions import EngineDeadError

from playground.backends.base import Recording, admit, prepare
from playground.backends.engine import create_sync_engine, describe_engine, stop_sync_engine
from playground.backends.outputs import OutputReader, child_observation
from playground.backends.pieces import TokenTable
from playground.backends.resources import Workload
from playground.errors import EngineUnavailable, InvalidRequest
from playground.request import DEFAULT_MAX_N, Limits, SampleRequest
from playground.run import Run
from playground.sampling import prompts
from playground.sampling.sync_sampler import SyncParallelSampler

DEAD = "the vLLM engine core has died; start the command again"
LOST = ("the sampler finished this request without an output carrying its id (an output came back under "
        "another request id)")


def _watch_core(llm_engine, stopped: threading.Event, every: float = 0.5) -> None:
    """When its engine core dies, vLLM's sync client marks it dead and shuts its output thread
    down, and a step then waits for an output for good (a batch hung until a second Ctrl-C): this
    watch puts the death where the step waits, so it raises EngineDeadError. It ends with the
    runner (``stopped``); an engine in this process (no client of that kind) needs none."""
    client = getattr(llm_engine, "engine_core", None)
    resources, waiting = getattr(client, "resources", None), getattr(client, "outputs_queue", None)
    if resources is None or waiting is None or not hasattr(resources, "engine_dead"):
        return

    def watch() -> None:
        while not stopped.wait(every):
            if resources.engine_dead:
                waiting.put_nowait(EngineDeadError("the engine core process died"))
                return

    threading.Thread(target=watch, daemon=True, name="playground-engine-core-watch").start()


class SyncRunner:
    """Runs SampleRequests on an ``LLMEngine`` and records each as a ``Run``."""

    def __init__(self, llm_engine, max_n: int = DEFAULT_MAX_N):
        self.engine = llm_engine
        self.sampler = SyncParallelSampler(llm_engine, max_n)
        self.tokenizer = llm_engine.tokenizer
        self.token_table = TokenTable(self.tokenizer, self.decode)  # the texts of its tokens, once each
        self._info = {**describe_engine(llm_engine), "front_end": "LLMEngine"}
        self.limits = Limits.of_engine(max_n, self._info)
        self._running: dict[str, Recording] = {}  # by parent request id
        self._stopped = threading.Event()
        _watch_core(llm_engine, self._stopped)

    @classmethod
    def start(cls, model: str | None = None, *, max_n: int, workload: Workload | None = None,
              **engine_kwargs: Any) -> SyncRunner:
        """Start an LLMEngine (``engine_kwargs``: any engine flag) and the runner over it. Its
        engine core runs in a process of its own: use the runner as a context manager, or call
        ``shutdown()``, so that process ends however the caller does."""
        engine = create_sync_engine(model, workload=workload or Workload(max_n=max_n), **engine_kwargs)
        return cls(engine, max_n=max_n)

    def shutdown(self) -> None:
        self._stopped.set()
        stop_sync_engine(self.engine)

    def __enter__(self) -> SyncRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def info(self) -> dict[str, Any]:
        return {**self._info, "up": True}

    def render_prompt(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        return prompts.render(self.tokenizer, prompt, use_chat_template)

    def decode(self, token_ids: list[int]) -> str:
        return prompts.decode(self.tokenizer, token_ids)

    def submit(self, request: SampleRequest, watch: bool = False) -> Run:
        """Check ``request`` (InvalidRequest, before the engine sees anything), add it, and return
        its live Run; ``step()`` grows it. The request's blank seed is filled in, as in the UI.
        ``watch``: keep every output and record which changed after it was yielded (QA matrix)."""
        request = admit(self, request)  # before the tokenizer sees anything
        recording = Recording(self, prepare(self.limits, request, self.render_prompt(request.prompt,
                                                                                    request.use_chat_template)))
        prepared = recording.prepared
        prepared.watch = watch
        # Per-child facts come through on_child; the merged output carries one child's only.
        recording.reader = reader = OutputReader(self, prepared, child_facts=False)

        def on_child(index: int, output: RequestOutput) -> None:
            recording.observe(child_observation(index, output))

        try:
            self.sampler.add_planned(reader.tokens, reader.params, prepared.plan, on_child=on_child)
        except EngineDeadError as e:
            raise EngineUnavailable(DEAD) from e
        self._running[prepared.request_id] = recording
        return recording.run

    def step(self) -> list[Run]:
        """One engine step for every run in flight; returns the runs that finished in it."""
        return self._step()

    def _step(self) -> list[Run]:
        # Apart from step() so that abort() never runs what wraps step() (the Ctrl-C test helper
        # raises in it: an abort must still hand over the aborted output).
        try:
            outputs = self.sampler.step()
        except EngineDeadError as e:
            self._died()
            raise EngineUnavailable(DEAD) from e
        t = time.monotonic()
        engine_requests = self.engine.get_num_unfinished_requests()  # vLLM counts children
        finished = []
        for output in outputs:
            recording = self._running.get(output.request_id)
            if recording is None:
                continue
            recording.observe(recording.reader.observe(output, t, engine_requests))
            if output.finished:
                if (last := recording.reader.end()) is not None:
                    recording.observe(last)
                del self._running[output.request_id]
                finished.append(recording.finish())  # "aborted" when abort() ended it
        if self._running and not self.sampler.has_unfinished_requests():
            # The sampler ended every parent, but no output reached these runs: theirs came back
            # under another id. An error, not a wait that never ends (for every caller that steps).
            finished += [recording.finish("error", LOST) for recording in self._running.values()]
            self._running.clear()
        return finished

    def abort(self, request_id: str) -> Run | None:
        """Abort one run in flight: every child leaves the engine now, and the run is finished
        "aborted" with the tokens it had (its last event comes from the sampler's abort output)."""
        recording = self._running.get(request_id)
        if recording is None:
            return None
        try:
            self.sampler.abort(request_id)
        except EngineDeadError:  # nothing left to abort: every run in flight ends with the engine
            self._died()
            return recording.run
        self._step()  # the sampler hands over the aborted parent's last output, with no engine step
        return recording.run

    def _died(self) -> None:
        """The engine core died: every run in flight ends "error", with the tokens it had."""
        for recording in self._running.values():
            recording.finish("error", DEAD)
        self._running.clear()

    def abort_all(self) -> list[Run]:
        """Abort every run in flight; returns them, marked aborted."""
        return [self.abort(request_id) for request_id in list(self._running)]

    @property
    def running(self) -> int:
        return len(self._running)

    def record(self, request: SampleRequest, watch: bool = False,
               until: Callable[[Run], bool] | None = None) -> Run:
        """Run one request to the end, or until ``until(run)`` holds, and return its Run. A run
        that ends early (``until``, Ctrl-C, an error) has its children aborted and is marked
        aborted; an exception goes on."""
        run = self.submit(request, watch)
        try:
            while not run.finished and not (until is not None and until(run)):
                self.step()
        finally:
            if not run.finished:
                self.abort(run.request["request_id"])
        return run

    def record_all(self, requests: Iterable[SampleRequest],
                   max_in_flight: int = 1) -> Iterator[tuple[int, Run | InvalidRequest]]:
        """Run many requests, at most ``max_in_flight`` parents at a time; yield
        ``(position, Run)`` as each finishes, or ``(position, InvalidRequest)`` for one refused.

        ``max_in_flight=1`` runs each request alone on an otherwise idle engine (the conditions of
        the UI and of replays, so seeded results reproduce). More in flight fills the engine's
        batch better, but the batch a request shares changes its seeded results (floating-point
        order; no batch-invariant mode on the CPU).

        Closing the iterator early, or an exception (Ctrl-C) inside it, aborts every run in flight.
        """
        pending = iter(enumerate(requests))
        position_of: dict[int, int] = {}  # id(run) -> position
        exhausted = False
        try:
            while True:
                while not exhausted and self.running < max_in_flight:
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    position, request = item
                    try:
                        run = self.submit(request)
                    except InvalidRequest as e:
                        yield position, e
                        continue
                    position_of[id(run)] = position
                if not self.running:
                    return
                for run in self.step():
                    yield position_of.pop(id(run)), run
        finally:
            if self.running:
                self.abort_all()
