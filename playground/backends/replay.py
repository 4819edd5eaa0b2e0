"""The replay backend: recorded runs streamed again through the real Backend seam, at a chosen pace.

Two uses, one source. A product feature: ``python app.py --replay runs.jsonl`` (or History's
Replay) plays saved runs as they streamed, at their pace or faster, with every tab live and no
engine: a GPU run demoed on a laptop, a bug report replayed. And a bench tool: a run of any
n x length played at a GPU's pace (10,000 tokens a second) through ``record()``, the recorder, the
live panels, ``/sample`` and the browser, so the app's own cost can be measured where a GPU would
put it. It is never a stand-in for the engine in tests of the engine's paths.

A replay is a run of its own: a new request id, and ``request["replay"] = {"of": <the recorded
run's id>, "pace": "recorded" | "x4" | "10000 tok/s"}`` in its record, so everything that shows,
exports or compares it can say "replay of …". It yields the recorded events as Observations
(``observation``, the one place they are built), each stamped when it is emitted, at the times the
pace gives (``playground.backends.pace``). Stop aborts by parent id as the engines do: the stream
ends with one last output holding each unfinished sample's tokens so far, finish_reason "abort".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from playground.backends.base import Prepared
from playground.backends.pace import Clock, Pace, Warp
from playground.backends.recorder import Observation
from playground.backends.replay_library import Library, source_request
from playground.errors import InvalidRequest, NoEngine
from playground.logprobs import Logprobs
from playground.request import DEFAULT_MAX_N, Limits, SampleRequest
from playground.run import Event, EventOutput, Run

NO_ENGINE = ("this app replays {name} and has no engine: {what} needs one (start `python app.py` without "
             "--replay, and open the file in the History tab to replay it beside the engine)")
RUN_RULE = ("Run plays the file's run of the prompt with the settings closest to the form's, and when no run has "
            "the prompt, the file's next run")


@dataclass
class Script:
    """A recorded run's events as a replay needs them, worked out once per run: per event, the
    recorded time, the sampled tokens it brought, and the positions of each sample's tokens it
    carries (``spans``: index, first, end); the event each sample first shows in and finishes in."""

    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    spans: list[list[tuple[int, int, int]]] = field(default_factory=list)
    first_in: dict[int, int] = field(default_factory=dict)
    finished_in: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, run: Run) -> Script:
        script, counts, delta = cls(), [0] * run.n, run.output_kind == "DELTA"
        for k, event in enumerate(run.events):
            spans = []
            for out in event.outputs:
                first = counts[out.index]
                end = first + len(out.token_ids) if delta else max(first, len(out.token_ids))
                spans.append((out.index, first, end))
                counts[out.index] = end
                script.first_in.setdefault(out.index, k)
                if out.finish_reason is not None:
                    script.finished_in.setdefault(out.index, k)
            script.times.append(event.t)
            script.tokens.append(sum(end - first for _, first, end in spans))
            script.spans.append(spans)
        return script


def observation(source: Run, event: Event, spans: list[tuple[int, int, int]]) -> Observation:
    """``event`` as the recorder takes it, with what the record kept beside it for the tokens in
    ``spans`` (index, first, end): each token's text, and its logprobs (DELTA: the new tokens';
    CUMULATIVE and FINAL_ONLY: every token so far, as vLLM hands them). The one place a replay
    builds Observations."""
    delta = source.output_kind == "DELTA"
    observation = Observation(event=event)
    for index, first, end in spans:
        s = source.samples[index]
        observation.token_texts[index] = s.token_texts[first:end]
        if isinstance(s.logprobs, Logprobs):  # arrays stay arrays: the recorder copies the positions it lacks
            observation.logprobs[index] = (s.logprobs, first if delta else 0)
        elif s.logprobs is not None:
            observation.logprobs[index] = s.logprobs[first:end] if delta else s.logprobs[:end]
    return observation


@dataclass
class Flight:
    """One replay in flight: what Stop and the engine's request count need of it."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Future
    unfinished: set[int]
    told: list[int]  # tokens of each sample emitted so far


@dataclass
class Played:
    """How a replay went, against its schedule (``report``: the app prints it; the bench reads it)."""

    request_id: str
    of: str
    pace: str
    events: int
    tokens: int
    started: float  # wall clock (time.time()) when its first event was scheduled from
    due_s: float  # when its last event was due, seconds after the start
    last_s: float  # when its last event was emitted
    late_s: float  # the most any event was emitted after it was due
    aborted: bool  # stopped, or closed by its consumer, before its last event

    def line(self) -> str:
        how = "stopped" if self.aborted else "played"
        return (f"replay: {self.request_id} {how} {self.of} at {self.pace}: {self.events} events, {self.tokens} "
                f"tokens; started at {self.started:.3f} (wall clock), last event due at +{self.due_s:.3f} s, emitted "
                f"at +{self.last_s:.3f} s (at most {self.late_s:.3f} s late)")


class ReplayBackend:
    """The Backend protocol over recorded runs (see the module docstring)."""

    def __init__(self, library: Library, pace: Pace | None = None, max_n: int = DEFAULT_MAX_N,
                 clock: Clock | None = None, report: Callable[[Played], None] | None = None, note: str | None = None):
        self.library = library
        self.pace = pace or Pace()
        self.clock = clock or Clock()
        self.report = report
        self.limits = Limits(max_n=max(max_n, library.max_n), max_model_len=library.max_model_len,
                             max_logprobs=library.max_logprobs)
        self._scripts: dict[str, Script] = {}
        self._flights: dict[str, Flight] = {}
        engine = library.runs[0].engine
        self._info = {
            "backend": "replay", "model": engine.get("model", "?"), "vllm_version": engine.get("vllm_version", "?"),
            # the recorded run's device: a replay's record says where its tokens were made ("backend" says replay)
            "device": engine.get("device", "?"), "max_model_len": self.limits.max_model_len,
            "max_logprobs": self.limits.max_logprobs,
            "has_chat_template": any(run.request.get("use_chat_template") for run in library.runs),
            "note": note,  # what the page says of the replay (an app that serves saved runs: what Run does)
        }

    @classmethod
    def of(cls, runs: list[Run], pace: Pace | None = None, name: str = "the run", **kwargs) -> ReplayBackend:
        return cls(Library(runs, name), pace, **kwargs)

    def __enter__(self) -> ReplayBackend:
        return self

    def __exit__(self, *exc) -> None:
        """Nothing to shut down: no engine, no process."""

    def info(self) -> dict[str, Any]:
        return {**self._info, "up": True}

    async def status(self) -> dict[str, Any]:
        return self.info()

    async def render(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        found = self.library.rendered(prompt, use_chat_template)
        if found is None:
            raise InvalidRequest(f"{self.library.name} has no run of this prompt: Run plays its next run")
        return found

    def decode(self, token_ids: list[int]) -> str:
        return self.library.decode(token_ids)

    def no_engine(self, what: str) -> NoEngine:
        """The refusal of what needs an engine (a branch, a sweep, the QA matrix), in one sentence."""
        return NoEngine(NO_ENGINE.format(name=self.library.name, what=what))

    def engine_of(self, prepared: Prepared) -> dict[str, Any]:
        """The engine a replay's record names: the recorded run's, whole (its logprobs mode and
        conditions: what its tokens were made under, which Compare and the notes read); the
        request's ``replay`` says the times are the replay's."""
        source = self.library.get(prepared.labels.get("replay", {}).get("of"))
        return dict(source.engine) if source is not None else self.info()

    def resolve(self, request: SampleRequest, labels: dict | None,
                after: str | None = None) -> tuple[SampleRequest, dict]:
        """The request this backend serves for ``request``: the recorded run's own (labels that name
        one, ``{"replay": {"of": id, "pace": ...}}``, get that run; otherwise ``Library.choose``,
        ``after`` the run the asking page shows), with the labels that make its record say it is a
        replay."""
        labels = dict(labels or {})
        asked = labels.pop("replay", None) or {}
        for what, name in (("branch", "a branch"), ("sweep", "a sweep"), ("rerun", "the Reproducibility tab")):
            if what in labels and not asked:
                raise self.no_engine(name)
        note = None
        if "of" in asked:
            source = self.library.get(asked["of"])
            if source is None:
                raise InvalidRequest(f"{self.library.name} holds no run {asked['of']!r} to replay")
        else:
            source, note = self.library.choose(request, after)
        pace = Pace.parse(asked["pace"]) if asked.get("pace") else self.pace
        served, said = source_request(source)
        replay = {"of": source.request.get("request_id"), "pace": pace.label, **({"note": note} if note else {})}
        if source.status == "aborted":  # it ends where the run it plays was stopped, Stop or no Stop
            replay["stopped"] = True
        if earlier := source.request.get("replay"):  # a replay of a replay: the run that sampled its tokens, named
            replay["sampled"] = earlier.get("sampled") or earlier.get("of")
        return served, {**said, **labels, "replay": replay}

    # --- streaming ------------------------------------------------------------------------------

    def _script(self, source: Run) -> Script:
        key = str(source.request.get("request_id"))
        if key not in self._scripts:
            self._scripts[key] = Script.of(source)
        return self._scripts[key]

    async def stream(self, prepared: Prepared) -> AsyncIterator[Observation]:
        if prepared.watch:
            raise NoEngine(NO_ENGINE.format(name=self.library.name, what="the QA matrix"))
        replay = prepared.labels.get("replay") or {}
        source = self.library.get(replay.get("of", ""))
        if source is None:  # record() resolves every request first; a caller that did not gets this
            raise InvalidRequest("a replay's request names no run to replay (record() resolves it)")
        script = self._script(source)
        pace = Pace.parse(replay.get("pace"))
        due = pace.due(script.times, script.tokens)
        warp = Warp(script.times, due)
        loop = asyncio.get_running_loop()
        flight = Flight(loop, loop.create_future(), {s.index for s in source.samples}, [0] * source.n)
        self._flights[prepared.request_id] = flight
        start, started, late, last = self.clock.now(), time.time(), 0.0, 0.0
        emitted = 0
        try:
            for k, event in enumerate(source.events):
                wait = start + due[k] - self.clock.now()
                if wait > 0 and not flight.stop.done():
                    await self.clock.wait(flight.stop, wait)
                if flight.stop.done():
                    yield self._abort(source, flight, prepared.request_id, warp.back(self.clock.now() - start))
                    return
                now = self.clock.now()
                late, last, emitted = max(late, now - start - due[k]), now - start, k + 1
                yield self._emitted(source, script, k, event, now, prepared.request_id, warp, start, flight)
            if source.usage is not None:
                yield Observation(usage=dict(source.usage))
        finally:
            self._flights.pop(prepared.request_id, None)
            if self.report is not None and due:
                self.report(Played(prepared.request_id, str(replay.get("of")), pace.label, emitted,
                                   sum(flight.told), started, due[-1], last, late,
                                   flight.stop.done() or emitted < len(due)))

    def _emitted(self, source: Run, script: Script, k: int, event: Event, now: float, request_id: str, warp: Warp,
                 start: float, flight: Flight) -> Observation:
        """Recorded event ``k`` as emitted now: the replay's parent id, and each sample's engine
        facts (cached prompt tokens when it first shows, its phases when it finishes) on its way."""
        outputs = [EventOutput(o.index, o.text, list(o.token_ids), o.finish_reason, o.stop_reason)
                   for o in event.outputs]
        again = Event(t=now, finished=event.finished, outputs=outputs, num_cached_tokens=event.num_cached_tokens,
                      request_id=request_id, engine_requests=event.engine_requests)
        result = observation(source, again, script.spans[k])
        for index, _, end in script.spans[k]:
            flight.told[index] = end
            s = source.samples[index]
            if script.first_in.get(index) == k and s.num_cached_tokens is not None:
                result.num_cached_tokens[index] = s.num_cached_tokens
            if script.finished_in.get(index) == k:
                flight.unfinished.discard(index)
                if s.metrics:
                    result.metrics[index] = _warped(s, warp, start)
        return result

    def _abort(self, source: Run, flight: Flight, request_id: str, recorded_now: float) -> Observation:
        """The last output of a stopped replay, as the engines end an aborted run: each unfinished
        sample with finish_reason "abort" and its tokens so far (DELTA: none new; CUMULATIVE: all
        so far; FINAL_ONLY, which yielded nothing yet: one output with all n as they stand, the
        tokens each had made by the recorded time the stop stands for)."""
        kind = source.output_kind
        indices = range(source.n) if kind == "FINAL_ONLY" else sorted(flight.unfinished)
        outputs, spans = [], []
        for i in indices:
            s = source.samples[i]
            told = flight.told[i]
            end = _made_by(s, recorded_now) if kind == "FINAL_ONLY" else told
            done = end == len(s.token_ids) and s.finished  # FINAL_ONLY: it had finished by then
            reason, stop = (s.finish_reason, s.stop_reason) if done else ("abort", None)
            ids = [] if kind == "DELTA" else s.token_ids[:end]
            text = "" if kind == "DELTA" else "".join(s.token_texts[:end])
            outputs.append(EventOutput(i, text, list(ids), reason, stop))
            spans.append((i, told, end))
            flight.told[i] = end
        flight.unfinished.clear()
        event = Event(t=self.clock.now(), finished=True, outputs=outputs, request_id=request_id)
        return observation(source, event, spans)

    async def abort(self, request_id: str) -> None:
        """Stop a replay in flight by its parent id (see the module docstring); unknown or finished
        ids are ignored. Safe from any event loop."""
        if (flight := self._flights.get(request_id)) is not None:
            flight.loop.call_soon_threadsafe(_set, flight.stop)

    async def num_unfinished(self) -> int:
        """The samples still streaming in every replay, as an engine counts its child requests."""
        return sum(len(flight.unfinished) for flight in self._flights.values())


def _set(future: asyncio.Future) -> None:
    with contextlib.suppress(asyncio.InvalidStateError):
        future.set_result(None)


def _made_by(sample, recorded_t: float) -> int:
    """How many of a FINAL_ONLY sample's tokens the engine had made by ``recorded_t``: the record
    has its first and last token's times (the engine's, when it reported them; else the one
    event's), and the tokens between are taken as evenly spaced."""
    count = len(sample.token_ids)
    if sample.queued_at is not None and sample.prefill_s is not None:
        first = sample.queued_at + (sample.queued_s or 0.0) + sample.prefill_s
        last = first + (sample.decode_s or 0.0)
    else:
        first = last = sample.token_times[-1] if sample.token_times else 0.0
    if recorded_t >= last:
        return count
    if recorded_t < first or count == 0:
        return 0
    return min(count, 1 + int((recorded_t - first) / (last - first) * (count - 1)))


def _warped(sample, warp: Warp, start: float) -> dict[str, float]:
    """A finished sample's engine timestamps moved onto the replay's clock (monotonic, like the
    engine's), through the pace: the Timing tab then draws the replay's own timeline."""
    metrics = dict(sample.metrics)
    if sample.queued_at is None or not metrics.get("queued_ts"):
        return {k: v for k, v in metrics.items() if not k.endswith("_ts")}
    zero = metrics["queued_ts"] - sample.queued_at  # the recorded run's start on the engine's clock
    for name, value in metrics.items():
        if name.endswith("_ts") and value:
            metrics[name] = start + warp(value - zero)
    return metrics
