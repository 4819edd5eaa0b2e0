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
from playground.errors import InvalidBundle

OUTPUT_FIELDS = ("index", "text", "token_ids", "finish_reason", "stop_reason")
FACTS = ("finished", "request_id", "num_cached_tokens", "engine_requests")
DERIVED = ("text", "token_ids", "token_times", "finish_reason", "stop_reason")  # what the recorder builds
OPTIONAL = ("num_cached_tokens", "metrics", "queued_at", "queued_s", "prefill_s", "decode_s")
# The run's own fields and what one left out is (request and status are always written).
RUN_FIELDS = {"request": None, "status": "running", "started_at": 0.0, "wall_time": None, "engine": {},
              "error": None, "usage": None, "mutated_events": None}
FORMAT_FIELDS = ("bundle_version", "cumulative", "logprobs_float32", "texts", "samples", "events")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _int_list(value: Any) -> bool:
    return type(value) is list and set(map(type, value)) <= {int}


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


def _damaged(where: str) -> InvalidBundle:
    return InvalidBundle(f"this run bundle is damaged: {where}")


def decode(data: dict[str, Any]) -> dict[str, Any]:
    """The plain record (the layout of versions 1 and 2) of a version 3 bundle; InvalidBundle, a
    sentence naming the part, for a damaged one."""
    unknown = set(data) - set(RUN_FIELDS) - set(FORMAT_FIELDS)
    if unknown:
        raise _damaged(f"it has a field this playground does not know ({', '.join(sorted(unknown))})")
    record = {name: data.get(name, {} if name == "engine" else default) for name, default in RUN_FIELDS.items()}
    if not isinstance(record["request"], dict):
        raise _damaged("its request is not an object")
    table = _read_table(data.get("texts", {}))
    record["events"] = _read_events(data.get("events", []), table, data.get("cumulative") is True,
                                    record["request"].get("request_id"))
    delta = record["request"].get("output_kind") == "DELTA"
    rebuilt = _rebuilt(record["events"], len(data["samples"]), delta)
    float32 = data.get("logprobs_float32") is True
    record["samples"] = [_read_sample(k, s, rebuilt[k], table, float32) for k, s in enumerate(data["samples"])]
    return record


def _read_table(texts: Any) -> dict[int, str]:
    if not isinstance(texts, dict) or not all(isinstance(t, str) for t in texts.values()):
        raise _damaged("its token texts are not an object of token id: text")
    try:
        return {int(token_id): text for token_id, text in texts.items()}
    except ValueError:
        raise _damaged("its token texts have a key that is not a token id") from None


def _read_events(events: Any, table: dict[int, str], cumulative: bool, request_id: Any) -> list[dict]:
    if not isinstance(events, list):
        raise _damaged("its events are not a list")
    previous: dict[int, tuple[list[int], str]] = {}
    last = {"request_id": request_id, "num_cached_tokens": None, "engine_requests": None}
    result = []
    for number, written in enumerate(events):
        if not (isinstance(written, list) and len(written) in (2, 3) and isinstance(written[1], list)
                and (len(written) == 2 or isinstance(written[2], dict) and set(written[2]) <= set(FACTS))):
            raise _damaged(f"event {number} is not [time, outputs] or [time, outputs, facts]")
        facts = written[2] if len(written) == 3 else {}
        outputs = [_read_output(f"event {number}, output {k}", out, table, previous, cumulative)
                   for k, out in enumerate(written[1])]
        event = {"t": written[0], "finished": facts.get("finished", False), "outputs": outputs}
        for name, value in last.items():
            event[name] = last[name] = facts.get(name, value)
        result.append(event)
    return result


def _read_output(where: str, out: Any, table: dict[int, str], previous: dict, cumulative: bool) -> dict:
    """One output as yielded; ``previous`` (each index's last token ids and text) follows along
    as ``_additions`` kept it when writing."""
    if isinstance(out, dict):
        if set(out) != set(OUTPUT_FIELDS):
            raise _damaged(f"{where} is an object without exactly the fields {', '.join(OUTPUT_FIELDS)}")
        index, ids, text = out["index"], out["token_ids"], out["text"]
        if _is_int(index) and _int_list(ids) and isinstance(text, str):
            previous[index] = (ids, text)
        elif _is_int(index):
            previous.pop(index, None)
        return dict(out)
    if not (isinstance(out, list) and 2 <= len(out) <= 5 and _is_int(out[0])):
        raise _damaged(f"{where} is not [index, token ids, text, finish_reason, stop_reason]")
    index, added, slot, finish, stop = out + [None] * (5 - len(out))
    added = [added] if _is_int(added) else added
    if not _int_list(added):
        raise _damaged(f"{where} has token ids that are not a list of integers")
    before_ids, before_text = previous.get(index, ([], "")) if cumulative else ([], "")
    if slot is None:
        text = _joined(added, table)
        if text is None:
            raise _damaged(f"{where} has a token id with no text in the bundle's token texts")
        text = before_text + text
    elif isinstance(slot, str):
        text = before_text + slot
    elif isinstance(slot, list) and len(slot) == 1 and isinstance(slot[0], str):
        text = slot[0]
    else:
        raise _damaged(f"{where} has a text that is neither a string nor [whole text]")
    ids = before_ids + added
    previous[index] = (ids, text)
    return {"index": index, "text": text, "token_ids": ids, "finish_reason": finish, "stop_reason": stop}


def _read_sample(k: int, s: Any, rebuilt: dict, table: dict[int, str], float32: bool) -> dict:
    where = f"sample {k}"
    if not isinstance(s, dict):
        raise _damaged(f"{where} is not an object")
    unknown = set(s) - {"index", "seed", "token_texts", "logprobs", *DERIVED, *OPTIONAL}
    if unknown:
        raise _damaged(f"{where} has a field this playground does not know ({', '.join(sorted(unknown))})")
    if "seed" not in s:
        raise _damaged(f"{where} has no seed")
    sample = {"index": s.get("index", k), "seed": s["seed"]}
    sample.update({name: s[name] if name in s else rebuilt[name] for name in DERIVED})
    ids, texts = sample["token_ids"], s.get("token_texts", {})
    if not _int_list(ids):
        raise _damaged(f"{where} has no list of token ids")
    if isinstance(texts, dict):
        try:
            changed = {int(p): text for p, text in texts.items()}
            sample["token_texts"] = [changed[p] if p in changed else table[t] for p, t in enumerate(ids)]
        except (KeyError, ValueError):
            raise _damaged(f"{where} has a token with no text, in the bundle's token texts or its own") from None
        if not set(changed) <= set(range(len(ids))):
            raise _damaged(f"{where} has a token text for a position it does not have")
    elif isinstance(texts, list):
        sample["token_texts"] = texts
    else:
        raise _damaged(f"{where} has token texts that are neither a list nor an object of position: text")
    logprobs = s.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, list):
        raise _damaged(f"{where} has logprobs that are not a list")
    sample["logprobs"] = None if logprobs is None else [
        bundle_logprobs.read(f"{where}, logprob {p}", entry, ids[p] if p < len(ids) else None, table, float32)
        for p, entry in enumerate(logprobs)]
    sample.update({name: s.get(name) for name in OPTIONAL})
    return sample
