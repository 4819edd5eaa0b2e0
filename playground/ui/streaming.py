"""Pace a run's stream for the browser.

The engine can yield hundreds of outputs a second; each Gradio yield is one server-sent event. So
updates are gathered and sent at most every ``interval`` seconds (``/sample``'s progress, a sweep's
rows; the page's samples area paces itself by the browser's acknowledgements). A
heartbeat keeps yielding while nothing arrives (FINAL_ONLY is silent until the end), because
Gradio notices a closed tab only when the handler yields: without it, a closed tab would leave the
children running until they finish.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")
async def paced(items: AsyncIterator[T], interval: float = 0.075, heartbeat: float = 0.5) -> AsyncIterator[T | None]:
    """Yield the latest item at most every ``interval`` s, ``None`` as a heartbeat after
    ``heartbeat`` s of silence, and always the last item. Closing this closes ``items``."""
    iterator = items.__aiter__()
    step: asyncio.Task | None = None
    latest: T | None = None
    fresh = False
    last_sent = 0.0
    try:
        while True:
            if step is None:
                step = asyncio.ensure_future(iterator.__anext__())
            now = time.monotonic()
            wait = max(0.0, last_sent + interval - now) if fresh else max(0.0, last_sent + heartbeat - now)
            done, _ = await asyncio.wait({step}, timeout=wait)
            if done:
                try:
                    latest = step.result()
                except StopAsyncIteration:
                    step = None
                    break
                step = None
                fresh = True
            now = time.monotonic()
            if fresh and now - last_sent >= interval:
                yield latest
                fresh, last_sent = False, now
            elif not fresh and now - last_sent >= heartbeat:
                yield None
                last_sent = now
        if fresh:
            yield latest
    finally:
        if step is not None:
            step.cancel()
            await asyncio.gather(step, return_exceptions=True)
        await iterator.aclose()
