"""A bundle's events: written in one pass over a run's outputs, at its end or while it is
recorded, and the rules writing and reading both follow (how far an output takes its sample, when
its tokens arrived). The layout is playground/bundle_format.py's.

At n=256 x 1,000 tokens a run has 250,000 outputs, so the common one (tokens that are its
sample's next ones, with their own pieces as text) is written without a call. While a run is
recorded, ``EventsWriter`` can write the events that have come so far and continue later
(``LiveBundle`` in playground/run.py): what it wrote stays right as long as every sample only grew,
which it checks, so at the run's end only the last events are left to write.
"""

from __future__ import annotations

import json
from typing import Any

from playground.bundle_logprobs import same

OUTPUT_FIELDS = ("index", "text", "token_ids", "finish_reason", "stop_reason")


def compact(value: Any) -> str:
    """JSON in one line, without spaces: how a bundle is written."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def int_list(value: Any) -> bool:
    return type(value) is list and set(map(type, value)) <= {int}


def pieces_of(ids: Any, texts: Any) -> list[str] | None:
    """A sample's decoded pieces when there is one text per token id: what outputs' texts refer to."""
    if type(texts) is list and type(ids) is list and len(texts) == len(ids) and set(map(type, texts)) <= {str}:
        return texts
    return None


def covered(delta: bool, at: int | None, ids: Any, sample_ids: list[int] | None) -> int | None:
    """How far into its sample's token ids an index is once an output of ``ids`` came (``at``:
    how far it was): the output's ids are the sample's next ones (DELTA) or its first ones (the
    other kinds). None when they are not, or the place is unknown. Writing and reading follow
    an index with this one function, so both know the same place at every output."""
    if type(ids) is not list or sample_ids is None:
        return None
    if delta:
        return None if at is None or sample_ids[at:at + len(ids)] != ids else at + len(ids)
    return len(ids) if sample_ids[:len(ids)] == ids else None


def spelled(text: Any, pieces: list[str], start: int, end: int) -> bool:
    """``text`` is the pieces of its sample's tokens from ``start`` to ``end`` (there are that many
    pieces): an output written without its text, which reading takes from the pieces."""
    return end <= len(pieces) and text == (pieces[start] if end - start == 1 else "".join(pieces[start:end]))


def stamp(times: list, t: Any, new: int) -> None:
    """``new`` tokens arrived at ``t``: each new token at its event's time (most often one, which
    takes no list). The recorder stamps a sample's times so, and ``Arrivals`` derives them so."""
    if new == 1:
        times.append(t)
    elif new:
        times.extend([t] * new)


class Arrivals:
    """Each sample's token times as the recorder stamps them (playground/backends/recorder.py,
    ``stamp``): each new token at its event's time. Writing (``EventsWriter``) and reading (``arrivals``) follow
    the outputs with this one rule, so both derive the same times."""

    def __init__(self, n: int, delta: bool):
        self.times: list[list] = [[] for _ in range(n)]
        self.had, self.delta = [0] * n, delta

    def add(self, index: int, t: Any, length: int) -> None:
        """An output of sample ``index`` at ``t`` carrying ``length`` token ids (DELTA: new ones;
        the other kinds: every one so far)."""
        new = length if self.delta else max(0, length - self.had[index])
        self.had[index] = length
        stamp(self.times[index], t, new)


def arrivals(events: list[dict], n: int, delta: bool) -> list[list]:
    """The token times of events as read, ``{"t", "outputs": [{"index", "token_ids"}`` or
    ``{"index", "prefix"}, ...]}``."""
    followed = Arrivals(n, delta)
    for event in events:
        for out in event["outputs"]:
            index = out["index"]
            if type(index) is not int or not 0 <= index < n:
                continue
            ids = out["prefix"][1] if "prefix" in out else out["token_ids"]
            followed.add(index, event["t"], ids if type(ids) is int else len(ids) if type(ids) is list else 0)
    return followed.times


class EventsWriter:
    """Writes a run's events in order, in one pass or in parts (``add`` again with the events that
    came since), and derives each sample's token times as reading does (``times``).

    It follows the samples' own lists (token ids, pieces): a recorder only appends to them, so
    what was written of an output stays what the finished run would write, except where an
    output's text is written as its sample's whole text (``[]``: the text a stop string cut),
    which needs the sample's final text. Before the end it guesses that an output with a finish
    reason holds it, as the sample's last output does, and ``guessed_right`` checks each guess
    against the final texts. ``follows`` says whether the samples are still the lists it followed,
    grown at most.
    """

    def __init__(self, samples: list, delta: bool, request_id: Any):
        n = len(samples)
        self.samples, self.delta = samples, delta
        self.ids_of = [s.token_ids if int_list(s.token_ids) else None for s in samples]
        self.pieces_of = [pieces_of(s.token_ids, s.token_texts) for s in samples]
        self.places = [[0, ""] for _ in range(n)]  # per index: how far into its sample's ids, its previous text
        self.held_at = [0] * n  # per index: its previous text's length, while that text is its sample's prefix
        self.arrivals = Arrivals(n, delta)
        self.last = {"request_id": request_id, "num_cached_tokens": None, "engine_requests": None}
        self.count = 0  # events written
        self.guesses: list[tuple[int, str, bool]] = []  # before the end: (index, text, written as [])

    @classmethod
    def of(cls, run) -> EventsWriter:
        """The writer of a run's events, from its first."""
        return cls(run.samples, run.request.get("output_kind") == "DELTA", run.request.get("request_id"))

    @property
    def times(self) -> list[list]:
        return self.arrivals.times

    def follows(self, samples: list) -> bool:
        """The samples are the ones written from, each list the one followed (grown, not replaced)."""
        return len(samples) == len(self.samples) and all(
            s is mine and (ids is None or s.token_ids is ids) and (pieces is None or s.token_texts is pieces
                                                                   and len(pieces) == len(s.token_ids))
            for s, mine, ids, pieces in zip(samples, self.samples, self.ids_of, self.pieces_of))

    def guessed_right(self) -> bool:
        """Every text written before the end is written as the finished run writes it."""
        return all((text == self.samples[i].text) == whole for i, text, whole in self.guesses)

    def add(self, events: list, final: bool = True) -> list[list]:
        """The events as written, continuing from the ones before; ``final``: the run has ended
        (a text may then be written as its sample's whole text)."""
        samples, delta, places, held_at = self.samples, self.delta, self.places, self.held_at
        ids_of, pieces_of_, add = self.ids_of, self.pieces_of, self.arrivals.add
        n, last = len(samples), self.last
        written = []
        for event in events:
            t, outputs = event.t, []
            for out in event.outputs:
                i = out.index
                if type(i) is not int or not 0 <= i < n:
                    outputs.append({name: getattr(out, name) for name in OUTPUT_FIELDS})
                    continue
                place, ids, pieces = places[i], ids_of[i], pieces_of_[i]
                span = out.span_of(samples[i])
                at, item = place[0], None
                if delta and span is not None and span == at and ids is not None and pieces is not None and \
                        spelled(out.text, pieces, at, at + out.carried):
                    # The common DELTA output: held as the span of its sample's ids where the last
                    # one ended, so known to be its next tokens, and its text their pieces.
                    item = [i, out.carried]
                    add(i, t, item[1])
                else:
                    if out.held or span is not None:
                        length, given = out.carried, None
                    else:
                        given = out.token_ids
                        length = len(given) if type(given) is list else 0
                    add(i, t, length)
                    if at is not None and ids is not None and pieces is not None:
                        item = _known(out, i, at, length, given, delta, ids, pieces, samples[i], held_at)
                if item is not None:
                    place[0] = at + item[1]
                    finish, stop = out.finish_reason, out.stop_reason
                    if finish is not None or stop is not None:
                        item += [None, finish] if stop is None else [None, finish, stop]
                    outputs.append(item)
                    continue
                if not delta and held_at[i] is not None:  # the slow path reads the previous text itself
                    place[1], held_at[i] = samples[i].text[:held_at[i]], None
                whole = samples[i].text if final or out.finish_reason is not None else None
                outputs.append(_output(out, place, delta, ids, pieces, whole, None if final else self.guesses))
            facts = {"finished": event.finished} if event.finished is not False else {}
            for name, value in last.items():
                if not same(getattr(event, name), value):
                    facts[name] = last[name] = getattr(event, name)
            written.append([t, outputs, facts] if facts else [t, outputs])
        self.count += len(events)
        return written


def _known(out, i: int, at: int, length: int, given: Any, delta: bool, ids: list[int], pieces: list[str], sample,
           held_at: list) -> list | None:
    """The item of an output that is not a span but says what its sample's lists say already
    (``[i, tokens]``), else None: a DELTA output of its sample's next tokens with their pieces as
    its text, or a cumulative one held as its sample's prefix, what it adds read from the
    sample's text rather than by copying and comparing the whole so far."""
    if delta:
        if length == 1 and given is not None:  # most carry one: compared without slices
            there = at < len(ids) and ids[at] == given[0]
        else:
            there = type(given) is list and ids[at:at + length] == given
        return [i, length] if there and spelled(out.text, pieces, at, at + length) else None
    if given is None and held_at[i] is not None and length >= at:
        size = out.held_length(sample)
        if size is not None and size >= held_at[i] and sample.text[held_at[i]:size] == "".join(pieces[at:length]):
            held_at[i] = size
            return [i, length - at]
    return None


def _output(out, place: list, delta: bool, ids: list[int] | None, pieces: list[str] | None,
            whole: Any, guesses: list | None) -> list | dict:
    at, before = place
    # Held: its sample's first tokens, by construction (the recorder kept it so).
    new = out.carried if out.held and not delta and ids is not None else covered(delta, at, out.token_ids, ids)
    text = out.text
    if at is None or new is None or new < at or type(text) is not str:
        place[0] = new
        if not delta:
            place[1] = text if type(text) is str else None
        return {name: getattr(out, name) for name in OUTPUT_FIELDS}
    if before is not None and text.startswith(before):
        added = text[len(before):]
        slot = None if pieces is not None and added == "".join(pieces[at:new]) else added
    else:
        slot = [] if whole is not None and text == whole else [text]
        if guesses is not None:
            guesses.append((out.index, text, slot == []))
    place[0] = new
    if not delta:
        place[1] = text
    item = [out.index, new - at, slot, out.finish_reason, out.stop_reason]
    while len(item) > 2 and item[-1] is None:
        item.pop()
    return item
