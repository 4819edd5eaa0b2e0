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

TEXT = ("The lighthouse keeper wrote in his log every evening, as the wind came off the grey sea and the "
        "waves broke on the rocks below. It had been years since anyone came there, but that morning a "
        "small boat appeared on the horizon, and the children of the village told stories of it for a "
        "long time: of the old man, the lamp, the birds on the rail and the salt in the air. \"Look,\" "
        "she said, pointing through the quiet harbour at 42 ships. Él miró al mar; 海は静かだった.")


@dataclasses.dataclass
class _Child:
    """One engine request: what it asked for, and what it has been given."""

    request_id: str
    rng: np.random.Generator
    max_tokens: int
    logprobs: int | None
    queued: float
    made: int = 0


class PacedCore:
    """What AsyncLLM needs of its engine-core client, answered in its own process at a pace."""

    def __init__(self, tokens_per_s: float):
        self.tokens_per_s = float(tokens_per_s)
        self.token_ids = np.arange(1000, 2000, dtype=np.int64)  # until the engine's tokenizer gives TEXT's
        self.requests: dict[str, _Child] = {}
        self.resources = SimpleNamespace(engine_dead=False)  # AsyncLLM.errored reads it
        self.engine_ranks_managed = [0]
        self._added = asyncio.Event()
        self._next_step = 0.0

    async def get_supported_tasks_async(self) -> tuple[str, ...]:
        return ("generate",)

    async def add_request_async(self, request) -> None:
        from vllm.v1.engine import EngineCoreEvent, EngineCoreEventType

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
        from vllm.v1.engine import EngineCoreOutputs

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
        now = time.monotonic()
        outputs = [self._step(child, now) for child in list(self.requests.values())]
        return EngineCoreOutputs(outputs=outputs, timestamp=now)

    def _step(self, child: _Child, now: float):
        from vllm.v1.engine import EngineCoreEvent, EngineCoreEventType, EngineCoreOutput, FinishReason

        token = int(self.token_ids[child.rng.integers(len(self.token_ids))])
        events = None
        if child.made == 0:
            events = [EngineCoreEvent(EngineCoreEventType.QUEUED, child.queued),
                      EngineCoreEvent(EngineCoreEventType.SCHEDULED, now)]
        child.made += 1
        finished = child.made >= child.max_tokens
        if finished:
            del self.requests[child.request_id]
        return EngineCoreOutput(request_id=child.request_id, new_token_ids=[token], events=events,
                                new_logprobs=self._logprobs(child, token) if child.logprobs else None,
                                finish_reason=FinishReason.LENGTH if finished else None)

    def _logprobs(self, child: _Child, token: int):
        """One position's row as vLLM's sampler lays it out: the sampled token's logprob first,
        then the top-k (the sampled token among them at its rank, or not in them)."""
        from vllm.v1.outputs import LogprobsLists

        k = child.logprobs if child.logprobs > 0 else 1
        top = np.sort(np.log(child.rng.dirichlet(np.ones(k + 2))[:k]).astype(np.float32))[::-1]
        drawn = self.token_ids[child.rng.choice(len(self.token_ids), size=k + 1, replace=False)]
        others = drawn[drawn != token][:k]  # the sampled token is in the top-k at its rank only
        rank = int(child.rng.integers(1, k + 2))  # k + 1: outside the top-k
        ids = others.copy()
        if rank <= k:
            ids[rank - 1] = token
            sampled = top[rank - 1]
        else:
            sampled = np.float32(top[-1] - 1.0)
        return LogprobsLists(logprob_token_ids=np.array([[token, *ids]], dtype=np.int64),
                             logprobs=np.array([[sampled, *top]], dtype=np.float32),
                             sampled_token_ranks=np.array([rank], dtype=np.int64))

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
    engine.engine_core.token_ids = np.asarray(sorted(set(engine.tokenizer.encode(TEXT, add_special_tokens=False))),
                                              dtype=np.int64)
    return engine
