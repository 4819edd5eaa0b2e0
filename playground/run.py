"""The run record: one parent request, every raw event the engine yielded, and the n samples.

Every view and export reads this one record: the live columns, the diff, the tree, the timing
charts, the inspector, the JSON bundle and the CSV. It is plain data (no vLLM, no Gradio), so a
bundle saved today can be analysed tomorrow without an engine.

Events are kept exactly as yielded (CUMULATIVE events repeat the whole text so far, which is the
point of inspecting them). Logprobs and per-child engine facts go straight to the samples. The
bundle writes each sample plainly and the rest compactly (playground/bundle_format.py), and loads
it back exactly.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import weakref
from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

from playground import bundle_format, bundle_v3
from playground.bundle_events import EventsWriter, compact
from playground.bundle_table import TableWriter
from playground.errors import TOO_DEEP, TOO_LONG, InvalidBundle, damaged_bundle, json_problem
from playground.event_output import EventOutput
from playground.logprobs import Logprobs, TokenLogprob

# 2: per-event request_id and engine_requests, per-sample engine phases, mutated_events, and the
# engine's reproduction conditions. Bundles of version 1 load with those empty.
# 3: a compact encoding that grows with the tokens rather than their square (playground/bundle_v3.py).
# 4: every sample's index, seed, text, token ids and finish written plainly, for any client
# (playground/bundle_format.py, playground/bundle.schema.json).
# 5: the logprobs' integer arrays in the smallest of one, two or four bytes (a quarter smaller).
# Versions 1 and 2 are the record as plain data, the layout versions 3 to 5 are decoded into.
BUNDLE_VERSION = bundle_format.VERSION
TABLE_EVERY = 2  # LiveBundle's writes between two looks at the samples' new token texts
# Outputs per sample (a step's, at native n) between two of LiveBundle's writes: each write looks at
# every sample (and every other one gathers the table), so fewer writes cost less, and the save at
# the end has at most this many steps left (at n=256, 8,192 outputs: 20 ms).
WRITE_EVERY = 32


@dataclass
class Event:
    """One output the engine (or the wrapper) yielded to the caller."""

    t: float  # seconds since the run started (backends stamp time.monotonic(), see RunRecorder)
    finished: bool
    outputs: list[EventOutput]
    num_cached_tokens: int | None = None
    request_id: str | None = None  # the id the output carried: the parent's, by the contract
    engine_requests: int | None = None  # requests the engine had unfinished when it was yielded


class GrowingText:
    """A sample's text, which a recorder grows a token's text at a time (``Sample.add_text``).

    ``text += part`` copies the whole text each time: at 1,000 tokens a sample's text is copied
    1,000 times over, and at n=256 that is the recorder's largest cost. The parts wait in a list
    instead, and are joined to the text when it is next read: a reader that looks a few times a
    second pays for the text's length a few times a second. Read and set as a plain ``str``.
    Readers in other threads (the live panels) join under a lock, and take only the parts they
    saw, while the recorder goes on adding without one."""

    _joining = threading.Lock()

    def __get__(self, sample: Sample | None, owner: type | None = None) -> str:
        if sample is None:
            return ""  # the field's default
        held = sample.__dict__
        if held["_parts"]:
            with self._joining:
                parts = held["_parts"]
                count = len(parts)
                held["_text"] += "".join(parts[:count])
                del parts[:count]
        return held["_text"]

    def __set__(self, sample: Sample, text: str) -> None:
        with self._joining:
            sample.__dict__["_text"], sample.__dict__["_parts"] = text, []


@dataclass
class Sample:
    index: int
    seed: int | None
    text: str = GrowingText()  # type: ignore[assignment]
    token_ids: list[int] = field(default_factory=list)
    token_texts: list[str] = field(default_factory=list)  # one decoded piece per token
    token_times: list[float] = field(default_factory=list)  # arrival, seconds since run start
    logprobs: list[TokenLogprob] | Logprobs | None = None  # Logprobs: what an engine made, as arrays
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    num_cached_tokens: int | None = None
    metrics: dict[str, float] | None = None  # engine-side RequestStateStats, when stats are on
    # What the engine did with this child, from its own clock (None where a backend cannot know,
    # e.g. a remote server): when it was queued (seconds since the run started), then how long it
    # waited for a batch, prefilled (scheduled to first token) and decoded (first to last token).
    queued_at: float | None = None
    queued_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None

    def add_text(self, part: str) -> None:
        """``text += part``, without copying the text (``GrowingText``)."""
        self._parts.append(part)

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
    # Numbers of the events whose yielded object changed after it was yielded (the QA matrix asks
    # a backend to watch them); None when nobody watched.
    mutated_events: list[int] | None = None
    # Not part of the record: the bundle written while the run was recorded (``LiveBundle``), so
    # saving it writes only what is left. A class attribute, so that no field of a Run holds it.
    live_bundle = None
    # Not part of the record either: held while an output is recorded, and by a reader on another
    # thread that must see each output whole (a sample's ids with their texts). A run being
    # recorded has a lock of its own (``RunRecorder``); any other is read by nobody but its reader.
    changing = contextlib.nullcontext()

    def __deepcopy__(self, memo) -> Run:
        """The record alone: a copy is nobody's recording, and is written whole."""
        return Run(**{f.name: copy.deepcopy(getattr(self, f.name), memo) for f in fields(self)})

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
        """The bundle as JSON-ready data. It reads back as this run (``from_dict``) by construction
        for a record of the declared types (JSON values in the free-form fields: request, engine,
        metrics, usage)."""
        return {"bundle_version": BUNDLE_VERSION, **bundle_format.encode(self)}

    def to_json(self, indent: int | None = None) -> str:
        """The run bundle: what the UI exports and the API returns. Without ``indent``, one
        line with no spaces (a line of JSONL); with it, a field per line and a sample or event per
        line, indented by that many spaces (a bundle to read, not much bigger)."""
        with bundle_format.collector_paused():
            if indent is None and self.live_bundle is not None:
                written = self.live_bundle.to_json(self)
                if written is not None:
                    return written
            return self._json(indent)

    def _json(self, indent: int | None) -> str:
        data = self.to_dict()
        if indent is None:
            return bundle_format.write(data)
        pad = " " * indent
        lines = [f"{pad}{compact(name)}: [\n" + ",\n".join(pad * 2 + compact(item) for item in value) + f"\n{pad}]"
                 if name in ("samples", "events") and value else f"{pad}{compact(name)}: {compact(value)}"
                 for name, value in data.items()]
        return "{\n" + ",\n".join(lines) + "\n}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        """A Run from a bundle; InvalidBundle (a sentence) for anything that is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("samples"), list) or "request" not in data:
            hint = ""
            if isinstance(data, dict) and "nodes" in data and "edges" in data:
                hint = " It looks like a sample graph (analyze --graph's output): give the runs it was made from."
            elif isinstance(data, dict) and "runs" in data and "seed_overlaps" in data:
                hint = " It looks like analyze --json's figures: give the runs they were read from."
            elif isinstance(data, dict) and "prompt" in data:
                hint = " It looks like a line of batch's input: run `python app.py batch` on it first."
            raise InvalidBundle("this is not a run bundle: a bundle is a JSON object with \"request\" and "
                                "\"samples\" (what the playground exports, or one line of `batch` output)." + hint)
        version = data.get("bundle_version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidBundle(f"this bundle's bundle_version must be a whole number, got {version!r}")
        if version > BUNDLE_VERSION:
            raise InvalidBundle(f"this bundle has version {version!r}, newer than this playground reads "
                                f"({BUNDLE_VERSION}): update the playground to open it")
        for k, sample in enumerate(data["samples"]):
            ids = sample.get("token_ids", []) if isinstance(sample, dict) else None
            if not bundle_format.int_list(ids):
                raise damaged_bundle(f"sample {k} has no list of token ids")
        try:
            if version in (4, BUNDLE_VERSION):  # 4: the logprobs' integers all in int32
                data = bundle_format.decode(data, prefixes=True)
            elif version == 3:
                data = bundle_v3.decode(data)
            return cls._from_dict(data)
        except InvalidBundle:
            raise
        except (TypeError, KeyError, ValueError, AttributeError, IndexError) as e:
            raise damaged_bundle(str(e)) from None

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> Run:
        data = dict(data)
        data.pop("bundle_version", None)
        samples = []
        for s in data.pop("samples"):
            s = dict(s)
            if s.get("logprobs") is not None and not isinstance(s["logprobs"], Logprobs):
                s["logprobs"] = [_logprob_from_dict(lp) for lp in s["logprobs"]]
            samples.append(Sample(**s))
        events = [Event(**{**e, "outputs": [EventOutput.prefix(o["index"], samples[o["index"]], *o["prefix"],
                                                               o["finish_reason"], o["stop_reason"])
                                            if "prefix" in o else EventOutput(**o) for o in e["outputs"]]})
                  for e in data.pop("events", [])]
        return cls(samples=samples, events=events, **data)

    @classmethod
    def from_json(cls, text: str) -> Run:
        with bundle_format.collector_paused():
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                said = json_problem(e, line=True)
                raise InvalidBundle(f"this is not a run bundle: not valid JSON ({said})") from None
            except RecursionError:
                raise InvalidBundle(f"this is not a run bundle: {TOO_DEEP}") from None
            except ValueError:
                raise InvalidBundle(f"this is not a run bundle: {TOO_LONG}") from None
            return cls.from_dict(data)

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
                "finish_reasons": {o.index: o.finish_reason for o in e.outputs if o.finish_reason is not None},
                "tokens": sum(o.carried for o in e.outputs),
                "texts": {o.index: o.text for o in e.outputs},
                "num_cached_tokens": e.num_cached_tokens,
                "engine_requests": e.engine_requests,
                "request_id": e.request_id,
            })
        columns = ["event", "t_ms", "indices", "finished", "finish_reasons", "tokens", "texts",
                   "num_cached_tokens", "engine_requests", "request_id"]
        return pd.DataFrame(rows, columns=columns)


class LiveBundle:
    """A run's bundle written while the run is recorded, so that saving it at the end (the store,
    an export, ``/sample``'s final value) writes only what is left: ``advance``, called where the
    run is recorded (the event loop) between its outputs, writes the events that came since, in
    JSON. At n=256 x 1,000 tokens the events are 250,000 outputs, half a second to write at once.

    ``to_json`` gives what ``Run.to_json`` gives, or None whenever what it wrote could be stale
    (another run; a sample whose lists were replaced, not grown; a backend that saw its outputs
    change; events taken away; a sample's final text that is not the one it guessed): the run is
    then written whole. Once the run has ended its last
    events are written once and kept, so it may be saved any number of times, from any thread.
    """

    def __init__(self, run: Run, table_every: int = TABLE_EVERY, write_every: int = WRITE_EVERY):
        # Not the run itself: the run holds its bundle (``Run.live_bundle``), and a run with a path back
        # to itself is freed by no count of references, only by a full collection, which until then
        # walks its hundreds of thousands of objects every time.
        self._run = weakref.ref(run)
        self._writer: EventsWriter | None = None
        self._table: TableWriter | None = None  # the token texts' table, gathered every ``table_every`` writes
        self._writes, self._table_every, self._write_every = 0, table_every, write_every
        self._parts: list[str] = []  # the events written so far, a JSON text per part
        self._lock = threading.Lock()  # the store may save from a thread while an export writes
        self._ended = False  # the last events are written: nothing is added any more
        self._seen = self._pending = 0  # events looked at by ``advance``; outputs not written since

    def __deepcopy__(self, memo) -> None:
        return None  # a copy of a run is not the run it followed: the copy is written whole

    @property
    def run(self) -> Run | None:
        return self._run()

    def advance(self) -> None:
        """Cheap to call after every event: it writes once the outputs that came since are at least
        ``write_every`` times the samples, so its look at every sample (``follows``) and its own
        costs are spread over several outputs each, and a save at the end has a few steps left."""
        events = self.run.events
        self._pending += sum(len(e.outputs) for e in events[self._seen:])
        self._seen = len(events)
        if self._pending >= self._write_every * len(self.run.samples):
            self._pending = 0
            with self._lock:
                self._advance(final=False)

    def _advance(self, final: bool) -> bool:
        """Write the events that came since (``final``: the run has ended); False when it cannot."""
        run = self.run
        if self._ended:
            return len(run.events) == self._writer.count and self._writer.follows(run.samples)
        if self._writer is None:
            self._writer, self._table = EventsWriter.of(run), TableWriter(run.samples)
        elif not self._writer.follows(run.samples):
            return False
        if new := run.events[self._writer.count:]:
            self._parts.append(",".join(map(compact, self._writer.add(new, final=final))))
        self._writes += 1
        if self._writes % self._table_every == 0:
            self._table.add()
        if final:
            self._parts, self._ended = [",".join(p for p in self._parts if p)], True
        return True

    def to_json(self, run: Run) -> str | None:
        """The bundle of ``run`` as ``Run.to_json`` writes it; None when it must be written whole."""
        if run is not self.run or run.mutated_events is not None:
            return None
        with self._lock, bundle_format.collector_paused():
            if self._writer is not None and len(run.events) < self._writer.count or \
                    not self._advance(final=run.finished) or not self._writer.guessed_right():
                return None  # a text guessed whole before the end must be its sample's (so far, or final)
            self._table.add()  # up to the last output
            data = {"bundle_version": BUNDLE_VERSION, **bundle_format.encode(run, self._writer, self._table)}
            return bundle_format.write(data, ["[", ",".join(p for p in self._parts if p), "]"])


def _logprob_from_dict(d: dict[str, Any]) -> TokenLogprob:
    return TokenLogprob(**{**d, "top": [tuple(t) for t in d.get("top", [])]})
