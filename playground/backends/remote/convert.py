"""Between the playground's records and a vLLM server's completions API, both ways.

Out: a Prepared parent request becomes its completion requests. The children and their seeds
come from the run's plan: wrapper and same-seed send one request per child with n=1 and the
child's id and seed; native sends one request with n and the parent's.

In: a streamed choice becomes text pieces (one per token) and TokenLogprobs, from texts already
known (``TokenTexts``: each token's text decoded alone, as vLLM decodes logprob tokens, asked of
the server once per token for the backend's life, since /detokenize decodes a list as one string);
and the server's stream, always DELTA (``stream=True`` sets it), becomes the output_kind the run
asked for (``ClientViews``): CUMULATIVE and FINAL_ONLY are rebuilt on the client, to the same
contract the embedded engine keeps (checked by ``playground/qa/contract.py``), and the run says so
(``output_kind_source``). These are plain functions and data over what is already known, so they
need no server to test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from playground.backends.base import Prepared
from playground.backends.recorder import Observation
from playground.errors import RemoteError
from playground.request import fields
from playground.run import Event, EventOutput, TokenLogprob

# One top-logprob position: (sampled token id, its logprob, [(id, logprob), ...] best first).
Position = tuple[int, float, list[tuple[int, float]]]


def completion_requests(prepared: Prepared, model: str) -> list[tuple[int | None, dict[str, Any]]]:
    """(sample index, or None for native's one request of n, and its body) for each HTTP stream."""
    request, plan = prepared.request, prepared.plan
    if plan.mode == "native":
        return [(None, completion_body(prepared, model, request.n, plan.seed, plan.parent_id))]
    return [(child.index, completion_body(prepared, model, 1, child.seed, child.request_id))
            for child in plan.children]


def completion_body(prepared: Prepared, model: str, n: int, seed: int | None, request_id: str) -> dict[str, Any]:
    """Every sampler setting (the schema's) is sent explicitly, so the server's defaults (a model's
    generation_config, say) cannot change what the request means; vLLM's own settings go in the
    body's extra fields, beside the OpenAI API's."""
    extra: dict[str, Any] = {"return_token_ids": True, "request_id": request_id}
    body: dict[str, Any] = {
        "model": model, "prompt": prepared.engine_prompt_ids, "n": n, "seed": seed,
        "stream": True, "stream_options": {"include_usage": True}, "extra_body": extra,
    }
    settings = prepared.request.sampler_settings()
    for name, meta in ((f.name, meta) for f, meta in fields() if meta.sampler):
        value = settings[name]
        if value is None or value == []:
            continue  # stop and logprobs: none asked for
        (extra if meta.extra else body)[name] = list(value) if name == "stop" else value
    if settings["logprobs"] is not None:
        extra["return_tokens_as_token_ids"] = True  # alternatives keyed by id: exact, no clashes
    return body


def choice_token_ids(choice, where: str) -> list[int]:
    """The choice's token ids (vLLM's ``return_token_ids``), which the record is built on."""
    token_ids = getattr(choice, "token_ids", None)
    if token_ids is None:
        raise RemoteError(
            f"{where} did not return token ids; the playground needs a vLLM server that supports return_token_ids"
        )
    return list(token_ids)


def positions(logprobs, token_ids: list[int], where: str) -> list[Position]:
    """The completions API's logprobs of one choice, one position per token, alternatives best first."""
    if logprobs is None or len(logprobs.token_logprobs or []) != len(token_ids):
        raise RemoteError(f"{where} did not return logprobs for every token")
    result = []
    for token_id, chosen, top in zip(token_ids, logprobs.token_logprobs, logprobs.top_logprobs or []):
        entries = sorted(((parse_token_id(key), value) for key, value in (top or {}).items()), key=lambda e: -e[1])
        result.append((token_id, chosen, entries))
    return result


def ids_needing_text(token_ids: list[int], logprob_positions: list[Position] | None) -> set[int]:
    """The ids whose single-token text the conversions below will look up."""
    needed = set(token_ids) if len(token_ids) > 1 else set()
    for token_id, _, entries in logprob_positions or []:
        needed.add(token_id)
        needed.update(tid for tid, _ in entries)
    return needed


def pieces(text: str, token_ids: list[int], texts: dict[int, str]) -> list[str]:
    """One text piece per token. A chunk usually holds one token and its text is that token's
    piece as vLLM's detokenizer produced it. When the server merged several tokens into one
    chunk, the tokens decoded alone are used if they add up to the chunk's text; otherwise the
    whole text goes with the chunk's last token."""
    if len(token_ids) <= 1:
        return [text] * len(token_ids)
    alone = [texts[t] for t in token_ids]
    return alone if "".join(alone) == text else [""] * (len(token_ids) - 1) + [text]


def token_logprobs(logprob_positions: list[Position], k: int, texts: dict[int, str]) -> list[TokenLogprob]:
    """TokenLogprobs of one choice. The API gives no ranks: a sampled token's rank is exact when
    it is among the top k, and None when it is not (its rank is then above k)."""
    result = []
    for token_id, chosen, entries in logprob_positions:
        ids = [tid for tid, _ in entries]
        rank = ids.index(token_id) + 1 if 0 < len(entries) <= k and token_id in ids else None
        result.append(TokenLogprob(
            token_id=token_id, logprob=chosen, rank=rank, text=texts[token_id],
            top=[(tid, value, texts[tid]) for tid, value in entries],
        ))
    return result


def parse_token_id(key: str) -> int:
    """``token_id:123`` (return_tokens_as_token_ids) -> 123."""
    try:
        return int(key.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        raise RemoteError(f"the server returned a logprob key {key!r}, not token_id:N") from None


# --- each token's text, asked of the server once -----------------------------------------------

DECODE_CONCURRENCY = 8  # /detokenize requests in flight at once, per call


class TokenTexts:
    """token id -> its text decoded alone. Plain data, so any event loop may fill and read it."""

    def __init__(self, concurrency: int = DECODE_CONCURRENCY):
        self.concurrency = concurrency
        self._text: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._text)

    async def texts(self, token_ids: Iterable[int], decode_one: Callable[[int], Awaitable[str]]) -> dict[int, str]:
        """The text of every id in ``token_ids``; ``decode_one`` asks the server for the missing.
        If one request fails, the others are cancelled and that failure is raised."""
        wanted = set(token_ids)
        missing = [t for t in wanted if t not in self._text]
        if missing:
            gate = asyncio.Semaphore(self.concurrency)  # made per call: it belongs to this loop

            async def fetch(token_id: int) -> None:
                async with gate:
                    self._text[token_id] = await decode_one(token_id)

            fetches = [asyncio.ensure_future(fetch(t)) for t in missing]
            try:
                await asyncio.gather(*fetches)
            finally:
                for task in fetches:
                    task.cancel()
                await asyncio.gather(*fetches, return_exceptions=True)
        return {t: self._text[t] for t in wanted}


# --- the output_kind views, rebuilt on the client ----------------------------------------------

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
