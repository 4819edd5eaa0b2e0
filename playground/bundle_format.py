"""Version 5 of the run bundle: every sample written plainly for any client, the rest compact.
(Version 4 is the same but for the width of logprobs' integer arrays: this module reads both.)

A bundle is read by people and programs that do not have this project: ``jq``, a notebook, a
service in another language. So each sample states its ``index``, ``seed``, ``text``,
``token_ids``, ``finish_reason`` and ``stop_reason`` as they are (playground/bundle.schema.json
publishes the layout). What only this project's views need stays compact: the events refer to the
samples' token ids instead of repeating them, so the file still grows with the tokens sampled,
not with their square (a CUMULATIVE event repeats each sample's whole text so far).

Writing is exact by construction: a part is left out, or written short, only when reading gives
it back identical (compared by type and value); otherwise it is written as it is. No round trip
is needed to know that what was written reads back as the run. The events are written by
playground/bundle_events.py and the table of token texts found by playground/bundle_table.py (at
the run's end, or while it is recorded); reading is here.

The layout, beside the run's own fields (request and status always; the others when not at their
default):

- ``texts``: ``{token id: text}``, the text each token id has most often in the run (its decoded
  piece, its text as a logprob alternative), for what is left out below.
- ``samples``: one object each, with the six plain fields. ``token_texts`` (one decoded piece per
  token) left out are the table's texts of the token ids; an object ``{position: text}`` gives
  those that differ, a list all of them. ``token_times`` left out are the events': each token
  arrived at the time of the event whose output brought it. ``logprobs``: see
  playground/bundle_logprobs.py. ``num_cached_tokens``, ``metrics``, ``queued_at``, ``queued_s``,
  ``prefill_s``, ``decode_s`` when not null.
- ``events``: ``[t, outputs]`` or ``[t, outputs, facts]``. ``facts`` holds only what differs:
  ``finished`` (false), and ``request_id``, ``num_cached_tokens``, ``engine_requests`` (the
  previous event's; the request id starts as the run's). An output is ``[index, count, text,
  finish_reason, stop_reason]``, trailing nulls left out: it brings ``count`` more of its
  sample's ``token_ids``. Under DELTA its token ids are those ``count`` tokens; under the other
  output kinds they are the sample's first tokens up to there (everything so far). Its ``text``:
  null is the sample's ``token_texts`` of those tokens, a string is the text added; under the
  cumulative kinds both are added to the index's previous text. ``[text]`` is the whole text and
  ``[]`` the sample's own ``text`` (a stop string cut it). An output whose token ids are not the
  sample's so is written whole: an object with its five fields. That is the one plain fallback, and
  it is needed: the record keeps outputs as they were yielded, and an output that is not its
  sample's tokens (one that changed after it was yielded, a backend's odd one) is what the QA
  matrix is there to show.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from types import NoneType
from typing import Any

import orjson

from playground import bundle_logprobs
from playground.bundle_events import OUTPUT_FIELDS, EventsWriter, arrivals, compact, covered, int_list, pieces_of
from playground.bundle_logprobs import same
from playground.bundle_table import TableWriter, table_of
from playground.errors import damaged_bundle
from playground.logprobs import Logprobs

VERSION = 5
SCHEMA_PATH = Path(__file__).with_name("bundle.schema.json")  # the layout, published for other clients
FACTS = ("finished", "request_id", "num_cached_tokens", "engine_requests")
PLAIN = ("index", "seed", "text", "token_ids", "finish_reason", "stop_reason")  # every sample, as it is
FLOATLESS = frozenset({*PLAIN, "token_texts", "logprobs"})  # a sample's fields that may hold no float
OPTIONAL = ("num_cached_tokens", "metrics", "queued_at", "queued_s", "prefill_s", "decode_s")
SAMPLE_FIELDS = frozenset({*PLAIN, "token_texts", "token_times", "logprobs", *OPTIONAL})
# The run's own fields and what one left out is (request and status are always written).
RUN_FIELDS = {"request": None, "status": "running", "started_at": 0.0, "wall_time": None, "engine": {},
              "error": None, "usage": None, "mutated_events": None}
FORMAT_FIELDS = ("bundle_version", "logprobs_float32", "texts", "samples", "events")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a bundle is written or read (or a sample
    graph built). A bundle of n=256 x 1,000 tokens makes and reads millions of small lists and
    strings, none in a cycle, and each 700 of them would start a collection that scans the young
    objects (more and more often the whole heap): measured, a third of writing and half of
    reading, and half of building the graph at n=256. Nested and threaded uses are safe: only the
    outermost one that found it on turns it back on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def bundle_bytes_per_token(run) -> float:
    """Bytes of the run's bundle per sampled token: what a saved run costs (inf for no tokens)."""
    tokens = sum(len(s.token_ids) for s in run.samples)
    return len(run.to_json().encode("utf-8")) / tokens if tokens else float("inf")


def _identical(a: Any, b: list) -> bool:
    """Two lists read back alike: item by item of one type and value (floats by their digits)."""
    if type(a) is not list or len(a) != len(b):
        return False
    if all(map(operator.is_, a, b)):  # the very objects: a recorded run's times, as its writer derives them
        return True
    if a == b and list(map(type, a)) == list(map(type, b)) and 0.0 not in a:  # no -0.0 to tell from 0.0
        return True
    return all(x is y or same(x, y) for x, y in zip(a, b))


# ---- writing -----------------------------------------------------------------------------------

def encode(run, written: EventsWriter | None = None, gathered: TableWriter | None = None) -> dict[str, Any]:
    """The bundle of a Run (without its bundle_version), ready for JSON. ``written``: the writer
    that has written every event of the run already (``LiveBundle``): ``events`` is left out, for
    the caller to add as the last field. ``gathered``: the table of texts gathered while the run
    was recorded, up to its last output (used while it is ``whole``)."""
    samples, events = run.samples, run.events
    if gathered is not None and not gathered.whole:
        gathered = None
    table = gathered.table if gathered is not None else table_of(samples)
    short = bundle_logprobs.float32_digits(samples)
    data: dict[str, Any] = {}
    for name, default in RUN_FIELDS.items():
        value = getattr(run, name)
        if name in ("request", "status") or not same(value, default):
            data[name] = value
    if short is not None:
        data["logprobs_float32"] = True
    data["texts"] = {str(token_id): text for token_id, text in sorted(table.items())}
    writer = written or EventsWriter.of(run)
    events_written = None if written else writer.add(events)
    times = writer.times
    data["samples"] = [_sample(s, table, times[k], short, None if gathered is None else gathered.differ(k))
                       for k, s in enumerate(samples)]
    if events_written is not None:
        data["events"] = events_written
    return data


def write(data: dict[str, Any], events: list[str] | None = None) -> str:
    """The text of a bundle's ``data`` (``encode``'s, with its version), field by field in one line:
    the samples by ``samples_json_parts``; ``events``: the events already written, the parts of a JSON
    list, put last (``LiveBundle``). Joined once: at n=256 x 1,000 tokens the text is 16 MB."""
    parts = []
    for name, value in data.items():
        parts += (",", compact(name), ":")
        if name == "samples":
            parts += samples_json_parts(value)
        else:
            parts.append(compact(value))
    if events is not None:
        parts += (',"events":', *events)
    parts[:1] = ["{"]
    parts.append("}")
    return "".join(parts)


def samples_json_parts(samples: list[dict[str, Any]]) -> list[str]:
    """The parts of ``compact(samples)``, the same text, faster: a sample that holds no float (its
    plain fields, its token texts, its logprobs as typed arrays: what an engine's run writes) is
    written by orjson, three to four times faster than Python's JSON for five-digit token ids and
    base64. orjson writes a NaN as null where a bundle says NaN, so anything with a float stays
    with ``compact``, as does what orjson refuses (an int past 64 bits, a lone surrogate)."""
    parts = ["["]
    for entry in samples:
        if len(parts) > 1:
            parts.append(",")
        if _floatless(entry):
            try:
                parts.append(orjson.dumps(entry).decode())
                continue
            except TypeError:  # orjson.JSONEncodeError is one
                pass
        parts.append(compact(entry))
    parts.append("]")
    return parts


def _floatless(entry: dict[str, Any]) -> bool:
    """A written sample with no float in it, by its fields' exact types (a bool, or a subclass of
    int or str, is not one of them: such a sample goes to ``compact``, which writes it right)."""
    if not (type(entry.get("index")) is int and type(entry.get("seed")) in (int, NoneType)
            and type(entry.get("text")) in (str, NoneType) and type(entry.get("finish_reason")) in (str, NoneType)
            and type(entry.get("stop_reason")) in (int, str, NoneType) and int_list(entry.get("token_ids"))):
        return False
    texts = entry.get("token_texts", ())
    if isinstance(texts, dict):
        texts = texts.values()
    logprobs = entry.get("logprobs", {})
    return set(entry) <= FLOATLESS and set(map(type, texts)) <= {str, NoneType} and isinstance(logprobs, dict) \
        and all(type(v) is dict and set(map(type, v.values())) <= {str, NoneType} for v in logprobs.values())


def _sample(s, table: dict[int, str], times: list, short: dict[float, float] | None,
            differ: dict[str, Any] | None = None) -> dict[str, Any]:
    """One sample as written. ``differ``: the sample's logprobs' texts that are not the table's,
    from a table gathered while it was recorded, which also knows that its token texts are the
    table's (a dict, maybe empty; None when not known)."""
    data = {name: getattr(s, name) for name in PLAIN}
    ids, texts = s.token_ids, s.token_texts
    whole_ids = differ is not None or int_list(ids)
    if differ is not None:
        pass  # its token texts are the table's texts of its ids: left out
    elif whole_ids and type(texts) is list and len(texts) == len(ids):
        changed = {} if list(map(table.get, ids)) == texts and set(map(type, texts)) <= {str} else {
            str(p): text for p, (token_id, text) in enumerate(zip(ids, texts))
            if type(text) is not str or table.get(token_id) != text}
        if changed:
            data["token_texts"] = changed if len(changed) * 4 < len(texts) else texts
    else:
        data["token_texts"] = texts
    if not _identical(s.token_times, times):
        data["token_times"] = s.token_times
    if isinstance(s.logprobs, Logprobs):
        data["logprobs"] = bundle_logprobs.write_arrays(s.logprobs, ids if whole_ids else [], table, differ)
    elif s.logprobs is not None:
        sampled = ids if whole_ids else []
        data["logprobs"] = [bundle_logprobs.write(lp, sampled[p] if p < len(sampled) else None, table, short)
                            for p, lp in enumerate(s.logprobs)]
    for name in OPTIONAL:
        if getattr(s, name) is not None:
            data[name] = getattr(s, name)
    return data


# ---- reading -----------------------------------------------------------------------------------

def decode(data: dict[str, Any], prefixes: bool = False) -> dict[str, Any]:
    """The run as plain data (the layout of versions 1 and 2, ``dataclasses.asdict`` of a Run)
    of a version 4 or 5 bundle; InvalidBundle, a sentence naming the part, for a damaged one.
    ``prefixes``: cumulative outputs that are their sample's start given by their lengths
    (``_OutputReader``), for ``Run.from_dict``."""
    record, table = read_record(data, FORMAT_FIELDS)
    delta = record["request"].get("output_kind") == "DELTA"
    samples = [_read_sample(k, s, table) for k, s in enumerate(data["samples"])]
    events = _read_events(data.get("events", []), samples, delta, record["request"].get("request_id"), prefixes)
    times = arrivals(events, len(samples), delta)
    float32 = data.get("logprobs_float32") is True
    for k, (s, written) in enumerate(zip(samples, data["samples"])):
        if "token_times" not in s:
            s["token_times"] = times[k]
        logprobs, ids = written.get("logprobs"), s["token_ids"]
        if isinstance(logprobs, dict):
            s["logprobs"] = bundle_logprobs.read_arrays(f"sample {k}, logprobs", logprobs, ids, table)
            continue
        if logprobs is not None and not isinstance(logprobs, list):
            raise damaged_bundle(f"sample {k} has logprobs that are neither a list nor typed arrays")
        s["logprobs"] = None if logprobs is None else [
            bundle_logprobs.read(f"sample {k}, logprob {p}", entry, ids[p] if p < len(ids) else None, table, float32)
            for p, entry in enumerate(logprobs)]
    record["samples"], record["events"] = samples, events
    return record


def read_record(data: dict[str, Any], format_fields: tuple[str, ...]) -> tuple[dict[str, Any], dict[int, str]]:
    """A bundle's run fields (their defaults where left out) and its table of token texts, for the
    reader of any version whose own fields are ``format_fields``; InvalidBundle for a field no
    version knows or a request that is not an object."""
    unknown = set(data) - set(RUN_FIELDS) - set(format_fields)
    if unknown:
        raise damaged_bundle(f"it has a field this playground does not know ({', '.join(sorted(unknown))})")
    record = {name: data.get(name, {} if name == "engine" else default) for name, default in RUN_FIELDS.items()}
    if not isinstance(record["request"], dict):
        raise damaged_bundle("its request is not an object")
    return record, read_table(data.get("texts", {}))


def read_table(texts: Any) -> dict[int, str]:
    if not isinstance(texts, dict) or not all(isinstance(t, str) for t in texts.values()):
        raise damaged_bundle("its token texts are not an object of token id: text")
    try:
        return {int(token_id): text for token_id, text in texts.items()}
    except ValueError:
        raise damaged_bundle("its token texts have a key that is not a token id") from None


def _read_sample(k: int, s: Any, table: dict[int, str]) -> dict[str, Any]:
    """A sample's fields but its logprobs (and its token times, when the events give them)."""
    where = f"sample {k}"
    if not isinstance(s, dict):
        raise damaged_bundle(f"{where} is not an object")
    unknown = set(s) - SAMPLE_FIELDS
    if unknown:
        raise damaged_bundle(f"{where} has a field this playground does not know ({', '.join(sorted(unknown))})")
    missing = [name for name in PLAIN if name not in s]
    if missing:
        raise damaged_bundle(f"{where} has no {' and no '.join(missing)}")
    sample = {name: s[name] for name in PLAIN}
    sample["token_texts"] = read_token_texts(where, sample["token_ids"], s.get("token_texts", {}), table)
    if "token_times" in s:
        sample["token_times"] = s["token_times"]
    sample.update({name: s.get(name) for name in OPTIONAL})
    return sample


def read_token_texts(where: str, ids: Any, texts: Any, table: dict[int, str]) -> list[str]:
    """A sample's text per token: written whole, or as the bundle's table with the positions
    whose text differs (``{position: text}``). Versions 3 and 4 write them alike."""
    if not int_list(ids):
        raise damaged_bundle(f"{where} has no list of token ids")
    if isinstance(texts, list):
        return texts
    if not isinstance(texts, dict):
        raise damaged_bundle(f"{where} has token texts that are neither a list nor an object of position: text")
    try:
        changed = {int(p): text for p, text in texts.items()}
        pieces = [changed[p] if p in changed else table[t] for p, t in enumerate(ids)]
    except (KeyError, ValueError):
        if not texts:
            # Written by a client that gives each sample's text and ids, as the schema asks, and
            # not the text of every token: the texts known, up to the first that is not (the
            # views fill the rest from the logprobs or the ids, analysis.display.pieces).
            return [table[t] for t in itertools.takewhile(table.__contains__, ids)]
        raise damaged_bundle(f"{where} has a token with no text, in the bundle's token texts or its own") from None
    if not set(changed) <= set(range(len(ids))):
        raise damaged_bundle(f"{where} has a token text for a position it does not have")
    return pieces


def _read_events(events: Any, samples: list[dict], delta: bool, request_id: Any, prefixes: bool) -> list[dict]:
    return read_events(events, request_id, _OutputReader(samples, delta, prefixes))


def read_events(events: Any, request_id: Any, read_output: Callable[[str, Any], dict]) -> list[dict]:
    """The events as yielded, each output read by ``read_output(where, written)``; the facts an
    event leaves out are the previous event's. Versions 3 and 4 write events alike."""
    if not isinstance(events, list):
        raise damaged_bundle("its events are not a list")
    last = {"request_id": request_id, "num_cached_tokens": None, "engine_requests": None}
    result = []
    for number, written in enumerate(events):
        if not (isinstance(written, list) and len(written) in (2, 3) and isinstance(written[1], list)
                and (len(written) == 2 or isinstance(written[2], dict) and set(written[2]) <= set(FACTS))):
            raise damaged_bundle(f"event {number} is not [time, outputs] or [time, outputs, facts]")
        facts = written[2] if len(written) == 3 else {}
        outputs = [read_output(f"event {number}, output {k}", out) for k, out in enumerate(written[1])]
        event = {"t": written[0], "finished": facts.get("finished", False), "outputs": outputs}
        for name, value in last.items():
            event[name] = last[name] = facts.get(name, value)
        result.append(event)
    return result


class _OutputReader:
    """Reads a bundle's outputs in order, following each index as writing followed it: how far
    into its sample's ids it is and, under the cumulative kinds, its previous text, kept as a length
    while that text is the start of its sample's own: reading n x L cumulative outputs then copies
    no L² characters. With ``prefixes`` such an output is given as ``{"index", "prefix": [text
    length, ids length], "finish_reason", "stop_reason"}``, for the Run to hold as that prefix."""

    def __init__(self, samples: list[dict], delta: bool, prefixes: bool):
        self.samples, self.delta, self.prefixes = samples, delta, prefixes
        self.places: dict[int, list] = {}  # index -> [how far into its ids, previous text, its length if a prefix]
        self.pieces: dict[int, list[str] | None] = {}  # each sample's pieces, looked at once

    def __call__(self, where: str, out: Any) -> dict:
        return self._common(out) or self._any(where, out)

    def _pieces_of(self, i: int) -> list[str] | None:
        if i not in self.pieces:
            self.pieces[i] = pieces_of(self.samples[i]["token_ids"], self.samples[i]["token_texts"])
        return self.pieces[i]

    def _place(self, i: int) -> list:
        if i not in self.places:
            self.places[i] = [0, "", 0 if type(self.samples[i]["text"]) is str else None]
        return self.places[i]

    def _common(self, out: Any) -> dict | None:
        """The common output, ``[index, count]`` (and its finish): its sample's next tokens, their
        pieces as the text they add. None for any other, which ``_any`` reads."""
        if type(out) is not list or not 2 <= len(out) <= 5 or len(out) > 2 and out[2] is not None:
            return None
        i, count = out[0], out[1]
        place = self.places.get(i)
        if place is None or type(i) is not int or type(count) is not int or count < 0 or place[0] is None:
            return None
        at, sample = place[0], self.samples[i]
        new, ids, pieces = at + count, sample["token_ids"], self._pieces_of(i)
        if pieces is None or new > len(ids):
            return None
        added = "".join(pieces[at:new])
        finish, stop = (out + [None] * 3)[3:5]
        if self.delta:
            place[0] = new
            return {"index": i, "text": added, "token_ids": ids[at:new], "finish_reason": finish, "stop_reason": stop}
        length = place[2]
        if length is None or not sample["text"].startswith(added, length):
            return None
        place[0], place[2] = new, length + len(added)
        if self.prefixes:
            return {"index": i, "prefix": [place[2], new], "finish_reason": finish, "stop_reason": stop}
        return {"index": i, "text": sample["text"][:place[2]], "token_ids": ids[:new], "finish_reason": finish,
                "stop_reason": stop}

    def _followed(self, i: int, text: Any) -> None:
        """The cumulative kinds: ``text`` is index ``i``'s text from now on."""
        whole, place = self.samples[i]["text"], self.places[i]
        place[1] = text if type(text) is str else None
        place[2] = len(text) if place[1] is not None and type(whole) is str and whole.startswith(text) else None

    def _any(self, where: str, out: Any) -> dict:
        samples, delta = self.samples, self.delta
        if isinstance(out, dict):
            if set(out) != set(OUTPUT_FIELDS):
                raise damaged_bundle(f"{where} is an object without exactly the fields {', '.join(OUTPUT_FIELDS)}")
            i = out["index"]
            if type(i) is int and 0 <= i < len(samples):
                place = self._place(i)
                place[0] = covered(delta, place[0], out["token_ids"], samples[i]["token_ids"])
                if not delta:
                    self._followed(i, out["text"])
            return dict(out)
        if not (isinstance(out, list) and 2 <= len(out) <= 5 and type(out[0]) is int):
            raise damaged_bundle(f"{where} is not [index, count, text, finish_reason, stop_reason]")
        i, count, slot, finish, stop = out + [None] * (5 - len(out))
        if not 0 <= i < len(samples):
            raise damaged_bundle(f"{where} is of sample {i}, which the bundle does not have")
        sample = samples[i]
        place = self._place(i)
        at, before = place[0], place[1] if place[2] is None else sample["text"][:place[2]]
        if type(count) is not int or count < 0:
            raise damaged_bundle(f"{where} has a count of tokens that is not a whole number")
        ids = sample["token_ids"]
        if at is None or at + count > len(ids):
            raise damaged_bundle(f"{where} brings tokens its sample does not have")
        new = at + count
        if slot is None or type(slot) is str:
            if before is None:
                raise damaged_bundle(f"{where} adds to a text the bundle does not give")
            if slot is None:
                pieces = self._pieces_of(i)
                if pieces is None:
                    raise damaged_bundle(f"{where} has no text, and its sample has no text per token")
                slot = "".join(pieces[at:new])
            text = before + slot
        elif slot == []:
            text = sample["text"]
        elif type(slot) is list and len(slot) == 1 and type(slot[0]) is str:
            text = slot[0]
        else:
            raise damaged_bundle(f"{where} has a text that is neither a string nor [whole text]")
        place[0] = new
        if not delta:
            self._followed(i, text)
        return {"index": i, "text": text, "token_ids": ids[at:new] if delta else ids[:new], "finish_reason": finish,
                "stop_reason": stop}
