"""The embedded backend: ParallelSampler over an AsyncLLM that runs in this process.

It also keeps the engine alive: if the engine core process dies (EngineDeadError), requests are
told so at once, the engine is rebuilt in the background, and if that fails the app exits with a
clear message rather than hang.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from vllm.v1.engine.exceptions import EngineDeadError

from playground.backends.base import Prepared, record_live
from playground.backends.engine import EngineHost, describe_engine
from playground.backends.outputs import OutputReader, child_observation
from playground.backends.pieces import TokenTable
from playground.backends.recorder import Observation
from playground.backends.resources import Workload
from playground.errors import RESTARTING, EngineUnavailable
from playground.request import DEFAULT_MAX_N, Limits
from playground.run import Run
from playground.sampling import prompts
from playground.sampling.async_sampler import ParallelSampler

log = logging.getLogger(__name__)
DEAD = "the vLLM engine core has died; the playground is restarting it, try again in a minute"


def _exit(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    os._exit(3)


class EmbeddedBackend:
    def __init__(self, host: EngineHost, max_n: int = DEFAULT_MAX_N,
                 on_restart_failure: Callable[[str], None] = _exit, watch_every: float = 1.0):
        self.host = host
        self.max_n = max_n
        self.on_restart_failure = on_restart_failure
        self.restarting = False
        self.restarts = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._describe()
        # A dead engine is noticed even when nobody is sampling, so the status line is right and
        # the restart is under way before the next request.
        threading.Thread(target=self._watch, args=(watch_every,), name="engine-watchdog", daemon=True).start()

    @classmethod
    def start(cls, model: str | None = None, *, max_n: int, workload: Workload | None = None,
              **engine_kwargs: Any) -> EmbeddedBackend:
        """Start an AsyncLLM (``engine_kwargs``: any engine flag) and the backend over it. Its
        engine core runs in a process of its own: use the backend as a context manager, or call
        ``shutdown()``, so that process ends however the caller does."""
        host = EngineHost.start(model, workload=workload or Workload(max_n=max_n), **engine_kwargs)
        return cls(host, max_n=max_n)

    def shutdown(self) -> None:
        self._closed.set()
        self.host.shutdown()

    def stop_watching(self) -> None:
        """The app is stopping: an engine that dies now is not rebuilt. Ctrl-C in a terminal
        reaches the engine core too, and it is gone before the app has closed its server."""
        self._closed.set()

    def __enter__(self) -> EmbeddedBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def _describe(self) -> None:
        engine = self.host.engine
        self._info = describe_engine(engine)
        self.limits = Limits.of_engine(self.max_n, self._info)
        self.tokenizer = engine.tokenizer
        self.token_table = TokenTable(self.tokenizer, self.decode)  # the texts of its tokens, once each
        self.sampler = ParallelSampler(engine, self.max_n)  # one per engine: abort() finds parents by id

    def info(self) -> dict[str, Any]:
        return {**self._info, "up": not self.restarting and not self._dead(), "restarting": self.restarting,
                "restarts": self.restarts}

    def _dead(self) -> bool:
        engine = self.host.engine
        return engine is None or engine.errored

    async def status(self) -> dict[str, Any]:
        return self.info()

    def render_prompt(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        return prompts.render(self.tokenizer, prompt, use_chat_template)

    async def render(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        return self.render_prompt(prompt, use_chat_template)  # a local tokenizer: microseconds

    def decode(self, token_ids: list[int]) -> str:
        return prompts.decode(self.tokenizer, token_ids)

    def _check_up(self) -> None:
        if self.restarting:
            raise EngineUnavailable(RESTARTING)
        if self._dead():
            self.restart()
            raise EngineUnavailable(DEAD)

    async def stream(self, prepared: Prepared) -> AsyncIterator[Observation]:
        # aclosing: a stop returns only once the engine-side abort has run (as vLLM's own
        # generate() does), so the engine counts 0 requests the moment the stop is done.
        async with contextlib.aclosing(self.host.stream(lambda: self._observations(prepared))) as observations:
            async for observation in observations:
                yield observation

    async def recorded(self, prepared: Prepared) -> AsyncIterator[Run]:
        """The run recorded on the engine's own thread (``record_live``), its caller told that the
        Run changed at most every ``LATEST_EVERY_S`` (``EngineHost.stream``). At a GPU's pace an
        output costs less read on the thread that made it than handed to another, where the Run's
        lists and the output's objects sit in another core's cache; and the caller's loop, which
        serves every browser, wakes a few dozen times a second instead of for every output."""
        async with contextlib.aclosing(self.host.stream(
                lambda: record_live(self, prepared, self._observations(prepared)), latest=True)) as runs:
            async for run in runs:
                yield run

    async def _observations(self, prepared: Prepared) -> AsyncIterator[Observation]:
        """The request's observations, on the engine's loop."""
        self._check_up()
        request = prepared.request
        # Native FINAL_ONLY builds its one output from the last child to finish, so the output's
        # engine facts cannot be attributed to outputs[0]; the wrapper reports them per child.
        attribute = request.mode == "native" and (request.output_kind != "FINAL_ONLY" or request.n == 1)
        reader = OutputReader(self, prepared, child_facts=attribute)
        sampler = self.sampler
        facts = Observation()  # what the children said of themselves since the last output

        def on_child(index, output):
            child_observation(index, output, facts)

        try:
            async for output in sampler.sample(reader.tokens, reader.params, prepared.plan, on_child=on_child):
                # Counted as the caller receives the output: vLLM counts each child, not the parent.
                observation = reader.observe(output, time.monotonic(), sampler.engine.get_num_unfinished_requests())
                # One observation per output: the children's own facts ride along (recorded first).
                observation.num_cached_tokens = {**facts.num_cached_tokens, **observation.num_cached_tokens}
                observation.metrics = {**facts.metrics, **observation.metrics}
                facts.num_cached_tokens, facts.metrics = {}, {}
                yield observation
        except EngineDeadError as e:
            self.restart()
            raise EngineUnavailable(DEAD) from e
        if (last := reader.end()) is not None:
            yield last

    async def abort(self, request_id: str) -> None:
        """Abort a run by its parent id through the sampler (see ``Backend.abort``): the run's own
        stream then yields the engine's last output, so every output_kind keeps what it had."""
        if self.restarting or self._dead():
            return  # its requests died with the engine
        await self.host.call(self.sampler.abort(request_id))

    async def num_unfinished(self) -> int:
        engine = self.host.engine
        if self.restarting or engine is None:
            return 0

        async def count():
            return engine.get_num_unfinished_requests()

        return await self.host.call(count())

    # --- keeping the engine alive ---------------------------------------------------------------

    def restart(self) -> None:
        """Rebuild a dead engine in the background (once at a time)."""
        with self._lock:
            if self.restarting:
                return
            self.restarting = True
        threading.Thread(target=self._restart, name="engine-restart", daemon=True).start()

    def _restart(self) -> None:
        log.warning("The vLLM engine core died; starting a new engine.")
        try:
            self.host.restart()
            self._describe()
            self.restarts += 1
            log.warning("The vLLM engine is back up.")
        except Exception as e:  # the app cannot work without an engine: say why, and exit
            self.on_restart_failure(f"the vLLM engine died and could not be restarted: {e}")
        finally:
            self.restarting = False

    def _watch(self, every: float) -> None:
        while not self._closed.wait(every):
            if not self.restarting and self.host.engine is not None and self.host.engine.errored:
                self.restart()
