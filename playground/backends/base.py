"""The seam between the front ends (UI, commands, QA, benchmark) and an engine.

A backend checks and renders a request, then streams Observations; ``Recording`` turns those
into a live Run. Every path records through it: ``record()`` over an async backend (embedded or
remote) and the sync runner over LLMEngine, so a run reads the same whichever path made it. The
embedded backend records on its engine's own thread, where the outputs are made, and its caller
hears of the Run's changes (``follow_planned``); a reader on another thread reads under
``Run.changing``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from playground.backends.recorder import Observation, RunRecorder
from playground.request import Limits, SampleRequest, check_context
from playground.run import LiveBundle, Run
from playground.sampling.plan import Plan, make_plan

STOPPED_REASON = "stopped before the last sample finished"


@dataclass
class Prepared:
    """A checked request, rendered and tokenized, with its plan: every child's id and seed,
    decided once for the engine and the record alike."""

    request: SampleRequest
    rendered_prompt: str
    prompt_token_ids: list[int]
    plan: Plan
    watch: bool = False  # keep every yielded output and report the ones that changed (QA matrix)
    labels: dict[str, Any] = field(default_factory=dict)  # what the run is to its caller (a branch, a sweep)

    @property
    def request_id(self) -> str:
        return self.plan.parent_id

    @property
    def engine_prompt_ids(self) -> list[int]:
        """What the engine is given: the rendered prompt's ids, then a branch's prefix as it is."""
        return self.prompt_token_ids + (self.request.prefix_token_ids or [])

    def record_header(self) -> dict[str, Any]:
        """The ``request`` part of the run bundle: the rendered prompt stays the prompt's, and a
        branch's prefix is ``prefix_token_ids``; samples hold only the tokens sampled."""
        return {
            **self.request.to_dict(),
            "request_id": self.request_id,
            "rendered_prompt": self.rendered_prompt,
            "prompt_token_ids": self.prompt_token_ids,
            "num_prompt_tokens": len(self.prompt_token_ids),
            **self.labels,
        }


class Backend(Protocol):
    """What the front ends need of a source of samples. Nothing here may block an event loop:
    ``info()`` answers from what the backend already knows; the rest is awaited.

    Seven attributes are optional, looked up by name where they are used, so a backend that
    wraps another must pass on those it has: ``token_table`` (its tokenizer's texts, for
    ``Recording`` and ``outputs.table_spelling``), ``resolve`` (the request a replay serves, for
    ``plan_request``), ``engine_of`` (the engine a replay's record names: the one that made the
    tokens, for ``Recording``), ``recorded`` (a run recorded on the engine's own thread, for
    ``follow_planned``), ``library`` (a replay app's runs, listed for Compare), ``no_engine``
    (what a replay app says where an engine is needed, for the QA matrix) and ``stop_watching``
    (an embedded engine stops rebuilding itself as the app stops)."""

    limits: Limits

    def info(self) -> dict[str, Any]:
        """The engine's description (model, device, limits, ``up``), without asking anybody."""

    async def status(self) -> dict[str, Any]:
        """``info()`` brought up to date (a remote backend asks its server whether it is up)."""

    async def render(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        """The exact string the model sees, and its token ids."""

    def decode(self, token_ids: list[int]) -> str: ...

    def stream(self, prepared: Prepared) -> AsyncIterator[Observation]: ...

    async def abort(self, request_id: str) -> None:
        """Abort a run in flight by its parent id, as ``AsyncLLM.abort`` does: its stream ends
        normally with one last output, each unfinished sample holding its tokens so far and
        finish_reason "abort". Unknown or finished ids are ignored."""

    async def num_unfinished(self) -> int:
        """Requests unfinished in the engine now, as the engine counts them."""


def new_request_id() -> str:
    return f"run-{uuid.uuid4().hex[:8]}"


def admit(backend, request: SampleRequest) -> SampleRequest:
    """What is decided before the tokenizer sees a request: every check that needs no tokenizer,
    and what the request leaves to the model (the chat template, when the model has one). The
    caller's request is left as it was: the decided one is returned."""
    request.check(backend.limits)
    if request.use_chat_template is None:
        request = dataclasses.replace(request, use_chat_template=bool(backend.info().get("has_chat_template")))
    return request


def prepare(limits: Limits, request: SampleRequest, rendered: tuple[str, list[int]]) -> Prepared:
    """Check what needs the rendered prompt, and plan the run, before the engine sees anything
    (``admit`` came before rendering: nothing unchecked reaches the tokenizer).

    A blank seed becomes a random one in the plan, once, in every mode, so the run can be replayed
    and the UI can show which seed was used (the Prepared request holds it; the caller's is not
    changed).
    """
    text, token_ids = rendered
    check_context(len(token_ids), request.max_tokens, limits.max_model_len, len(request.prefix_token_ids or []))
    plan = make_plan(new_request_id(), request.n, request.seed, request.mode, seed_native=True)
    return Prepared(dataclasses.replace(request, seed=plan.seed), text, token_ids, plan)


class Recording:
    """One run being recorded: its Prepared request and the recorder growing its Run.

    The single place where a run's header, seeds and engine description are written and where
    its end is stamped, for every path (``record()`` and the sync runner).
    """

    def __init__(self, backend, prepared: Prepared):
        self.prepared = prepared
        # A backend with a tokenizer of its own has a table of its tokens' texts (backends/pieces.py).
        table = getattr(backend, "token_table", None)
        # A replay's record describes the engine that made the tokens it plays (``engine_of``).
        engine_of = getattr(backend, "engine_of", None)
        engine = engine_of(prepared) if engine_of is not None else backend.info()
        # A sample's pieces start inside the character a prompt left incomplete (a branch's point)
        pending = table.pending(prepared.engine_prompt_ids) if table else b""
        self.recorder = RunRecorder(prepared.record_header(), prepared.plan.seeds, engine, backend.decode,
                                    pieces=(lambda: table.stream(pending)) if table else None,
                                    texts=table.alone if table else None)
        self.run: Run = self.recorder.run
        self.reader = None  # its OutputReader, when a front end that steps the engine itself keeps one per run

    def observe(self, observation: Observation) -> bool:
        """Take one observation; True when it was an event (the Run visibly changed)."""
        return self.recorder.observe(observation) is not None

    def finish(self, status: str | None = None, error: str | None = None) -> Run:
        """Stamp the run's end. Without a status, a run whose stream ended with samples aborted
        (an abort by its parent id: Stop, a closed tab) is "aborted", else "finished"."""
        if status is None:
            aborted = any(s.finish_reason == "abort" for s in self.run.samples)
            status, error = ("aborted", STOPPED_REASON) if aborted else ("finished", error)
        return self.recorder.finish(status, error)

    def fail(self, error: BaseException) -> Run:
        """Finish the Run for whatever ended it early: a stop (cancel, close, Ctrl-C) is
        "aborted"; a failure is "error", with its message."""
        if isinstance(error, Exception):
            return self.finish("error", str(error) or type(error).__name__)
        return self.finish("aborted", STOPPED_REASON)


async def plan_request(backend: Backend, request: SampleRequest, labels: dict[str, Any] | None = None,
                       watch: bool = False) -> Prepared:
    """Check ``request`` (nothing reaches the tokenizer or the server unchecked), render its
    prompt (awaited: a slow server must not hold up the event loop), and plan it: everything
    before the engine. InvalidRequest names what cannot run."""
    labels = dict(labels or {})
    after = labels.pop("after", None)  # the run the asking page shows: a replay's "next run" follows it
    resolve = getattr(backend, "resolve", None)  # a replay serves a recorded run's request
    if resolve is not None and not request.prompt.strip():  # no prompt: a replay plays its file's next run
        request, labels = resolve(request, labels, after)
        resolve = None
    request = admit(backend, request)
    if resolve is not None:
        request, labels = resolve(request, labels, after)
        request = admit(backend, request)
    rendered = await backend.render(request.prompt, request.use_chat_template)
    prepared = prepare(backend.limits, request, rendered)
    prepared.labels = labels
    prepared.watch = watch
    return prepared


async def record(backend: Backend, request: SampleRequest, watch: bool = False,
                 labels: dict[str, Any] | None = None) -> AsyncIterator[Run]:
    """Check, plan and run ``request`` (``record_planned`` says what is yielded). ``watch``: the
    backend keeps every output it yields and records which changed afterwards (QA matrix).
    ``labels``: what the run is to its caller, in its record (``{"branch": ...}``, a sweep's value)."""
    prepared = await plan_request(backend, request, labels, watch)
    async with contextlib.aclosing(follow_planned(backend, prepared)) as runs:
        async for run in runs:
            yield run


async def record_to_end(backend: Backend, request: SampleRequest, **options) -> Run:
    """``record`` followed to its end (``options``: its ``watch`` and ``labels``): the finished Run,
    for a caller that does not watch it grow (a command line, the QA matrix, the bench)."""
    finished = None
    async with contextlib.aclosing(record(backend, request, **options)) as runs:
        async for run in runs:  # the same Run, growing, until it is finished
            finished = run
    return finished


def follow_planned(backend: Backend, prepared: Prepared) -> AsyncIterator[Run]:
    """Record a planned request where its outputs are made, its bundle written as it grows, and
    yield the Run as it changes (at the start, as it grows, finished): what ``record`` and a
    LiveRun follow. A backend whose engine has a thread of its own records there (``recorded``),
    and its caller hears of the Run's changes, not of each output; any other is recorded here."""
    recorded = getattr(backend, "recorded", None)
    return recorded(prepared) if recorded is not None else record_live(backend, prepared)


async def record_planned(backend: Backend, prepared: Prepared,
                         observations: AsyncIterator[Observation] | None = None) -> AsyncIterator[Run]:
    """Run a planned request and yield the growing Run: once at the start (no events yet, so a
    caller holds the Run from the first moment), after every event, and once finished.
    ``observations``: the request's observations as the engine's own thread makes them (a backend
    that records there), else ``backend.stream(prepared)``. Each is recorded under
    ``Run.changing``: a reader on another thread sees every output whole.

    Whatever ends the stream (the end, an error, a Stop, a closed tab) the Run is finished with
    the matching status, and the backend's own cleanup aborts what is still running.
    """
    recording = Recording(backend, prepared)
    run = recording.run
    try:
        yield run
        # aclosing: when we are closed, the backend's cleanup (aborting children) runs now,
        # not whenever the garbage collector gets to its generator.
        source = backend.stream(prepared) if observations is None else observations
        async with contextlib.aclosing(source) as observed:
            async for observation in observed:
                with run.changing:
                    changed = recording.observe(observation)
                if changed:
                    yield run
    except BaseException as e:
        with run.changing:
            recording.fail(e)
        raise
    with run.changing:
        recording.finish()
    yield run


async def record_live(backend: Backend, prepared: Prepared,
                      observations: AsyncIterator[Observation] | None = None) -> AsyncIterator[Run]:
    """``record_planned``, with the run's bundle written as it grows (``LiveBundle``) on the
    thread that records it (``follow_planned``)."""
    async with contextlib.aclosing(record_planned(backend, prepared, observations)) as runs:
        async for run in runs:
            if run.live_bundle is None:  # its first moment
                run.live_bundle = LiveBundle(run)
            run.live_bundle.advance()
            yield run
