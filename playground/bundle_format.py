"""Version 3 of the run bundle: a file that grows with the tokens sampled, not with their square.

The run record keeps every event as the engine yielded it, and a CUMULATIVE event repeats each
advancing sample's whole text and token ids: written out as it is (versions 1 and 2), a bundle of
128 samples x 96 tokens is 7 MB. This encoding writes what each event added once, leaves out what
the rest of the bundle already says, and loading rebuilds the record exactly. It turns the record
as plain data (``dataclasses.asdict`` of a Run, the layout of versions 1 and 2) into version 3 and
back, so the run record can check that what it writes loads to what it holds.

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
  texts of the token ids; an object ``{position: text}`` replaces some of those. Each logprob is a
  flat list ``[id, logprob, id, logprob, ...]`` of the top alternatives by rank (an id written
  ``[id, text]`` when its text is not the table's); the sampled token is the sample's token at
  that position, its logprob, text and rank are those of its alternative (rank: the place in the
  list), and an odd-length list starts with the rank where that differs. Otherwise the logprob is
  an object ``{"top": [...]}`` with the parts that do not follow: ``token_id``, ``logprob``,
  ``text`` (a token not among the alternatives: none, and the table's), ``rank`` (none).
- ``logprobs_float32``: every logprob is a float32 value (vLLM's are), written with the fewest
  digits that give the same float32; loading turns each back into the identical Python float.

Times are written exactly as recorded: there is one per event, not per token.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from playground.errors import InvalidBundle

OUTPUT_FIELDS = ("index", "text", "token_ids", "finish_reason", "stop_reason")
FACTS = ("finished", "request_id", "num_cached_tokens", "engine_requests")
DERIVED = ("text", "token_ids", "token_times", "finish_reason", "stop_reason")  # what the recorder builds
OPTIONAL = ("num_cached_tokens", "metrics", "queued_at", "queued_s", "prefill_s", "decode_s")
# The run's own fields and what one left out is (request and status are always written).
RUN_FIELDS = {"request": None, "status": "running", "started_at": 0.0, "wall_time": None, "engine": {},
              "error": None, "usage": None, "mutated_events": None}
FORMAT_FIELDS = ("bundle_version", "cumulative", "logprobs_float32", "texts", "samples", "events")
LOGPROB_FIELDS = ("top", "token_id", "logprob", "text", "rank")


def bundle_bytes_per_token(run) -> float:
    """Bytes of the run's bundle per sampled token: what a saved run costs (inf for no tokens)."""
    tokens = sum(len(s.token_ids) for s in run.samples)
    return len(run.to_json().encode("utf-8")) / tokens if tokens else float("inf")


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


def _float32_short(value: float) -> float | None:
    """The float with the fewest digits that is the same float32 as ``value``, or None when
    ``value`` is not a float32 value."""
    single = np.float32(value)
    if float(single) != value:
        return None
    for text in (str(single), f"{value:.9g}"):
        short = float(text)
        if float(np.float32(short)) == value:
            return short
    return None


# ---- writing -----------------------------------------------------------------------------------

def encode(record: dict[str, Any]) -> dict[str, Any]:
    """Version 3 of a record in the plain layout (without its bundle_version). It holds the
    same record when ``decode`` gives ``record`` back, which the caller checks."""
    request, samples, events = record["request"], record["samples"], record["events"]
    delta = request.get("output_kind") == "DELTA"
    cumulative = not delta
    additions = _additions(events, cumulative)
    table = _table(samples, additions)
    lps = [v for s in samples for lp in s["logprobs"] or () for v in _logprob_values(lp)]
    short: dict[float, float] | None = {}
    for value in lps:
        if value is None or value in short:
            continue
        found = _float32_short(value) if type(value) is float else None
        if found is None:
            short = None
            break
        short[value] = found
    short = short if lps and short else None
    data: dict[str, Any] = {}
    for name, default in RUN_FIELDS.items():
        value = record[name]
        if name in ("request", "status") or value != default or type(value) is not type(default):
            data[name] = value
    if cumulative and events:
        data["cumulative"] = True
    if short is not None:
        data["logprobs_float32"] = True
    data["texts"] = {str(token_id): text for token_id, text in sorted(table.items())}
    data["events"] = _events(events, additions, table, request.get("request_id"))
    rebuilt = _rebuilt(events, len(samples), delta)
    data["samples"] = [_sample(k, s, rebuilt[k], table, short) for k, s in enumerate(samples)]
    return data


def _additions(events: list[dict], cumulative: bool) -> list[list[tuple | None]]:
    """Per event, per output: (added token ids, added text, whether that text is the whole), or
    None for an output that does not extend its index's previous one (written whole)."""
    previous: dict[int, tuple[list[int], str]] = {}
    result = []
    for event in events:
        row = []
        for out in event["outputs"]:
            index, ids, text = out["index"], out["token_ids"], out["text"]
            if not (_is_int(index) and type(ids) is list and isinstance(text, str)):
                previous.pop(index, None) if _is_int(index) else None
                row.append(None)
                continue
            before_ids, before_text = previous.get(index, ([], "")) if cumulative else ([], "")
            if ids[:len(before_ids)] != before_ids or not _int_list(ids[len(before_ids):]):
                row.append(None)  # written whole; what loading then keeps for the index:
                if not _int_list(ids):
                    previous.pop(index, None)
                    continue
            elif text.startswith(before_text):
                row.append((ids[len(before_ids):], text[len(before_text):], False))
            else:
                row.append((ids[len(before_ids):], text, True))
            previous[index] = (ids, text)
        result.append(row)
    return result


def _table(samples: list[dict], additions: list[list[tuple | None]]) -> dict[int, str]:
    """Each token id's most frequent text in the run (the first seen among equals)."""
    votes: dict[int, Counter] = defaultdict(Counter)
    for s in samples:
        ids, texts = s["token_ids"], s["token_texts"]
        if _int_list(ids) and isinstance(texts, list) and len(texts) == len(ids):
            for token_id, text in zip(ids, texts):
                if isinstance(text, str):
                    votes[token_id][text] += 1
        for lp in s["logprobs"] or ():
            for alternative in lp["top"]:
                if len(alternative) == 3 and _is_int(alternative[0]) and isinstance(alternative[2], str):
                    votes[alternative[0]][alternative[2]] += 1
    for row in additions:
        for added in row:
            if added is not None and len(added[0]) == 1 and not added[2]:
                votes[added[0][0]][added[1]] += 1
    return {token_id: counter.most_common(1)[0][0] for token_id, counter in votes.items()}


def _joined(ids: list[int], table: dict[int, str]) -> str | None:
    try:
        return "".join([table[t] for t in ids])
    except KeyError:
        return None


def _events(events: list[dict], additions: list[list[tuple | None]], table: dict[int, str],
            request_id: Any) -> list[list]:
    written = []
    last = {"request_id": request_id, "num_cached_tokens": None, "engine_requests": None}
    for event, row in zip(events, additions):
        outputs = []
        for out, added in zip(event["outputs"], row):
            if added is None:
                outputs.append({name: out[name] for name in OUTPUT_FIELDS})
                continue
            ids, text, whole = added
            slot = [text] if whole else None if _joined(ids, table) == text else text
            item = [out["index"], ids[0] if len(ids) == 1 else ids, slot, out["finish_reason"], out["stop_reason"]]
            while len(item) > 2 and item[-1] is None:
                item.pop()
            outputs.append(item)
        facts = {"finished": event["finished"]} if event["finished"] is not False else {}
        for name, value in last.items():
            if event[name] != value or type(event[name]) is not type(value):
                facts[name] = last[name] = event[name]
        written.append([event["t"], outputs, facts] if facts else [event["t"], outputs])
    return written


def _sample(k: int, s: dict, rebuilt: dict, table: dict[int, str], short: dict[float, float] | None) -> dict:
    data: dict[str, Any] = {} if s["index"] == k else {"index": s["index"]}
    data["seed"] = s["seed"]
    for name in DERIVED:
        if s[name] != rebuilt[name]:
            data[name] = s[name]
    ids, texts = s["token_ids"], s["token_texts"]
    if _int_list(ids) and isinstance(texts, list) and len(texts) == len(ids):
        changed = {str(p): text for p, (token_id, text) in enumerate(zip(ids, texts))
                   if token_id not in table or table[token_id] != text or type(text) is not str}
        if changed:
            data["token_texts"] = changed if len(changed) * 4 < len(texts) else texts
    else:
        data["token_texts"] = texts
    if s["logprobs"] is not None:
        sampled = ids if _int_list(ids) else []
        data["logprobs"] = [_logprob(lp, sampled[p] if p < len(sampled) else None, table, short)
                            for p, lp in enumerate(s["logprobs"])]
    for name in OPTIONAL:
        if s[name] is not None:
            data[name] = s[name]
    return data


def _logprob_values(lp: dict) -> list:
    return [lp["logprob"], *(alternative[1] for alternative in lp["top"])]


def _logprob(lp: dict, sampled: int | None, table: dict[int, str], short: dict[float, float] | None) -> list | dict:
    def number(value):  # zeros as they are: -0.0 and 0.0 are one key of ``short``
        return short[value] if short is not None and value else value

    flat: list = []
    for token_id, value, text in lp["top"]:
        flat += [token_id if table.get(token_id) == text and isinstance(text, str) else [token_id, text], number(value)]
    ids = [alternative[0] for alternative in lp["top"]]
    place = ids.index(lp["token_id"]) if lp["token_id"] in ids else None
    if place is not None:
        _, value, text = lp["top"][place]
        implied = {"token_id": sampled, "logprob": value, "text": text, "rank": place + 1}
    else:
        implied = {"token_id": sampled, "logprob": None, "text": table.get(lp["token_id"]), "rank": None}
    differs = [name for name in LOGPROB_FIELDS[1:] if lp[name] != implied[name] or type(lp[name]) is not
               type(implied[name])]
    if not differs:
        return flat
    if differs == ["rank"] and place is not None and _is_int(lp["rank"]):
        return [lp["rank"], *flat]
    return {"top": flat, **{name: number(lp[name]) if name == "logprob" else lp[name] for name in differs}}


# ---- reading -----------------------------------------------------------------------------------

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
        _read_logprob(f"{where}, logprob {p}", entry, ids[p] if p < len(ids) else None, table, float32)
        for p, entry in enumerate(logprobs)]
    sample.update({name: s.get(name) for name in OPTIONAL})
    return sample


def _read_logprob(where: str, entry: Any, sampled: int | None, table: dict[int, str], float32: bool) -> dict:
    def number(value):
        return float(np.float32(value)) if float32 and value is not None else value

    if isinstance(entry, list):
        flat, given = (entry[1:], {"rank": entry[0]}) if len(entry) % 2 else (entry, {})
    elif isinstance(entry, dict) and "top" in entry and set(entry) <= set(LOGPROB_FIELDS):
        flat, given = entry["top"], {name: value for name, value in entry.items() if name != "top"}
    else:
        raise _damaged(f"{where} is neither a list of (token id, logprob) pairs nor an object with \"top\"")
    if not isinstance(flat, list) or len(flat) % 2:
        raise _damaged(f"{where} has alternatives that are not (token id, logprob) pairs")
    top = []
    for slot, value in zip(flat[::2], flat[1::2]):
        if _is_int(slot) and slot in table:
            top.append([slot, number(value), table[slot]])
        elif isinstance(slot, list) and len(slot) == 2:
            top.append([slot[0], number(value), slot[1]])
        else:
            raise _damaged(f"{where} has an alternative that is neither a token id in the bundle's token texts "
                           "nor [token id, text]")
    token_id = given.get("token_id", sampled)
    ids = [alternative[0] for alternative in top]
    if token_id in ids:
        _, value, text = top[ids.index(token_id)]
        implied = {"logprob": value, "text": text, "rank": ids.index(token_id) + 1}
    else:
        implied = {"logprob": None, "text": table.get(token_id), "rank": None}
    lp = {"token_id": token_id, **implied, "top": top}
    lp.update({name: number(value) if name == "logprob" else value for name, value in given.items()
               if name != "token_id"})
    return lp
