"""Reading version 3 of the run bundle (what the playground wrote before version 4): kept so
that every bundle saved then still opens. Nothing writes it any more.

Version 3 was a file that grows with the tokens sampled, not with their square.

The run record keeps every event as the engine yielded it, and a CUMULATIVE event repeats each
advancing sample's whole text and token ids: written out as it is (versions 1 and 2), a bundle of
128 samples x 96 tokens is 7 MB. This encoding writes what each event added once, leaves out what
the rest of the bundle already says, and loading rebuilds the record exactly: ``decode`` gives
the record as plain data (``dataclasses.asdict`` of a Run, the layout of versions 1 and 2).

The layout, beside the run's own fields (request, status, ...; those at their default left out):

- ``texts``: ``{token id: text}``, the text each token id has most often in the run (its decoded
  piece, its text as a logprob alternative). Texts that follow from it are left out below.
- ``events``: ``[t, outputs]`` or ``[t, outputs, facts]``. ``facts`` holds only what differs from
  the default: ``finished`` (false), and ``request_id``, ``num_cached_tokens``, ``engine_requests``
  (the previous event's; a request id starts as the run's). An output is ``[index, token ids,
  text, finish_reason, stop_reason]``, trailing nulls left out, one token id written bare. When
  ``cumulative`` is true (every output kind but DELTA) it holds what the index added since its
  previous output and loading adds it up. Its text is null when it is the table's texts of its
  token ids, ``[text]`` when it is the output's whole text rather than an addition (a stop
  string cut it). An output that does not extend its index's previous one is written whole, as
  an object with the five fields.
- ``samples``: one object each. ``index`` is its place; ``text``, ``token_ids``, ``token_times``,
  ``finish_reason`` and ``stop_reason`` are left out when the events give them as the recorder
  builds them (present, even null, they are the value). ``token_texts`` left out are the table's
  texts of the token ids; an object ``{position: text}`` replaces some of those. Each logprob is
  written as version 4 still writes it (playground/bundle_logprobs.py).

Times are written exactly as recorded: there is one per event, not per token.
"""

from __future__ import annotations

from typing import Any

from playground import bundle_logprobs
from playground.bundle_format import (
    OPTIONAL,
    OUTPUT_FIELDS,
    int_list,
    read_events,
    read_record,
    read_token_texts,
)
from playground.errors import damaged_bundle

DERIVED = ("text", "token_ids", "token_times", "finish_reason", "stop_reason")  # what the recorder builds
FORMAT_FIELDS = ("bundle_version", "cumulative", "logprobs_float32", "texts", "samples", "events")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _rebuilt(events: list[dict], n: int, delta: bool) -> list[dict[str, Any]]:
    """The samples' text, token ids, token times and finish as the recorder builds them from the
    events (playground/backends/recorder.py): what a sample need not repeat."""
    built = [{"text": "", "token_ids": [], "token_times": [], "finish_reason": None, "stop_reason": None}
             for _ in range(n)]
    for event in events:
        for out in event["outputs"]:
            if not _is_int(out["index"]) or not 0 <= out["index"] < n:
                continue  # the recorder could not have built such a sample: it is written whole
            s = built[out["index"]]
            if delta:
                new = out["token_ids"]
                s["text"] += out["text"]
                s["token_ids"].extend(new)
            else:
                new = out["token_ids"][len(s["token_ids"]):]
                s["text"] = out["text"]
                s["token_ids"] = list(out["token_ids"])
            s["token_times"].extend([event["t"]] * len(new))
            if out["finish_reason"] is not None:
                s["finish_reason"], s["stop_reason"] = out["finish_reason"], out["stop_reason"]
    return built


# ---- reading -----------------------------------------------------------------------------------

def _joined(ids: list[int], table: dict[int, str]) -> str | None:
    try:
        return "".join([table[t] for t in ids])
    except KeyError:
        return None


def decode(data: dict[str, Any]) -> dict[str, Any]:
    """The plain record (the layout of versions 1 and 2) of a version 3 bundle; InvalidBundle, a
    sentence naming the part, for a damaged one."""
    record, table = read_record(data, FORMAT_FIELDS)
    record["events"] = _read_events(data.get("events", []), table, data.get("cumulative") is True,
                                    record["request"].get("request_id"))
    delta = record["request"].get("output_kind") == "DELTA"
    rebuilt = _rebuilt(record["events"], len(data["samples"]), delta)
    float32 = data.get("logprobs_float32") is True
    record["samples"] = [_read_sample(k, s, rebuilt[k], table, float32) for k, s in enumerate(data["samples"])]
    return record


def _read_events(events: Any, table: dict[int, str], cumulative: bool, request_id: Any) -> list[dict]:
    previous: dict[int, tuple[list[int], str]] = {}
    return read_events(events, request_id, lambda where, out: _read_output(where, out, table, previous, cumulative))


def _read_output(where: str, out: Any, table: dict[int, str], previous: dict, cumulative: bool) -> dict:
    """One output as yielded; ``previous`` (each index's last token ids and text) follows along
    as ``_additions`` kept it when writing."""
    if isinstance(out, dict):
        if set(out) != set(OUTPUT_FIELDS):
            raise damaged_bundle(f"{where} is an object without exactly the fields {', '.join(OUTPUT_FIELDS)}")
        index, ids, text = out["index"], out["token_ids"], out["text"]
        if _is_int(index) and int_list(ids) and isinstance(text, str):
            previous[index] = (ids, text)
        elif _is_int(index):
            previous.pop(index, None)
        return dict(out)
    if not (isinstance(out, list) and 2 <= len(out) <= 5 and _is_int(out[0])):
        raise damaged_bundle(f"{where} is not [index, token ids, text, finish_reason, stop_reason]")
    index, added, slot, finish, stop = out + [None] * (5 - len(out))
    added = [added] if _is_int(added) else added
    if not int_list(added):
        raise damaged_bundle(f"{where} has token ids that are not a list of integers")
    before_ids, before_text = previous.get(index, ([], "")) if cumulative else ([], "")
    if slot is None:
        text = _joined(added, table)
        if text is None:
            raise damaged_bundle(f"{where} has a token id with no text in the bundle's token texts")
        text = before_text + text
    elif isinstance(slot, str):
        text = before_text + slot
    elif isinstance(slot, list) and len(slot) == 1 and isinstance(slot[0], str):
        text = slot[0]
    else:
        raise damaged_bundle(f"{where} has a text that is neither a string nor [whole text]")
    ids = before_ids + added
    previous[index] = (ids, text)
    return {"index": index, "text": text, "token_ids": ids, "finish_reason": finish, "stop_reason": stop}


def _read_sample(k: int, s: Any, rebuilt: dict, table: dict[int, str], float32: bool) -> dict:
    where = f"sample {k}"
    if not isinstance(s, dict):
        raise damaged_bundle(f"{where} is not an object")
    unknown = set(s) - {"index", "seed", "token_texts", "logprobs", *DERIVED, *OPTIONAL}
    if unknown:
        raise damaged_bundle(f"{where} has a field this playground does not know ({', '.join(sorted(unknown))})")
    if "seed" not in s:
        raise damaged_bundle(f"{where} has no seed")
    sample = {"index": s.get("index", k), "seed": s["seed"]}
    sample.update({name: s[name] if name in s else rebuilt[name] for name in DERIVED})
    ids = sample["token_ids"]
    sample["token_texts"] = read_token_texts(where, ids, s.get("token_texts", {}), table)
    logprobs = s.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, list):
        raise damaged_bundle(f"{where} has logprobs that are not a list")
    sample["logprobs"] = None if logprobs is None else [
        bundle_logprobs.read(f"{where}, logprob {p}", entry, ids[p] if p < len(ids) else None, table, float32)
        for p, entry in enumerate(logprobs)]
    sample.update({name: s.get(name) for name in OPTIONAL})
    return sample
