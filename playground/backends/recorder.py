"""From observations to a Run: what a backend hands over, and the recorder that builds the record.

A backend (embedded, sync, remote) turns what its engine yields into ``Observation``s; the
``RunRecorder`` grows one ``Run`` from them, so the UI can show it while it grows and every path
records runs the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from playground.backends.pieces import DecodedPieces, TablePieces
from playground.bundle_events import stamp
from playground.event_output import SpanOutput
from playground.logprobs import Logprobs, TokenLogprob
from playground.run import Event, EventOutput, Run, Sample

# A sample's logprobs as a backend hands them over: TokenLogprobs (a remote server's), or
# ``(FlatLogprobs, first)``: vLLM's flat arrays of the output, from position ``first`` on.
LogprobsIn = list[TokenLogprob] | tuple[Any, int]


@dataclass
class Observation:
    """What a backend hands the recorder: an event (or None, for facts about a child alone) and
    per-sample facts that are recorded on the samples rather than in the event."""

    event: Event | None = None
    logprobs: dict[int, LogprobsIn] = field(default_factory=dict)  # the event's new positions, by index
    num_cached_tokens: dict[int, int] = field(default_factory=dict)
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    # One text piece per new token of this event's outputs, by index, when the backend has them
    # exact (a remote server streams each token's text); otherwise the recorder decodes.
    token_texts: dict[int, list[str]] = field(default_factory=dict)
    # CUMULATIVE outputs that carry only what their index added since its previous output: index ->
    # (token ids, characters of text) it had before (backends/outputs.SoFar).
    additions: dict[int, tuple[int, int]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None  # the server's token counts for the run, when it reports them
    mutated_events: list[int] | None = None  # from a backend that watched what it yielded


class RunRecorder:
    """Builds a Run from observations as they arrive, so the UI can show it while it grows.

    Token arrival times are taken on our side for every output kind (they are what the caller
    saw); engine-side metrics are added when the engine reports them.
    """

    def __init__(
        self,
        request: dict[str, Any],
        seeds: list[int | None],
        engine: dict[str, Any] | None = None,
        decode: Callable[[list[int]], str] | None = None,
        pieces: Callable[[], TablePieces | DecodedPieces] | None = None,
        texts: Callable[[int], str] | None = None,
    ):
        """``pieces`` makes a sample's piece decoder (the backend's token table), else ``decode``
        decodes pieces in a window; ``texts(token_id)``: a token's text alone, for logprobs' ids."""
        self.run = Run(
            request=request,
            samples=[Sample(index=i, seed=seed) for i, seed in enumerate(seeds)],
            engine=engine or {},
            started_at=time.time(),
        )
        self.run.changing = threading.Lock()  # see Run.changing
        self.delta = request.get("output_kind") == "DELTA"
        self.t0 = time.monotonic()
        make = pieces or ((lambda: DecodedPieces(decode)) if decode else None)
        self._pieces = [make() for _ in seeds] if make else None
        self._text = texts
        self.table: dict[int, str] = {}  # token id -> text, for the samples' Logprobs
        self._held: list[list[EventOutput]] = [[] for _ in seeds]  # CUMULATIVE outputs held as lengths

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def observe(self, observation: Observation) -> Event | None:
        samples = self.run.samples
        for index, cached in observation.num_cached_tokens.items():
            samples[index].num_cached_tokens = cached
        for index, metrics in observation.metrics.items():
            samples[index].metrics = metrics
            self._phases(samples[index], metrics)
        if observation.usage is not None:
            self.run.usage = observation.usage
        if observation.mutated_events is not None:
            self.run.mutated_events = list(observation.mutated_events)
        event = observation.event
        if event is None:
            return None
        event.t -= self.t0  # backends stamp time.monotonic(); the record keeps time since start
        self.run.events.append(event)
        if self.delta:
            self._delta(event, observation)
            return event
        logprobs = observation.logprobs
        for k, out in enumerate(event.outputs):
            s = samples[out.index]
            new = self._so_far(s, out, observation.additions.get(out.index))
            event.outputs[k] = held = EventOutput.so_far(s, out.finish_reason, out.stop_reason)
            self._held[out.index].append(held)
            self._add_tokens(s, observation.token_texts, event.t, new)
            if out.index in logprobs:
                self._logprobs(s, logprobs[out.index], len(new))
            if out.finish_reason is not None:
                s.finish_reason = out.finish_reason
                s.stop_reason = out.stop_reason
        return event

    def _delta(self, event: Event, observation: Observation) -> None:
        """A DELTA event's outputs onto their samples, each held as the span of ids it added. At a
        GPU's pace this loop runs for every sampled token (one output of one token, most often),
        so what it reads is read once."""
        samples, texts, logprobs, t = self.run.samples, observation.token_texts, observation.logprobs, event.t
        spans = []
        for out in event.outputs:
            index, new, text, finish = out.index, out.token_ids, out.text, out.finish_reason
            s = samples[index]
            ids = s.token_ids
            spans.append(SpanOutput(index, s, len(ids), len(new), text, finish, out.stop_reason))
            s.add_text(text)
            ids.extend(new)
            self._add_tokens(s, texts, t, new)
            if index in logprobs:
                self._logprobs(s, logprobs[index], len(new))
            if finish is not None:
                s.finish_reason, s.stop_reason = finish, out.stop_reason
        event.outputs = spans

    def _add_tokens(self, s: Sample, texts: dict[int, list[str]], t: float, new: list[int]) -> None:
        """The new tokens' arrival times and pieces (the backend's, in ``texts``, else decoded here)."""
        stamp(s.token_times, t, len(new))
        pieces = texts.get(s.index)
        if pieces is not None:
            s.token_texts.extend(pieces)
        elif self._pieces is not None:
            s.token_texts.extend(self._pieces[s.index].add(new))

    def _so_far(self, sample: Sample, out: EventOutput, addition: tuple[int, int] | None) -> list[int]:
        """A CUMULATIVE output onto its sample, growing its text and ids in place (the event then
        holds their lengths); the token ids it added."""
        if addition is not None and addition == (len(sample.token_ids), len(sample.text)):
            new = out.token_ids
            sample.text += out.text
        else:
            if addition is not None:  # an addition to something else: the whole cannot be known
                raise ValueError(f"output for sample {out.index} adds to {addition}, the sample has "
                                 f"{(len(sample.token_ids), len(sample.text))}")
            ids, text = out.token_ids, out.text
            new = ids[len(sample.token_ids):]
            if ids[:len(sample.token_ids)] != sample.token_ids or not text.startswith(sample.text):
                for held in self._held[out.index]:  # they read a prefix that is about to change
                    held.hold()
                self._held[out.index] = []
                sample.text, sample.token_ids = text, list(ids)
                return new
            sample.text = text
        sample.token_ids.extend(new)
        return new

    def _logprobs(self, sample: Sample, given: LogprobsIn, new: int) -> None:
        """The new positions' logprobs onto the sample's: vLLM's flat arrays stay arrays."""
        if isinstance(given, tuple):
            flat, first = given
            if sample.logprobs is None:
                sample.logprobs = Logprobs(self.table)
            have = len(sample.logprobs)
            # A CUMULATIVE output's arrays hold every position so far (and vLLM's may have grown
            # since): the new positions are the ones after what the sample has, one per new token.
            if isinstance(flat, Logprobs):  # a recorded sample's arrays (a replay)
                sample.logprobs.add_from(flat, first if self.delta else have, new)
            else:
                sample.logprobs.add_flat(flat, first if self.delta else have, new)
            if self._text is not None:
                table, text = self.table, self._text
                for token_id in sample.logprobs.ids_from(have):
                    if token_id not in table:
                        table[token_id] = text(token_id)
        elif self.delta and sample.logprobs is not None:
            sample.logprobs.extend(given)
        else:
            sample.logprobs = list(given)

    def _phases(self, sample: Sample, metrics: dict[str, float]) -> None:
        """The child's queued, prefill and decode phases from the engine's own timestamps.

        The engine core stamps them with time.monotonic() in its own process: the same clock as
        ours on one machine, so they share the time axis of the token arrivals. A timestamp of 0
        means the engine has not reached that phase (yet)."""
        queued, scheduled = metrics.get("queued_ts") or 0.0, metrics.get("scheduled_ts") or 0.0
        first, last = metrics.get("first_token_ts") or 0.0, metrics.get("last_token_ts") or 0.0
        if queued:
            sample.queued_at = queued - self.t0
        if queued and scheduled:
            sample.queued_s = max(0.0, scheduled - queued)
        if scheduled and first:
            sample.prefill_s = max(0.0, first - scheduled)
        if first and last:
            sample.decode_s = max(0.0, last - first)

    def finish(self, status: str = "finished", error: str | None = None) -> Run:
        self.run.status = status
        self.run.error = error
        self.run.wall_time = self.elapsed()
        return self.run
