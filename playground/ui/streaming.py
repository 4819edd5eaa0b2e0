"""Pace a run's stream for the browser.

The engine can yield hundreds of outputs a second; each Gradio yield is one server-sent event. So
updates are gathered and the latest is sent when the reader is ready for it: at most every
``interval`` seconds (``/sample``'s progress, a sweep's rows), or when the browser has painted the
previous message (the samples area: its ``due`` rule reads the acknowledgements, and ``wake`` is
set when one arrives). A heartbeat keeps yielding while nothing arrives (FINAL_ONLY is silent
until the end), because Gradio notices a closed tab only when the handler yields: without it, a
closed tab would leave the children running until they finish.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

T = TypeVar("T")


async def paced(items: AsyncIterator[T], interval: float = 0.075, heartbeat: float = 0.5, *,
                due: Callable[[float], float] | None = None, wake: asyncio.Event | None = None,
                wanted: Callable[[], bool] | None = None) -> AsyncIterator[T | None]:
    """Yield the latest item when it is due, ``None`` as a heartbeat after ``heartbeat`` s without
    a yield, and always the last item. Closing this closes ``items``.

    ``due(last_sent)``: the earliest time (``time.monotonic()``) the next item may go, by default
    ``last_sent + interval``; ``wake``: an event set when ``due`` may have moved (it is cleared
    here); ``wanted()``: the reader wants the latest item again though nothing new came.
    """
    due = due or (lambda last_sent: last_sent + interval)
    wanted = wanted or (lambda: False)
    iterator = items.__aiter__()
    step: asyncio.Task | None = None
    latest: T | None = None
    fresh = False
    last_sent = last_yield = 0.0
    try:
        while True:
            if step is None:
                step = asyncio.ensure_future(iterator.__anext__())
            deadline = last_yield + heartbeat
            if (fresh or wanted()) and latest is not None:
                deadline = min(deadline, due(last_sent))
            woken = asyncio.ensure_future(wake.wait()) if wake is not None else None
            done, _ = await asyncio.wait({step} if woken is None else {step, woken},
                                         timeout=max(0.0, deadline - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
            if woken is not None:
                woken.cancel()
                wake.clear()
            if step in done:
                try:
                    latest = step.result()
                except StopAsyncIteration:
                    step = None
                    break
                step, fresh = None, True
            now = time.monotonic()
            if (fresh or wanted()) and latest is not None and now >= due(last_sent):
                yield latest
                fresh, last_sent, last_yield = False, now, now
            elif now >= last_yield + heartbeat:
                yield None
                last_yield = now
        if latest is not None:
            yield latest
    finally:
        if step is not None:
            step.cancel()
            await asyncio.gather(step, return_exceptions=True)
        await iterator.aclose()
