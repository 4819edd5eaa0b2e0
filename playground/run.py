"""The run record: one parent request, every raw event the engine yielded, and the n samples.

Every view and export reads this one record: the live columns, the diff, the tree, the timing
charts, the inspector, the JSON bundle and the CSV. It is plain data (no vLLM, no Gradio), so a
bundle saved today can be analysed tomorrow without an engine.

Events are kept exactly as yielded (CUMULATIVE events repeat the whole text so far, which is the
point of inspecting them). Logprobs and per-child engine facts go straight to the samples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

BUNDLE_VERSION = 1


@dataclass
class TokenLogprob:
    """The sampled token's log-probability, its rank, and the top-k alternatives at its position."""

    token_id: int
    logprob: float | None
    rank: int | None = None
    text: str | None = None
    top: list[tuple[int, float, str | None]] = field(default_factory=list)  # by rank


@dataclass
class EventOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None = None
    stop_reason: str | int | None = None


@dataclass
class Event:
    """One output the engine (or the wrapper) yielded to the caller."""

    t: float  # seconds since the run started (backends stamp time.monotonic(), see RunRecorder)
    finished: bool
    outputs: list[EventOutput]
    num_cached_tokens: int | None = None


@dataclass
class Observation:
    """What a backend hands the recorder: an event (or None, for facts about a child alone) and
    per-sample facts that are recorded on the samples rather than in the event."""

    event: Event | None = None
    logprobs: dict[int, list[TokenLogprob]] = field(default_factory=dict)
    num_cached_tokens: dict[int, int] = field(default_factory=dict)
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    # One text piece per new token of this event's outputs, by index, when the backend has them
    # exact (a remote server streams each token's text); otherwise the recorder decodes.
    token_texts: dict[int, list[str]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None  # the server's token counts for the run, when it reports them


@dataclass
class Sample:
    index: int
    seed: int | None
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    token_texts: list[str] = field(default_factory=list)  # one decoded piece per token
    token_times: list[float] = field(default_factory=list)  # arrival, seconds since run start
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    num_cached_tokens: int | None = None
    metrics: dict[str, float] | None = None  # engine-side RequestStateStats, when stats are on

    @property
    def ttft(self) -> float | None:
        """Time to first token as the caller saw it."""
        return self.token_times[0] if self.token_times else None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class Run:
    request: dict[str, Any]  # prompt, rendered prompt, prompt token ids, every setting, mode, ids
    samples: list[Sample]
    events: list[Event] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # wall clock, for people
    wall_time: float | None = None
    status: str = "running"  # running | finished | aborted | error
    error: str | None = None
    usage: dict[str, Any] | None = None  # token counts as a server reported them (remote backend)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def output_kind(self) -> str:
        return self.request.get("output_kind", "CUMULATIVE")

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["bundle_version"] = BUNDLE_VERSION
        return data

    def to_json(self, indent: int | None = None) -> str:
        """The run bundle: what the UI exports and the API returns."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        data = dict(data)
        data.pop("bundle_version", None)
        samples = []
        for s in data.pop("samples"):
            s = dict(s)
            if s.get("logprobs") is not None:
                s["logprobs"] = [_logprob_from_dict(lp) for lp in s["logprobs"]]
            samples.append(Sample(**s))
        events = [
            Event(**{**e, "outputs": [EventOutput(**o) for o in e["outputs"]]})
            for e in data.pop("events", [])
        ]
        return cls(samples=samples, events=events, **data)

    @classmethod
    def from_json(cls, text: str) -> Run:
        return cls.from_dict(json.loads(text))

    def tokens_frame(self) -> pd.DataFrame:
        """One row per sample x token position: the CSV export and the analysis' raw table."""
        rows = []
        for s in self.samples:
            for pos, token_id in enumerate(s.token_ids):
                lp = s.logprobs[pos] if s.logprobs and pos < len(s.logprobs) else None
                rows.append({
                    "sample": s.index,
                    "seed": s.seed,
                    "position": pos,
                    "token_id": token_id,
                    "token_text": s.token_texts[pos] if pos < len(s.token_texts) else None,
                    "t": s.token_times[pos] if pos < len(s.token_times) else None,
                    "logprob": lp.logprob if lp else None,
                    "rank": lp.rank if lp else None,
                })
        columns = ["sample", "seed", "position", "token_id", "token_text", "t", "logprob", "rank"]
        return pd.DataFrame(rows, columns=columns)

    def events_frame(self) -> pd.DataFrame:
        """One row per raw event, as the inspector shows it."""
        rows = []
        for number, e in enumerate(self.events):
            rows.append({
                "event": number,
                "t_ms": round(e.t * 1000, 1),
                "indices": [o.index for o in e.outputs],
                "finished": e.finished,
                "finished_indices": [o.index for o in e.outputs if o.finish_reason is not None],
                "tokens": sum(len(o.token_ids) for o in e.outputs),
                "texts": {o.index: o.text for o in e.outputs},
                "num_cached_tokens": e.num_cached_tokens,
            })
        columns = ["event", "t_ms", "indices", "finished", "finished_indices", "tokens", "texts",
                   "num_cached_tokens"]
        return pd.DataFrame(rows, columns=columns)


def _logprob_from_dict(d: dict[str, Any]) -> TokenLogprob:
    return TokenLogprob(**{**d, "top": [tuple(t) for t in d.get("top", [])]})


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
    ):
        self.run = Run(
            request=request,
            samples=[Sample(index=i, seed=seed) for i, seed in enumerate(seeds)],
            engine=engine or {},
            started_at=time.time(),
        )
        self.delta = request.get("output_kind") == "DELTA"
        self.t0 = time.monotonic()
        self._pieces = [_Pieces(decode) for _ in seeds] if decode else None

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def observe(self, observation: Observation) -> Event | None:
        samples = self.run.samples
        for index, cached in observation.num_cached_tokens.items():
            samples[index].num_cached_tokens = cached
        for index, metrics in observation.metrics.items():
            samples[index].metrics = metrics
        if observation.usage is not None:
            self.run.usage = observation.usage
        for index, logprobs in observation.logprobs.items():
            s = samples[index]
            if self.delta and s.logprobs is not None:
                s.logprobs.extend(logprobs)
            else:
                s.logprobs = list(logprobs)
        event = observation.event
        if event is None:
            return None
        event.t -= self.t0  # backends stamp time.monotonic(); the record keeps time since start
        self.run.events.append(event)
        for out in event.outputs:
            s = samples[out.index]
            if self.delta:
                new = out.token_ids
                s.text += out.text
                s.token_ids.extend(new)
            else:
                new = out.token_ids[len(s.token_ids):]
                s.text = out.text
                s.token_ids = list(out.token_ids)
            s.token_times.extend([event.t] * len(new))
            if out.index in observation.token_texts:
                s.token_texts.extend(observation.token_texts[out.index])
            elif self._pieces is not None:
                s.token_texts.extend(self._pieces[out.index].add(new))
            if out.finish_reason is not None:
                s.finish_reason = out.finish_reason
                s.stop_reason = out.stop_reason
        return event

    def finish(self, status: str = "finished", error: str | None = None) -> Run:
        self.run.status = status
        self.run.error = error
        self.run.wall_time = self.elapsed()
        return self.run


class _Pieces:
    """Decode a growing token sequence into one text piece per token.

    A token that ends inside a multibyte character gets an empty piece; the token that completes
    the character carries it. A short window of earlier tokens gives decoders that depend on
    context (leading spaces) what they need, as vLLM's incremental detokenizer does.
    """

    WINDOW = 6

    def __init__(self, decode: Callable[[list[int]], str]):
        self.decode = decode
        self.ids: list[int] = []
        self.prefix = 0  # start of the context window
        self.read = 0  # tokens already turned into pieces

    def add(self, new_ids: list[int]) -> list[str]:
        pieces = []
        for token_id in new_ids:
            self.ids.append(token_id)
            before = self.decode(self.ids[self.prefix:self.read])
            after = self.decode(self.ids[self.prefix:])
            if after.endswith("\ufffd"):
                pieces.append("")  # incomplete character: the next token completes it
                continue
            pieces.append(after[len(before):])
            self.read = len(self.ids)
            self.prefix = max(0, self.read - self.WINDOW)
        return pieces


def observation_from_output(output: Any, t: float, child_facts: bool = True) -> Observation:
    """Copy a vLLM RequestOutput into an Observation, at once.

    In CUMULATIVE mode vLLM hands out its live token list, which keeps growing after the output
    was yielded; copying now keeps each event as it was.

    A parent output carries the cached-token count and metrics of one child only: the one whose
    output it was built from, which is ``outputs[0]`` for streamed kinds. ``child_facts=False``
    skips that attribution where it does not hold (FINAL_ONLY with n > 1) or where the caller
    observes each child directly (the wrapper).
    """
    event = Event(
        t=t,
        finished=bool(output.finished),
        outputs=[
            EventOutput(
                index=c.index,
                text=c.text,
                token_ids=list(c.token_ids),
                finish_reason=c.finish_reason,
                stop_reason=c.stop_reason,
            )
            for c in output.outputs
        ],
        num_cached_tokens=output.num_cached_tokens,
    )
    observation = Observation(event=event)
    for c in output.outputs:
        if c.logprobs:
            observation.logprobs[c.index] = logprobs_from_vllm(c.token_ids, c.logprobs)
    if child_facts and output.outputs:
        first = output.outputs[0].index
        if output.num_cached_tokens is not None:
            observation.num_cached_tokens[first] = output.num_cached_tokens
        if output.metrics is not None:
            observation.metrics[first] = metrics_snapshot(output.metrics)
    return observation


def child_observation(index: int, output: Any) -> Observation:
    """What one child's own output (before merging) says about that child alone: no event."""
    facts = Observation()
    if output.num_cached_tokens is not None:
        facts.num_cached_tokens[index] = output.num_cached_tokens
    if output.metrics is not None:
        facts.metrics[index] = metrics_snapshot(output.metrics)
    return facts


def logprobs_from_vllm(token_ids, positions) -> list[TokenLogprob]:
    """vLLM's per-position {token_id: Logprob} dicts as TokenLogprobs (sampled token first)."""
    result = []
    for token_id, position in zip(token_ids, positions):
        chosen = position.get(token_id)
        top = sorted(
            ((tid, lp.logprob, lp.decoded_token, lp.rank) for tid, lp in position.items()),
            key=lambda item: item[3] if item[3] is not None else 1 << 30,
        )
        result.append(TokenLogprob(
            token_id=token_id,
            logprob=chosen.logprob if chosen else None,
            rank=chosen.rank if chosen else None,
            text=chosen.decoded_token if chosen else None,
            top=[(tid, lp, text) for tid, lp, text, _ in top],
        ))
    return result


def metrics_snapshot(stats: Any) -> dict[str, float]:
    """Copy the timing fields of vLLM's live RequestStateStats."""
    names = ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts",
             "first_token_latency", "num_generation_tokens")
    return {name: getattr(stats, name) for name in names if hasattr(stats, name)}
