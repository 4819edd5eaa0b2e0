"""How a bundle writes each sampled token's logprobs, and reads them back: the one place that knows.

Kept apart from the rest of the format so that a change in how the record holds logprobs changes
this module only. Versions 3 to 5 of the bundle write them alike:

- each logprob is a flat list ``[id, logprob, id, logprob, ...]`` of the top alternatives by
  rank (an id written ``[id, text]`` when its text is not the bundle's ``texts`` table's). The
  sampled token is the sample's token at that position; its logprob, text and rank are those of
  its alternative (rank: the place in the list). An odd-length list starts with the rank where
  that differs. Otherwise the logprob is an object ``{"top": [...]}`` with the parts that do not
  follow: ``token_id``, ``logprob``, ``text`` (a token not among the alternatives: none, and the
  table's), ``rank`` (none).
- ``logprobs_float32``: every logprob is a float32 value (vLLM's are), written with the fewest
  digits that give the same float32; reading turns each back into the identical Python float.
- a logprob that is not finite is written as the string ``"NaN"``, ``"Infinity"`` or
  ``"-Infinity"`` (JSON has no such numbers; a consumer in any language reads the file).

Each part is written only when reading would not give it back as it is, compared by type and
value, so what is read is what was written, by construction.

Version 4 writes a sample whose logprobs the record holds as arrays (what an engine made:
playground/logprobs.py) as those arrays: an object of typed arrays, each ``{"dtype": ..., "bdata":
base64 of its little-endian bytes}`` (plotly's JSON writes numeric arrays so too), the logprobs
``f4`` (float32) and the integers ``i4`` (int32). Version 5 writes each integer array in the
smallest of ``u1``, ``u2`` and ``i4`` that holds all its values: a vocabulary under 65,536 writes
its ids in two bytes, counts and most ranks fit one, and a bundle with a top-5 is a quarter
smaller than in four bytes each (what is sent, stored and read).
``rank`` and ``logprob`` of the sampled token per position, ``count`` of alternatives per
position, and the alternatives' ``top_id`` and ``top_logprob`` one position after another. The
sampled tokens are the sample's ``token_ids`` (else ``token_id``, an array too); the texts are the
bundle's table's, or ``texts`` (token id: text) where they differ. A float32 array is the exact
value of every logprob, NaN and infinities included, and a run of n=256 x 1,000 tokens with a
top-5 writes its 1.5 million of them in milliseconds.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from playground.errors import damaged_bundle
from playground.logprobs import Logprobs

FIELDS = ("top", "token_id", "logprob", "text", "rank")
NOT_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def float32_digits(samples: list[Any]) -> dict[float, float] | None:
    """The shortest writing of each logprob value, when every one is a float32 value (then the
    bundle says ``logprobs_float32``); None when one is not, and they are written as they are."""
    short: dict[float, float] = {}
    seen = False
    for s in samples:
        if isinstance(s.logprobs, Logprobs):  # written as arrays, exact as they are
            continue
        for lp in s.logprobs or ():
            for value in (lp.logprob, *(alternative[1] for alternative in lp.top)):
                seen = True
                if value is None or value in short:
                    continue
                found = _float32_short(value) if type(value) is float else None
                if found is None:
                    return None
                short[value] = found
    return short if seen and short else None


def _float32_short(value: float) -> float | None:
    """The float with the fewest digits that is the same float32 as ``value``, or None when
    ``value`` is not a float32 value."""
    with np.errstate(over="ignore"):
        single = np.float32(value)
    if float(single) != value:
        return None
    for text in (str(single), f"{value:.9g}"):
        short = float(text)
        if float(np.float32(short)) == value:
            return short
    return None


def write(lp: Any, sampled: int | None, table: dict[int, str], short: dict[float, float] | None) -> list | dict:
    """One TokenLogprob as written (see the module's docstring); ``sampled``: the sample's token
    at this position."""

    def number(value):  # zeros as they are: -0.0 and 0.0 are one key of ``short``
        value = short[value] if short is not None and value else value
        if type(value) is float and not math.isfinite(value):
            return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
        return value

    flat: list = []
    for token_id, value, text in lp.top:
        flat += [token_id if type(text) is str and table.get(token_id) == text and type(token_id) is int
                 else [token_id, text], number(value)]
    ids = [alternative[0] for alternative in lp.top]
    place = ids.index(lp.token_id) if lp.token_id in ids else None
    if place is not None:
        _, value, text = lp.top[place]
        implied = {"token_id": sampled, "logprob": value, "text": text, "rank": place + 1}
    else:
        implied = {"token_id": sampled, "logprob": None, "text": table.get(lp.token_id), "rank": None}
    differs = [name for name in FIELDS[1:] if not same(getattr(lp, name), implied[name])]
    if not differs:
        return flat
    if differs == ["rank"] and place is not None and type(lp.rank) is int:
        return [lp.rank, *flat]
    return {"top": flat, **{name: number(lp.logprob) if name == "logprob" else getattr(lp, name) for name in differs}}


INTS = ("u1", "u2", "i4")  # an integer array's dtypes, smallest first (version 4 wrote i4 only)
ARRAYS = {"rank": INTS, "logprob": ("f4",), "count": INTS, "top_id": INTS, "top_logprob": ("f4",)}


def write_arrays(lps: Logprobs, sampled: list[int], table: dict[int, str],
                 differ: dict[str, Any] | None = None) -> dict[str, Any]:
    """A sample's logprobs held as arrays, written as typed arrays (see the module's docstring).
    ``differ``: the texts its ids have that are not the table's, when already known."""
    starts = np.frombuffer(lps.starts, dtype=np.int32)
    data = {"rank": _typed_ints(lps.rank), "logprob": _typed(lps.sampled, "f4"),
            "count": _typed_ints(np.diff(starts)), "top_id": _typed_ints(lps.top_ids),
            "top_logprob": _typed(lps.top_values, "f4")}
    if lps.ids.tolist() != sampled[:len(lps)]:
        data["token_id"] = _typed_ints(lps.ids)
    texts = lps.texts
    if differ is None:
        differ = {str(t): texts.get(t) for t in distinct(lps.ids, lps.top_ids) if texts.get(t) != table.get(t)}
    if differ:
        data["texts"] = differ
    return data


def read_arrays(where: str, entry: dict, sampled: list[int], table: dict[int, str]) -> Logprobs:
    """The typed arrays of ``write_arrays`` -> Logprobs; InvalidBundle for damaged ones."""
    if not set(entry) <= {*ARRAYS, "token_id", "texts"} or not set(ARRAYS) <= set(entry):
        raise damaged_bundle(f"{where} is not the arrays {', '.join(ARRAYS)}")
    arrays = {name: _untyped(where, name, entry[name], dtypes) for name, dtypes in ARRAYS.items()}
    ids = _untyped(where, "token_id", entry["token_id"], INTS) if "token_id" in entry else np.array(sampled, np.int32)
    positions = len(arrays["rank"])
    if not (len(arrays["logprob"]) == len(arrays["count"]) == positions <= len(ids)) or \
            int(arrays["count"].sum()) != len(arrays["top_id"]) or len(arrays["top_id"]) != len(arrays["top_logprob"]) \
            or (arrays["count"] < 0).any():
        raise damaged_bundle(f"{where} has arrays of lengths that do not fit together")
    texts = dict(table)
    given = entry.get("texts", {})
    if not isinstance(given, dict):
        raise damaged_bundle(f"{where} has texts that are not an object of token id: text")
    try:
        texts.update({int(t): text for t, text in given.items()})
    except ValueError:
        raise damaged_bundle(f"{where} has a text for something that is not a token id") from None
    made = Logprobs(texts)
    made.ids.frombytes(ids[:positions].astype("<i4").tobytes())
    made.rank.frombytes(arrays["rank"].tobytes())
    made.sampled.frombytes(arrays["logprob"].tobytes())
    made.starts.frombytes(np.cumsum(arrays["count"], dtype=np.int32).astype("<i4").tobytes())
    made.top_ids.frombytes(arrays["top_id"].tobytes())
    made.top_values.frombytes(arrays["top_logprob"].tobytes())
    return made


def distinct(*arrays: Any) -> list[int]:
    """The ids in int32 arrays, each once, in order (numpy's sort: a set of every alternative of
    every position was a tenth of writing a big run)."""
    return np.unique(np.concatenate([np.frombuffer(a, dtype=np.int32) for a in arrays])).tolist()


def _typed(values: Any, dtype: str) -> dict[str, str]:
    raw = np.asarray(values, dtype="<" + dtype).tobytes()
    return {"dtype": dtype, "bdata": base64.b64encode(raw).decode("ascii")}


def _typed_ints(values: Any) -> dict[str, str]:
    """An int32 array in the smallest of INTS that holds every value."""
    values = np.asarray(values, dtype=np.int32)
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    return _typed(values, "i4" if low < 0 or high > 0xFFFF else "u2" if high > 0xFF else "u1")


def _untyped(where: str, name: str, value: Any, dtypes: tuple[str, ...]) -> np.ndarray:
    """A typed array as int32 (of one of INTS) or float32, as the record holds it."""
    if not (isinstance(value, dict) and value.get("dtype") in dtypes and isinstance(value.get("bdata"), str)):
        raise damaged_bundle(f"{where}: {name} is not a typed array of {' or '.join(dtypes)}")
    dtype = value["dtype"]
    try:
        array = np.frombuffer(base64.b64decode(value["bdata"], validate=True), dtype="<" + dtype)
    except (binascii.Error, ValueError):
        raise damaged_bundle(f"{where}: {name} is not base64 of {dtype} values") from None
    return array if dtype in ("i4", "f4") else array.astype("<i4")


def same(a: Any, b: Any) -> bool:
    """Equal and of one type, -0.0 told from 0.0 and a NaN equal to itself: what reading gives back."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return repr(a) == repr(b)
    return a == b


def read(where: str, entry: Any, sampled: int | None, table: dict[int, str], float32: bool) -> dict[str, Any]:
    """One written logprob -> its TokenLogprob's fields (``top`` as lists); InvalidBundle, a
    sentence naming ``where``, for one that is damaged."""

    def number(value):
        if type(value) is str and value in NOT_FINITE:
            return NOT_FINITE[value]
        return float(np.float32(value)) if float32 and value is not None else value

    if isinstance(entry, list):
        flat, given = (entry[1:], {"rank": entry[0]}) if len(entry) % 2 else (entry, {})
    elif isinstance(entry, dict) and "top" in entry and set(entry) <= set(FIELDS):
        flat, given = entry["top"], {name: value for name, value in entry.items() if name != "top"}
    else:
        raise damaged_bundle(f"{where} is neither a list of (token id, logprob) pairs nor an object with \"top\"")
    if not isinstance(flat, list) or len(flat) % 2:
        raise damaged_bundle(f"{where} has alternatives that are not (token id, logprob) pairs")
    top = []
    for slot, value in zip(flat[::2], flat[1::2]):
        if type(slot) is int and slot in table:
            top.append((slot, number(value), table[slot]))
        elif isinstance(slot, list) and len(slot) == 2:
            top.append((slot[0], number(value), slot[1]))
        else:
            raise damaged_bundle(f"{where} has an alternative that is neither a token id in the bundle's token texts "
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
