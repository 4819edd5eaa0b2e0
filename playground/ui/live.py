"""One browser session's run in flight, from the Run button to its end, kept in ``gr.State``.

Gradio keeps a State's value as the very object a handler returned (``SessionState`` stores it;
only the initial value is deep-copied), so the Stop handler holds the same LiveRun the run
handler is recording into. Stop therefore ends the run itself, whatever moment it comes at:
while the run still waits in the queue, before the first event (FINAL_ONLY is silent until the
end), or mid-stream; it does not depend on Gradio reaching the run handler's generator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from playground.backends.base import record
from playground.run import Run
from playground.sampling.request import SampleRequest

_END = object()


class LiveRun:
    """A checked request and, once recording starts, its Run and the task that records it."""

    def __init__(self, request: SampleRequest):
        self.request = request
        self.run: Run | None = None  # from record()'s first yield on: before any event
        self.stopped = False
        self._task: asyncio.Task | None = None

    @property
    def going(self) -> bool:
        """Asked for and not over: waiting to start, or recording."""
        if self.stopped:
            return False
        return self.run is None or not self.run.finished

    async def follow(self, backend) -> AsyncIterator[Run]:
        """Record the request in a task of its own and yield the Run each time it changes.

        Whoever stops following (a closed tab, a cancelled handler) stops the run: its children
        are aborted by record()'s cleanup. Errors of the run are raised here.
        """
        if self.stopped or self._task is not None:
            return
        updates: asyncio.Queue = asyncio.Queue()

        async def pump() -> None:
            try:
                async for run in record(backend, self.request):
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
                self._task.cancel()

    def stop(self) -> None:
        """End the run now: it will not start, or its recording is cancelled (status "aborted")."""
        self.stopped = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def stop_and_wait(self, timeout: float = 10.0) -> Run | None:
        """Stop, then wait until the record says how it ended (the backend has aborted every child
        by then). None if recording never began."""
        self.stop()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=timeout)
        return self.run
