"""The commands' runner over an async Backend (a remote vLLM server): what ``batch`` and ``sweep``
call on a SyncRunner (``record_all``, ``limits``, ``info``, a context manager), with the backend's
event loop on a thread of its own. So a file of prompts, or a sweep, runs on a server that scales
out the same way, with the same records, as on the engine in this process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from playground.backends.base import record_to_end
from playground.errors import EngineUnavailable, InvalidRequest
from playground.request import SampleRequest
from playground.run import Run

ABORT_WAIT = 30.0  # seconds to wait for the runs still in flight to be aborted when the walk ends early


class LoopRunner:
    """Runs SampleRequests on an async Backend from synchronous code, each recorded as a ``Run``
    by ``record()``: the same checks, seeds and recorder as the page's runs."""

    def __init__(self, backend):
        self.backend = backend
        self.limits = backend.limits
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="playground-runner-loop")
        self._thread.start()
        self._tasks: set[asyncio.Task] = set()  # the runs in flight, touched on the loop's thread only

    def info(self) -> dict[str, Any]:
        return self.backend.info()

    def __enter__(self) -> LoopRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        self._call(self._abort_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(ABORT_WAIT)
        if not self._thread.is_alive():
            self._loop.close()

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(ABORT_WAIT)

    async def _record(self, request: SampleRequest) -> Run:
        """One request to its end. A server's refusal of this request, while the server still
        answers, is that request's InvalidRequest (the walk goes on); one it gives because it is
        down, or gone, is EngineUnavailable (the walk ends, as when an engine core dies)."""
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            return await record_to_end(self.backend, request)
        except EngineUnavailable as e:
            if (await self.backend.status()).get("up"):
                raise InvalidRequest(str(e)) from e
            raise
        finally:
            self._tasks.discard(task)

    async def _abort_all(self) -> None:
        """Cancel every run in flight and wait for each to end: closing a run's recording closes
        its streams, which aborts its requests on the server."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def record_all(self, requests: Iterable[SampleRequest],
                   max_in_flight: int = 1) -> Iterator[tuple[int, Run | InvalidRequest]]:
        """``SyncRunner.record_all``'s contract: at most ``max_in_flight`` requests at a time, each
        yielded as ``(position, Run)`` as it finishes or ``(position, InvalidRequest)`` when
        refused; EngineUnavailable when the server is gone. Closing the iterator early, or an
        exception (Ctrl-C) inside it, aborts every run in flight before it returns."""
        pending = iter(enumerate(requests))
        in_flight: dict[concurrent.futures.Future, int] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < max_in_flight:
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    position, request = item
                    in_flight[asyncio.run_coroutine_threadsafe(self._record(request), self._loop)] = position
                if not in_flight:
                    return
                done, _ = concurrent.futures.wait(in_flight, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in sorted(done, key=in_flight.get):
                    position = in_flight.pop(future)
                    try:
                        outcome = future.result()
                    except InvalidRequest as e:
                        outcome = e
                    yield position, outcome
        finally:
            if in_flight:
                self._call(self._abort_all())
