"""The output_kind views of a remote run, rebuilt on the client from the server's DELTA stream.

A streamed completion from a vLLM server is always DELTA (``stream=True`` sets it), whatever the
run asked for. So CUMULATIVE and FINAL_ONLY are rebuilt here, on the client, from those DELTA
chunks, to the same contract the embedded engine keeps (checked by
``playground/qa/contract.py``): the UI and the recorder then see one behaviour whichever
backend ran. The run records that it was rebuilt (``output_kind_source``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from playground.backends.recorder import Observation
from playground.run import Event, EventOutput, TokenLogprob


class ClientViews:
    """Rebuilds the run's events from the server's DELTA chunks, for the asked output_kind.

    The rules are vLLM's (see the output_kind contract): DELTA passes each chunk on; CUMULATIVE
    carries the index's whole text and tokens so far; FINAL_ONLY yields one event, after the last
    sample finishes, with all n in index order. ``finished`` is true on the last event only, and
    a finished sample is never returned again.
    """

    def __init__(self, n: int, output_kind: str, logprobs: bool = False):
        self.n = n
        self.kind = output_kind
        self.logprobs_asked = logprobs
        self.text = [""] * n
        self.ids: list[list[int]] = [[] for _ in range(n)]
        self.pieces: list[list[str]] = [[] for _ in range(n)]
        self.logprobs: list[list[TokenLogprob]] = [[] for _ in range(n)]
        self.finish: list[str | None] = [None] * n
        self.stop: list[str | int | None] = [None] * n

    @property
    def finished(self) -> bool:
        return all(reason is not None for reason in self.finish)

    def add(self, t, index, text, token_ids, pieces, logprobs, finish_reason, stop_reason) -> Observation | None:
        if not 0 <= index < self.n or self.finish[index] is not None:
            return None
        self.text[index] += text
        self.ids[index].extend(token_ids)
        self.pieces[index].extend(pieces)
        if logprobs is not None:
            self.logprobs[index].extend(logprobs)
        self.finish[index], self.stop[index] = finish_reason, stop_reason
        if self.kind == "FINAL_ONLY":
            if not self.finished:
                return None
            indices = list(range(self.n))
            event = Event(t=t, finished=True, outputs=[self._full(i) for i in indices])
            texts = {i: list(self.pieces[i]) for i in indices}
        elif self.kind == "CUMULATIVE":
            indices = [index]
            event = Event(t=t, finished=self.finished, outputs=[self._full(index)])
            texts = {index: list(pieces)}
        else:
            indices = [index]
            out = EventOutput(index, text, list(token_ids), finish_reason, stop_reason)
            event = Event(t=t, finished=self.finished, outputs=[out])
            texts = {index: list(pieces)}
        observation = Observation(event=event, token_texts=texts)
        if logprobs is not None:
            for i in indices:
                observation.logprobs[i] = list(logprobs) if self.kind == "DELTA" else list(self.logprobs[i])
        return observation

    def abort(self, t: float) -> list[Observation]:
        """End every unfinished sample with finish_reason "abort", as AsyncLLM's abort does: no new
        tokens for DELTA, each sample's whole text so far for CUMULATIVE, and for FINAL_ONLY the one
        event with all n as they stand."""
        ended = [self.add(t, index, "", [], [], [] if self.logprobs_asked else None, "abort", None)
                 for index in range(self.n) if self.finish[index] is None]
        return [observation for observation in ended if observation is not None]

    def _full(self, i: int) -> EventOutput:
        return EventOutput(i, self.text[i], list(self.ids[i]), self.finish[i], self.stop[i])


@dataclass
class Usage:
    """The server's token counts, summed over the run's HTTP streams. A wrapper run is n
    requests, so the server counts its prompt n times; a native run counts it once."""

    requests: int
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, usage) -> None:
        if usage is None:
            return
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            self.counts[name] = self.counts.get(name, 0) + (getattr(usage, name, 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if cached is not None:
            self.counts["cached_tokens"] = self.counts.get("cached_tokens", 0) + cached

    def as_dict(self) -> dict[str, Any]:
        return {**self.counts, "requests": self.requests, "source": "server"}
