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
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator

PAUSE = ("keep", False)  # hold requests in flight, keep the caches


class Gate:
    """One per engine: ``together()`` (AsyncLLM) or ``together_sync()`` (LLMEngine) around the
    adds of one run's requests."""

    def __init__(self, engine):
        self.core = getattr(engine, "engine_core", None)
        self._lock = asyncio.Lock()
        self._sync_lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def together(self) -> AsyncIterator[None]:
        core = self.core
        if not (hasattr(core, "pause_scheduler_async") and hasattr(core, "resume_scheduler_async")):
            yield
            return
        async with self._lock:
            await core.pause_scheduler_async(*PAUSE)
            try:
                yield
            finally:
                # Whatever ended the adds (an error, a cancelled task), the scheduler runs again:
                # shielded, so a cancellation cannot leave every request on the engine held.
                await asyncio.shield(core.resume_scheduler_async())

    @contextlib.contextmanager
    def together_sync(self) -> Iterator[None]:
        core = self.core
        if not hasattr(core, "call_utility"):
            yield
            return
        with self._sync_lock:
            core.call_utility("pause_scheduler", *PAUSE)
            try:
                yield
            finally:
                core.call_utility("resume_scheduler")
