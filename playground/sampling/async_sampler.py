"""ParallelSampler: our own n > 1 over AsyncLLM, with vLLM's native path beside it for comparison.

``generate()`` and ``abort()`` have the contract of ``AsyncLLM.generate`` and ``AsyncLLM.abort``
for n > 1 (see aggregate.ParentAggregator), so a caller cannot tell the wrapper from vLLM's
ParentRequest except by the ``mode`` it chose. In both modes a run's children are added through
the engine's gate (admission.py), so the engine admits them in one step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable

from vllm import RequestOutput, SamplingParams, TokensPrompt
from vllm.v1.engine.exceptions import EngineDeadError

from playground.request import DEFAULT_MAX_N
from playground.sampling import aggregate, plan, prompts
from playground.sampling import params as child_params
from playground.sampling.admission import Gate

# Called with (index, child's RequestOutput) before it is merged: per-child facts such as
# num_cached_tokens that a merged parent output cannot carry for every child.
ChildObserver = Callable[[int, RequestOutput], None]


class Arrivals:
    """Which children have an output waiting, and one event for all of them.

    vLLM hands each request's outputs to a collector of its own and wakes one task per collector;
    following n children with n tasks costs n task switches per engine step (256 at n=256). So
    each child's collector, as it receives an output, also notes its child here and sets one
    event, and one task reads every child that has something.
    """

    def __init__(self):
        self.ready = asyncio.Event()
        self.indices: list[int] = []

    def watch(self, queue, index: int) -> None:
        put = queue.put

        def noted(output) -> None:
            put(output)
            self.indices.append(index)
            self.ready.set()

        queue.put = noted  # the engine's output handler calls the collector's put

    async def next(self) -> list[int]:
        """The children with an output waiting since the last call, each once, in arrival order."""
        await self.ready.wait()
        self.ready.clear()
        indices, self.indices = self.indices, []
        return list(dict.fromkeys(indices))


class ParallelSampler:
    """One per engine: it knows which children belong to which running parent, so ``abort()``
    can take a parent's id, as AsyncLLM's does."""

    def __init__(self, engine, max_n: int = DEFAULT_MAX_N):
        self.engine = engine
        self.max_n = max_n
        self.max_model_len = engine.vllm_config.model_config.max_model_len
        self._children: dict[str, list[str]] = {}  # running parent id -> its children's internal ids
        self._aborting: set[str] = set()  # running parents asked to abort while children were being added
        self.gate = Gate(engine)  # a run's children reach the scheduler in one step

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
        vLLM leaves the children of an unseeded parent unseeded; the wrapper draws a base seed
        instead, so every sample it returns can be run again alone with seed + i.
        """
        tokens = self.tokenize(prompt)
        child_params.check(tokens["prompt_token_ids"], sampling_params, mode, self.max_n, self.max_model_len)
        run_plan = plan.make_plan(request_id, sampling_params.n, sampling_params.seed, mode)
        async for output in self.sample(tokens, sampling_params, run_plan, on_child=on_child):
            yield output

    async def sample(self, tokens: TokensPrompt, sampling_params: SamplingParams, run_plan: plan.Plan, *,
                     on_child: ChildObserver | None = None) -> AsyncIterator[RequestOutput]:
        """``generate`` for a request already checked and planned (the backends': one plan per
        run, made before anything reached the engine): no check, no second plan."""
        rendered = prompts.for_engine(self.engine, tokens)
        if run_plan.mode == "native":
            async for output in self._native(rendered, sampling_params, run_plan.parent_id):
                yield output
            return
        async for output in self._fan_out(rendered, sampling_params, run_plan, on_child):
            yield output

    async def _native(self, rendered, sampling_params: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]:
        """vLLM's own fan-out (``AsyncLLM.add_request`` with n, its ParentRequest) read as
        ``AsyncLLM.generate`` reads it, its children added through the gate as the wrapper's are."""
        queue = None
        try:
            async with self.gate.together():
                queue = await self._add(request_id, rendered, sampling_params)
            finished = False
            while not finished:
                output = queue.get_nowait() or await queue.get()  # raises what vLLM put there (EngineDeadError)
                finished = output.finished
                yield output
        except (asyncio.CancelledError, GeneratorExit):
            if queue is not None:  # the consumer stopped early: the children go, as generate's do
                await self.engine.abort(queue.request_id, internal=True)
            raise

    async def _add(self, request_id: str, rendered, params: SamplingParams):
        """``AsyncLLM.add_request``, and when it fails after vLLM has registered the request (a value
        its encoder cannot send to the engine core, e.g. an int past 64 bits), the request aborted
        by its id: vLLM keeps it otherwise, counted unfinished for good."""
        try:
            return await self.engine.add_request(request_id, dict(rendered), params)
        except EngineDeadError:
            raise
        except Exception:
            await self.engine.abort([request_id])
            raise

    async def _fan_out(self, rendered, sampling_params, run_plan: plan.Plan, on_child) -> AsyncIterator[RequestOutput]:
        request_id = run_plan.parent_id
        aggregator = aggregate.ParentAggregator(request_id, run_plan.n, sampling_params.output_kind)
        arrived = Arrivals()
        queues = []
        engine_dead = False
        try:
            # All children go in before the first output is read, as in vLLM's fan-out.
            self._children[request_id] = []
            async with self.gate.together():
                for index, (child, params) in enumerate(child_params.children(sampling_params, run_plan)):
                    queues.append(queue := await self._add(child.request_id, rendered, params))
                    arrived.watch(queue, index)
                    self._children[request_id].append(queue.request_id)
                    if request_id in self._aborting:  # an abort came between two adds: this child goes too
                        await self.engine.abort([queue.request_id], internal=True)
            while True:
                for index in await arrived.next():
                    output = queues[index].get_nowait()  # raises what vLLM put there (EngineDeadError)
                    if output is None:
                        continue
                    if on_child is not None:
                        on_child(index, output)
                    aggregator.add(index, output)  # before its flag becomes the parent's
                output = aggregator.pop()
                if output is not None:
                    yield output
                    if output.finished:
                        return
        except EngineDeadError:
            engine_dead = True  # its requests died with it; vLLM sends no abort then either
            raise
        finally:
            self._children.pop(request_id, None)
            self._aborting.discard(request_id)
            if not aggregator.finished and queues and not engine_dead:
                # The consumer stopped early, was cancelled, or a child failed: abort every child
                # (by its internal id, which the engine knows) so none keeps running.
                await self.engine.abort([q.request_id for q in queues], internal=True)

    async def abort(self, request_ids: str | Iterable[str]) -> None:
        """Abort parents by the ids given to ``generate()``, as ``AsyncLLM.abort`` does: each
        aborted stream ends normally, its unfinished samples with finish_reason "abort" and the
        tokens they had. Unknown or finished ids are ignored; native parents go to the engine."""
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        self._aborting.update(parent for parent in ids if parent in self._children)
        children = [child for parent in ids for child in self._children.get(parent, [])]
        native = [parent for parent in ids if parent not in self._children]
        if children:
            await self.engine.abort(children, internal=True)
        if native:
            await self.engine.abort(native)
