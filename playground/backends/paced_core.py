"""vLLM's front end at a GPU's pace on any machine: AsyncLLM with its engine core replaced by a
source of tokens at a chosen rate (``--paced-core TOKENS_PER_S``), for the bench.

On a GPU the engine stops being the bound and the app's one Python process becomes it. Its cost
per token can be measured at the engine's pace on this machine (80-600 tokens a second, where
per-second costs weigh on every token) or at a GPU's pace with a replay (which leaves vLLM's front
end out). Here everything in the app's process is real (vLLM's input processing, n fan-out, output
processing, detokenization and logprobs, the playground, Gradio), and only what the engine core's
process did is not: no weights are loaded, and every unfinished request gets one token a step, at
``tokens_per_s`` over all of them. Tokens are drawn from English text's token ids, from a
generator seeded by the child's seed, so a seeded request repeats (native and wrapper alike); top-k
logprobs are drawn around the sampled token, as the sampler lays them out. Never a stand-in for the
engine in a test of sampling: the tokens are not the model's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
from vllm.v1.engine import (
    EngineCoreEvent,
    EngineCoreEventType,
    EngineCoreOutput,
    EngineCoreOutputs,
    FinishReason,
)
from vllm.v1.outputs import LogprobsLists

TEXT = ("The lighthouse keeper wrote in his log every evening, as the wind came off the grey sea and the "
        "waves broke on the rocks below. It had been years since anyone came there, but that morning a "
        "small boat appeared on the horizon, and the children of the village told stories of it for a "
        "long time: of the old man, the lamp, the birds on the rail and the salt in the air. \"Look,\" "
        "she said, pointing through the quiet harbour at 42 ships. Él miró al mar; 海は静かだった.")


CHUNK = 64  # positions a child's tokens (and logprobs) are drawn for at once: numpy per chunk, not per token


@dataclasses.dataclass
class _Child:
    """One engine request: what it asked for, what it has been given, and its next positions."""

    request_id: str
    rng: np.random.Generator
    max_tokens: int
    logprobs: int | None
    queued: float
    made: int = 0
    tokens: list[int] = dataclasses.field(default_factory=list)  # the chunk's, from ``at`` on
    rows: tuple | None = None  # the chunk's logprobs: token ids, values, ranks (one row per position)
    at: int = 0
    read: int | None = None  # where in the text its next chunk starts


class PacedCore:
    """What AsyncLLM needs of its engine-core client, answered in its own process at a pace.
    ``cpu_s``: the CPU its own drawing took (the bench takes it out of every path's figure)."""

    def __init__(self, tokens_per_s: float):
        self.tokens_per_s = float(tokens_per_s)
        # Until the engine's tokenizer gives TEXT's (``read_text``): its tokens in order, where a
        # child may start reading (a whole character before), and the distinct ids (alternatives).
        self.text = self.vocabulary = np.arange(1000, 2000, dtype=np.int64)
        self.starts = np.arange(len(self.text))
        self.requests: dict[str, _Child] = {}
        self.resources = SimpleNamespace(engine_dead=False)  # AsyncLLM.errored reads it
        self.engine_ranks_managed = [0]
        self.cpu_s = 0.0
        self._added = asyncio.Event()
        self._next_step = 0.0

    async def get_supported_tasks_async(self) -> tuple[str, ...]:
        return ("generate",)

    async def add_request_async(self, request) -> None:
        params = request.sampling_params
        seed = params.seed if params.seed is not None else int.from_bytes(np.random.bytes(4), "little")
        self.requests[request.request_id] = _Child(request.request_id, np.random.default_rng(seed),
                                                   params.max_tokens or 16, params.logprobs,
                                                   EngineCoreEvent.new_event(EngineCoreEventType.QUEUED).timestamp)
        self._added.set()

    async def abort_requests_async(self, request_ids) -> None:
        for request_id in request_ids:
            self.requests.pop(request_id, None)

    async def get_output_async(self):
        """The next step: a token for every unfinished request, ``len(requests) / tokens_per_s``
        after the step before (at once when the app is behind: the source never runs ahead of it)."""
        while not self.requests:
            self._added.clear()
            await self._added.wait()
            self._next_step = time.monotonic()
        self._next_step += len(self.requests) / self.tokens_per_s
        delay = self._next_step - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            self._next_step = time.monotonic()
        began, now = time.thread_time(), time.monotonic()
        outputs = [self._step(child, now) for child in list(self.requests.values())]
        self.cpu_s += time.thread_time() - began
        return EngineCoreOutputs(outputs=outputs, timestamp=now)

    def _step(self, child: _Child, now: float):
        if child.at == len(child.tokens):
            self._draw(child)
        at = child.at
        child.at += 1
        events = None
        if child.made == 0:
            events = [EngineCoreEvent(EngineCoreEventType.QUEUED, child.queued),
                      EngineCoreEvent(EngineCoreEventType.SCHEDULED, now)]
        child.made += 1
        finished = child.made >= child.max_tokens
        if finished:
            del self.requests[child.request_id]
        logprobs = None
        if child.rows is not None:
            ids, values, ranks = child.rows
            logprobs = LogprobsLists(ids[at:at + 1], values[at:at + 1], ranks[at:at + 1])
        return EngineCoreOutput(request_id=child.request_id, new_token_ids=[child.tokens[at]], events=events,
                                new_logprobs=logprobs, finish_reason=FinishReason.LENGTH if finished else None)

    def _draw(self, child: _Child) -> None:
        """The child's next CHUNK positions. Logprobs in vLLM's sampler's layout, a row per
        position: the sampled token's logprob first, then the top-k, the sampled token among them
        at its rank or, ranked k + 1, not in them."""
        rng, vocabulary = child.rng, self.vocabulary
        if child.read is None:
            child.read = int(self.starts[rng.integers(len(self.starts))])
        tokens = np.take(self.text, child.read + np.arange(CHUNK), mode="wrap")
        child.read = (child.read + CHUNK) % len(self.text)
        child.tokens, child.at = tokens.tolist(), 0
        if not child.logprobs:
            return
        k = min(child.logprobs, len(vocabulary) - 1)
        rows = np.arange(CHUNK)
        top = np.sort(np.log(rng.dirichlet(np.ones(k + 2), size=CHUNK)[:, :k]), axis=1)[:, ::-1].astype(np.float32)
        # k + 1 distinct ids a row (consecutive places of a shuffled vocabulary); the sampled token
        # is in the top-k only at its rank
        places = (rng.integers(len(vocabulary), size=CHUNK)[:, None] + np.arange(k + 1)) % len(vocabulary)
        drawn = rng.permutation(vocabulary)[places]
        others = np.where(drawn[:, :k] == tokens[:, None], drawn[:, k:], drawn[:, :k])
        rank = rng.integers(1, k + 2, size=CHUNK)
        inside = rank <= k
        others[rows[inside], rank[inside] - 1] = tokens[inside]
        sampled = np.where(inside, top[rows, np.minimum(rank, k) - 1], top[:, -1] - 1).astype(np.float32)
        child.rows = (np.column_stack([tokens, others]), np.column_stack([sampled, top]), rank)

    def read_text(self, tokenizer) -> None:
        """TEXT in ``tokenizer``'s ids. A child reads it on from a place of its own (drawn with its
        seed), round and round, as a model writes: whole characters, a character of several tokens
        in order. (Ids drawn one by one would make one token in eight a stray part of a character,
        a stream of broken text no model writes, and slow paths no real run takes.)"""
        ids = tokenizer.encode(TEXT, add_special_tokens=False)
        self.text = np.asarray(ids, dtype=np.int64)
        self.vocabulary = np.asarray(sorted(set(ids)), dtype=np.int64)
        self.starts = np.asarray([i for i in range(len(ids)) if not tokenizer.decode(ids[:i]).endswith("\ufffd")])

    def shutdown(self, timeout: float | None = None) -> None:
        self.requests.clear()


def with_paced_core(tokens_per_s: float, build: Callable[[], Any]):
    """``build()`` (an AsyncLLM's constructor) with a ``PacedCore`` for its engine core: no engine
    process is started, no weights are loaded. Its tokens are the engine's tokenizer's ids of TEXT."""
    from vllm.v1.engine.core_client import EngineCoreClient

    original = EngineCoreClient.__dict__["make_async_mp_client"]
    EngineCoreClient.make_async_mp_client = staticmethod(lambda *_, **__: PacedCore(tokens_per_s))
    try:
        engine = build()
    finally:
        EngineCoreClient.make_async_mp_client = original
    engine.engine_core.read_text(engine.tokenizer)
    return engine
