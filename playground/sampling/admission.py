"""A run's children reach the engine's scheduler in one step.

vLLM adds a parent's children one by one (its own fan-out as ours), each a message to the engine
core, and the core starts a step as soon as it has one request: the first child's prefill then
often runs alone and the others join at the next step. Seeded sampling depends on the batch, so
the same seeded request gave other tokens from run to run on an idle engine, and wrapper and
native differed for no reason of theirs.

So the children are added while the scheduler is paused, in vLLM's "keep" mode (requests in
flight are held, not aborted; no cache is cleared), and the scheduler resumes once the last one
is in: the engine core handles its input in order, so every child is waiting when it schedules
again, and all are admitted in one step. Other runs in flight pause for that moment (a
millisecond or two: two round trips to the engine core). One run at a time passes the gate, so
no run resumes the scheduler while another is between its pause and its last child.

An engine core without the pause (a paced core, a test's stand-in) gets the children as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator

from vllm.v1.engine.exceptions import EngineDeadError

PAUSE = ("keep", False)  # hold requests in flight, keep the caches
DEATH_CHECK_S = 0.25  # while a call to the engine core waits: how often to ask whether it died


class Gate:
    """One per engine: ``together()`` (AsyncLLM) or ``together_sync()`` (LLMEngine) around the
    adds of one run's requests.

    A call to the engine core is not answered once the core has died (vLLM fails its requests,
    not its pending calls), so each call here also watches the client's own dead flag and raises
    EngineDeadError, as an add would: a run never hangs in the gate, nor do the runs behind it."""

    def __init__(self, engine):
        self.core = getattr(engine, "engine_core", None)
        self._lock = asyncio.Lock()
        self._sync_lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def together(self) -> AsyncIterator[None]:
        if not hasattr(self.core, "call_utility_async"):
            yield
            return
        async with self._lock:
            try:
                await self._call("pause_scheduler", *PAUSE)
                yield
            finally:
                # Whatever ended the adds, or the wait for the pause (an error, a cancelled task),
                # the scheduler runs again: shielded, so a cancellation cannot leave every request
                # on the engine held. The core reads its input in order: this comes after the pause.
                await asyncio.shield(self._call("resume_scheduler"))

    @contextlib.contextmanager
    def together_sync(self) -> Iterator[None]:
        if not hasattr(self.core, "call_utility"):
            yield
            return
        with self._sync_lock:
            try:
                self._call_sync("pause_scheduler", *PAUSE)
                yield
            finally:
                self._call_sync("resume_scheduler")

    def _dead(self) -> bool:
        return bool(getattr(getattr(self.core, "resources", None), "engine_dead", False))

    async def _call(self, method: str, *args) -> None:
        if self._dead():
            raise EngineDeadError()
        call = asyncio.ensure_future(self.core.call_utility_async(method, *args))
        while not (await asyncio.wait({call}, timeout=DEATH_CHECK_S))[0]:
            if self._dead():
                call.cancel()
                raise EngineDeadError()
        call.result()

    def _call_sync(self, method: str, *args) -> None:
        if self._dead():
            raise EngineDeadError()
        call: concurrent.futures.Future = concurrent.futures.Future()

        def wait_for_the_answer() -> None:
            try:
                call.set_result(self.core.call_utility(method, *args))
            except BaseException as e:  # noqa: BLE001 (handed to the caller)
                call.set_exception(e)

        # A thread of its own, a daemon: one left waiting on a dead core never holds up the exit.
        threading.Thread(target=wait_for_the_answer, name="admission", daemon=True).start()
        while True:
            try:
                call.result(timeout=DEATH_CHECK_S)
                return
            except concurrent.futures.TimeoutError:
                if self._dead():
                    raise EngineDeadError() from None
