"""ParallelSampler: our own n > 1 over AsyncLLM, with vLLM's native path beside it for comparison.

``generate()`` has the contract of ``AsyncLLM.generate`` for n > 1 (see fanout.ParentAggregator),
so a caller cannot tell the wrapper from vLLM's ParentRequest except by the ``mode`` it chose.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from vllm import RequestOutput, SamplingParams, TokensPrompt

from playground import fanout, prompts

# Called with (index, child's RequestOutput) before it is merged: per-child facts such as
# num_cached_tokens that a merged parent output cannot carry for every child.
ChildObserver = Callable[[int, RequestOutput], None]


class ParallelSampler:
    def __init__(self, engine, max_n: int = 32):
        self.engine = engine
        self.max_n = max_n
        self.max_model_len = engine.vllm_config.model_config.max_model_len

    def tokenize(self, prompt: str | TokensPrompt) -> TokensPrompt:
        """Tokenize once, so the wrapper's children and vLLM's native path see the same ids.

        It also lets the wrapper add its children back to back: tokenizing between them would let
        the engine start child 0 alone and change the batch (and so, seeded results).
        """
        return prompts.tokenize(self.engine.tokenizer, prompt)

    async def generate(
        self,
        prompt: str | TokensPrompt,
        sampling_params: SamplingParams,
        request_id: str,
        mode: str = "wrapper",
        *,
        on_child: ChildObserver | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Sample n completions of ``prompt``; yields parent RequestOutputs by ``output_kind``.

        Modes: "wrapper" (our fan-out, child i seeded seed + i), "native" (n handed to vLLM),
        "same-seed" (our fan-out with one seed for all: the old identical-samples bug, on purpose).
        """
        tokens = self.tokenize(prompt)
        fanout.validate(tokens["prompt_token_ids"], sampling_params, mode, self.max_n, self.max_model_len)
        if mode == "native":
            async for output in self.engine.generate(tokens, sampling_params, request_id):
                yield output
            return

        aggregator = fanout.ParentAggregator(request_id, sampling_params.n, sampling_params.output_kind)
        ready = asyncio.Event()
        failure: list[BaseException] = []
        queues = []
        pumps: list[asyncio.Task] = []

        async def pump(index: int, queue) -> None:
            """Move one child's outputs into the aggregator as they arrive."""
            try:
                while True:
                    output = queue.get_nowait() or await queue.get()
                    if on_child is not None:
                        on_child(index, output)
                    aggregator.add(index, output)
                    ready.set()
                    if output.finished:
                        return
            except Exception as e:  # EngineDeadError and friends: the parent re-raises it
                failure.append(e)
                ready.set()

        try:
            # All children go in before the first output is read, as in vLLM's fan-out.
            for index, params in enumerate(fanout.child_params(sampling_params, mode)):
                child_id = fanout.child_request_id(index, request_id)
                queues.append(await self.engine.add_request(child_id, tokens, params))
            pumps = [asyncio.create_task(pump(i, q)) for i, q in enumerate(queues)]
            while True:
                await ready.wait()
                ready.clear()
                if failure:
                    raise failure[0]
                output = aggregator.pop()
                if output is not None:
                    yield output
                    if output.finished:
                        return
        finally:
            for task in pumps:
                task.cancel()
            if not aggregator.finished and queues:
                # The consumer stopped early, was cancelled, or the engine failed: abort every
                # child (by its internal id, which the engine knows) so none keeps running.
                await self.engine.abort([q.request_id for q in queues], internal=True)
