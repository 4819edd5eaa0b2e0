"""One run in flight, from the moment it is asked for to its end: the run controller that the page
(a browser session's action, kept in ``gr.State``, holds its runs' LiveRuns) and ``/sample`` share.

A run has one state at a time, and every button and path moves it by the same rules:

    QUEUED ──begin──▶ STARTING ──first output──▶ STREAMING ──▶ FINISHED
       │                  │                          │
       └──stop──▶ STOPPED  └──────stop──▶ STOPPING ◀──┘──▶ STOPPED (each sample keeps its tokens)
    STARTING or STREAMING ──a check the engine makes──▶ REFUSED;  ──a failure──▶ ERROR

QUEUED means checked, rendered and planned (``plan_request``: a refusal happens before a LiveRun
exists, so nothing is ever stored for a request that cannot run). The four states at the bottom
are ends: nothing is left in the engine, and the next run may start.

A stop **aborts** the run by its parent id (``Backend.abort``), as ``AsyncLLM.abort`` does: the
run's own stream then ends with one last output holding each sample's tokens so far, finish_reason
"abort", and that output is recorded. Cancelling the recording instead would lose it (a FINAL_ONLY
run has yielded nothing before its end). Only when the abort cannot land (the run had not reached
the engine yet, or the engine does not answer) is the recording cancelled.

Readers wait for the Run to change (``updates``): changes that come while a reader is busy are
read as one, so a slow reader costs the recording nothing and holds no backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

from playground.backends.base import STOPPED_REASON, Backend, Prepared, follow_planned, plan_request
from playground.errors import InvalidRequest, PlaygroundError
from playground.request import SampleRequest
from playground.run import Run

log = logging.getLogger(__name__)
# One line per run at its end (and per request refused before it began), for whoever runs the app:
# which path asked, its shape, how it ended. Never the prompt or the text: a shared app's runs are
# their people's. The app turns it on (``python app.py``); the batch and sweep commands keep it off.
RUNS_LOG = "playground.runs"
runs_log = logging.getLogger(RUNS_LOG)
_going: weakref.WeakSet[LiveRun] = weakref.WeakSet()  # begun and not ended: for the log's lines at the app's stop
ABORT_WAIT_S = 5.0  # how long a stop waits for the run's last output before it cancels the recording
ABORT_RETRY_S = 0.1  # an abort that came before the run's children reached the engine is asked again
NOT_SENT = "stopped before it started: nothing was sent to the engine"


class State(enum.StrEnum):
    QUEUED = "queued"  # checked and planned, waiting for its turn
    STARTING = "starting"  # handed to the backend, no output yet (FINAL_ONLY stays here until its end)
    STREAMING = "streaming"
    STOPPING = "stopping"  # a stop was asked: waiting for the engine's last output
    FINISHED = "finished"
    STOPPED = "stopped"
    REFUSED = "refused"  # a check failed where only the engine or server could make it
    ERROR = "error"  # the engine or the server failed


GOING = frozenset({State.QUEUED, State.STARTING, State.STREAMING, State.STOPPING})


class LiveRun:
    """A planned request and, once it has begun, its Run and the task that records it."""

    def __init__(self, prepared: Prepared, caller: str = ""):
        self.prepared = prepared
        self.caller = caller  # who asked, for the runs' log: "/sample", "page: Run", ...
        self.logged = False  # its line is in the runs' log (written at its end, or as the app stopped)
        self._asked_at = time.monotonic()
        self.state = State.QUEUED
        self.reason: str | None = None  # why it ended, when it did not finish
        self.error: Exception | None = None  # what ended it, for a follower to raise
        self.stop_asked = False  # a stop was asked for (a run may end stopped without one: a replay of a stopped run)
        self.run: Run | None = None  # from the recording's first moment on (before any event)
        self.version = 0  # bumped at every change a reader may want to see
        self._changed = asyncio.Event()
        self._over = asyncio.Event()  # set when it has ended
        self._task: asyncio.Task | None = None
        self._backend: Backend | None = None

    @classmethod
    async def plan(cls, backend: Backend, request: SampleRequest, labels: dict[str, Any] | None = None,
                   caller: str = "") -> LiveRun:
        """Check, render and plan ``request``: InvalidRequest (or EngineUnavailable) before anything
        exists; then a QUEUED LiveRun."""
        try:
            return cls(await plan_request(backend, request, labels), caller)
        except PlaygroundError as e:
            log_refused(caller, f"n={request.n}, {e}")
            raise

    @property
    def request(self) -> SampleRequest:
        return self.prepared.request

    @property
    def request_id(self) -> str:
        return self.prepared.request_id

    @property
    def going(self) -> bool:
        """Asked for and not over: queued, starting, streaming or stopping."""
        return self.state in GOING

    # --- the recording --------------------------------------------------------------------------

    def begin(self, backend: Backend) -> bool:
        """Start recording, in a task of its own. False when the run is no longer queued (it was
        stopped, or another follower began it): the caller then has nothing to follow."""
        if self.state is not State.QUEUED:
            return False
        self.state, self._backend = State.STARTING, backend
        self._task = asyncio.ensure_future(self._record())
        _going.add(self)
        return True

    async def _record(self) -> None:
        try:
            async for run in follow_planned(self._backend, self.prepared):
                self.run = run
                if run.events and self.state is State.STARTING:
                    self.state = State.STREAMING
                self._notify()
        except asyncio.CancelledError:  # a stop that could not abort: the recording marked it aborted
            self._end(State.STOPPED, STOPPED_REASON)
        except InvalidRequest as e:
            self._end(State.REFUSED, str(e), e)
        except Exception as e:
            self._end(State.ERROR, str(e) or type(e).__name__, e)
        else:
            stopped = self.run.status == "aborted"
            self._end(State.STOPPED if stopped else State.FINISHED, self.run.error if stopped else None)

    def _end(self, state: State, reason: str | None = None, error: Exception | None = None) -> None:
        self.state, self.reason, self.error = state, reason, error
        self._over.set()
        self._notify()
        _going.discard(self)
        if not self.logged and runs_log.isEnabledFor(logging.INFO):
            self.logged = True
            runs_log.info("%s", self.log_line())

    def log_line(self, state: str | None = None) -> str:
        """The run's line in the runs' log: id, caller, end, shape, tokens and time; why, when it
        did not finish."""
        request = self.request
        tokens = sum(len(sample.token_ids) for sample in self.run.samples) if self.run is not None else 0
        took = time.monotonic() - self._asked_at
        line = (f"{self.request_id}{_by(self.caller)} {state or self.state}: n={request.n}, {request.mode}, "
                f"{request.output_kind}, {tokens} tokens in {took:.1f} s")
        if tokens and took > 0:
            line += f" ({tokens / took:,.0f} tok/s)"
        return f"{line}: {self.reason}" if self.reason else line

    def _notify(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def updates(self, every: float = 0.0) -> AsyncIterator[Run]:
        """The Run each time it changed since the last one read, until the run has ended (the
        ended Run last). Changes that came while the reader was busy are read as one. ``every``:
        the reader wants the Run at most once in that many seconds while it streams (its first
        output and its end at once), and is not woken in between: at a GPU's pace a run changes a
        hundred times a second."""
        seen = 0
        while True:
            if self.version != seen:
                seen = self.version
                if self.run is not None:
                    yield self.run
                    if every and self.state is State.STREAMING:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._over.wait(), every)
                continue
            if not self.going:
                return
            await self._changed.wait()

    async def follow(self, backend: Backend, every: float = 0.0) -> AsyncIterator[Run]:
        """Begin the run and yield its Run each time it changes (at most once in ``every`` seconds,
        see ``updates``); raise what refused or failed it.

        Whoever stops following (a closed tab, a cancelled handler, a closed API call) stops the
        run as Stop does: aborted, its last output recorded.
        """
        if not self.begin(backend):
            return
        try:
            async for run in self.updates(every):
                yield run
        finally:
            if self.going:
                # shield: a follower that is being cancelled still lets the stop finish its work
                await asyncio.shield(self.stop_and_wait())
        if self.error is not None:
            raise self.error

    # --- stopping -------------------------------------------------------------------------------

    async def stop_and_wait(self, timeout: float = ABORT_WAIT_S) -> Run | None:
        """Stop, and return once the record says how the run ended: aborted by its parent id, with
        the engine's last output recorded; cancelled if the abort did not land within ``timeout``.
        None when it never began (it ends STOPPED with nothing sent)."""
        self.stop_asked = True
        if self.state is State.QUEUED:
            self._end(State.STOPPED, NOT_SENT)
            return None
        task = self._task
        if task is None or task.done():
            return self.run
        if self.state is not State.STOPPING:
            self.state = State.STOPPING
            self._notify()
        deadline = time.monotonic() + timeout
        while self.run is not None and not task.done() and time.monotonic() < deadline:
            try:
                await self._backend.abort(self.request_id)
            except Exception:  # a dead engine or server: the cancel below ends the run
                log.warning("aborting %s failed", self.request_id, exc_info=True)
                break
            await asyncio.wait({task}, timeout=ABORT_RETRY_S)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=timeout)
        return self.run


def _by(caller: str) -> str:
    return f" ({caller})" if caller else ""


def log_cut_short() -> None:
    """The app is stopping: each run still going gets its line now, as the app's stop ends it."""
    for live in list(_going):
        if live.going and not live.logged:
            live.logged = True
            runs_log.info("%s", live.log_line("cut short by the app's stop"))


def log_refused(caller: str, why: str) -> None:
    """A request refused before it began (a check, or a call with a setting the endpoint lacks)."""
    runs_log.info("refused%s before it began: %s", _by(caller), why)
