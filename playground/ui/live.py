"""One run in flight, from the moment it is asked for to its end: a browser session's (kept in
``gr.State``) or an API call's.

Gradio keeps a State's value as the very object a handler returned (``SessionState`` stores it;
only the initial value is deep-copied), so the Stop handler holds the same LiveRun the run
handler is recording into. Stop therefore ends the run itself, whatever moment it comes at:
while the run still waits in the queue, before the first event (FINAL_ONLY is silent until the
end), or mid-stream; it does not depend on Gradio reaching the run handler's generator.

A stop **aborts** the run by its parent id (``Backend.abort``), as ``AsyncLLM.abort`` does: the
run's own stream then ends with one last output holding each sample's tokens so far, finish_reason
"abort", and that output is recorded. Cancelling the recording instead would lose it (a FINAL_ONLY
run has yielded nothing before its end). Only when the abort cannot land (the run had not reached
the engine yet, or the engine does not answer) is the recording cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from playground.backends.base import record
from playground.request import SampleRequest
from playground.run import Run

log = logging.getLogger(__name__)
_END = object()
ABORT_WAIT_S = 5.0  # how long a stop waits for the run's last output before it cancels the recording
ABORT_RETRY_S = 0.1  # an abort that came before the run's children reached the engine is asked again


class LiveRun:
    """A checked request and, once recording starts, its Run and the task that records it."""

    def __init__(self, request: SampleRequest, labels: dict | None = None):
        self.request = request
        self.labels = labels  # what the run is to the page (a branch), in its record from the start
        self.run: Run | None = None  # from record()'s first yield on: before any event
        self.stopped = False
        self._task: asyncio.Task | None = None
        self._backend = None

    @property
    def going(self) -> bool:
        """Asked for and not over: waiting to start, or recording."""
        if self.stopped:
            return False
        return self.run is None or not self.run.finished

    async def follow(self, backend) -> AsyncIterator[Run]:
        """Record the request in a task of its own and yield the Run each time it changes.

        Whoever stops following (a closed tab, a cancelled handler, a closed API call) stops the
        run as Stop does: aborted, its last output recorded. Errors of the run are raised here.
        """
        if self.stopped or self._task is not None:
            return
        self._backend = backend
        updates: asyncio.Queue = asyncio.Queue()

        async def pump() -> None:
            try:
                async for run in record(backend, self.request, labels=self.labels):
                    self.run = run
                    updates.put_nowait(run)
            except Exception as e:  # raised to the follower; CancelledError is a stop
                updates.put_nowait(e)
            finally:
                updates.put_nowait(_END)

        self._task = asyncio.ensure_future(pump())
        try:
            while (item := await updates.get()) is not _END:
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            if not self._task.done():
                # shield: a follower that is being cancelled still lets the stop finish its work
                await asyncio.shield(self.stop_and_wait())

    def stop(self) -> None:
        """End the run now, without waiting: it will not start, or its recording is cancelled
        (status "aborted", without the last output: ``stop_and_wait`` keeps it)."""
        self.stopped = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def stop_and_wait(self, timeout: float = ABORT_WAIT_S) -> Run | None:
        """Stop, and return once the record says how the run ended: aborted by its parent id, with
        the engine's last output recorded; cancelled if the abort did not land within ``timeout``.
        None if recording never began."""
        self.stopped = True
        task = self._task
        if task is None or task.done():
            return self.run
        deadline = time.monotonic() + timeout
        while self.run is not None and not task.done() and time.monotonic() < deadline:
            try:
                await self._backend.abort(self.run.request["request_id"])
            except Exception:  # a dead engine or server: the cancel below ends the run
                log.warning("aborting %s failed", self.run.request.get("request_id"), exc_info=True)
                break
            await asyncio.wait({task}, timeout=ABORT_RETRY_S)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task}, timeout=timeout)
        return self.run
