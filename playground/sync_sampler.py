"""Parallel sampling over vLLM's synchronous V1 ``LLMEngine`` (add_request + step), and runs.

The async wrapper (sampler.py) has a generator per parent request; the synchronous engine has
none: the caller adds requests, then calls ``step()`` until nothing is left. So here the fan-out
is an ``add_request()`` that adds n children, and ``step()`` folds the children's outputs back
into parent outputs, by the same rules (fanout.py), so both front ends keep vLLM's n > 1 contract.

``SyncRunner`` puts a SampleRequest through it and records the same ``Run`` as the async path,
for the batch command and anything else scripted (the QA matrix).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from copy import copy
from dataclasses import dataclass, field
from typing import Any

from vllm import RequestOutput, SamplingParams, TokensPrompt
from vllm.v1.engine.exceptions import EngineDeadError

from playground import fanout, prompts
from playground.backend import Prepared, prepare
from playground.engine import describe_engine
from playground.errors import EngineUnavailable, InvalidRequest
from playground.request import Limits, SampleRequest
from playground.run import Run, RunRecorder, child_observation, observation_from_output
from playground.sampler import ChildObserver


@dataclass
class _Parent:
    """One parent request in flight: its aggregator, and the engine ids that belong to it."""

    aggregator: fanout.ParentAggregator
    engine_ids: list[str] = field(default_factory=list)  # children (wrapper) or the parent (native)
    on_child: ChildObserver | None = None


class SyncParallelSampler:
    """Our own n > 1 over an ``LLMEngine``, with vLLM's native path beside it for comparison.

    The rules, and why:
    - ``add_request()`` adds all n children before it returns, so no ``step()`` can run between
      them: vLLM's own fan-out adds its children back to back too, and the batch the children
      share decides their (seeded) results. (The engine core runs in its own process and may
      still start child 0 one step before the others arrive, in both modes alike.)
    - ``step()`` returns parent outputs only, one per parent per step at most, by output_kind
      (fanout.ParentAggregator). vLLM's native ``LLMEngine.step()`` returns one output per child,
      all carrying the parent's id; native mode is folded the same way, so a caller handles both
      modes alike and a side-by-side comparison sees the same shapes.
    - ``abort()`` aborts every child. The synchronous engine yields nothing for an aborted
      request, so the parent simply ends without a last output.
    - ``has_unfinished_requests()`` counts parents: the children are our business, not the caller's.

    As in vLLM, a CUMULATIVE output's token list is live (it keeps growing on later steps): copy
    what you keep (``observation_from_output`` does).
    """


    def __init__(self, llm_engine, max_n: int = 32):
        self.engine = llm_engine
        self.max_n = max_n
        self.max_model_len = llm_engine.vllm_config.model_config.max_model_len
        self._parents: dict[str, _Parent] = {}
        self._routes: dict[str, tuple[_Parent, int | None]] = {}  # engine id -> parent, child index

    def add_request(
        self,
        request_id: str,
        prompt: str | TokensPrompt,
        sampling_params: SamplingParams,
        mode: str = "wrapper",
        *,
        on_child: ChildObserver | None = None,
    ) -> None:
        """Add a parent request of n samples. Modes as in ParallelSampler.generate: "wrapper",
        "native" (n handed to vLLM), "same-seed" (one seed for all children, the old bug).

        ``on_child(index, output)`` sees each child's own output before it is merged (per-child
        facts such as num_cached_tokens). Native FINAL_ONLY with n > 1 has no per-child outputs.
        """
        # Tokenized once, before any child, as in the async wrapper (same ids on every path).
        tokens = prompts.tokenize(self.engine.tokenizer, prompt)
        fanout.validate(tokens["prompt_token_ids"], sampling_params, mode, self.max_n, self.max_model_len)
        if mode == "native":
            added = [(request_id, None, sampling_params)]
        else:
            added = [
                (fanout.child_request_id(index, request_id), index, params)
                for index, params in enumerate(fanout.child_params(sampling_params, mode))
            ]
        # Outputs are routed by engine id, so two running parents must not share one.
        if request_id in self._parents or any(engine_id in self._routes for engine_id, _, _ in added):
            raise InvalidRequest(f"request id {request_id!r} is already in use by a running request")
        aggregator = fanout.ParentAggregator(request_id, sampling_params.n, sampling_params.output_kind)
        parent = _Parent(aggregator, on_child=on_child)
        try:
            for engine_id, index, params in added:
                self.engine.add_request(engine_id, tokens, params)
                parent.engine_ids.append(engine_id)
                self._routes[engine_id] = (parent, index)
        except BaseException:
            self._forget(parent, abort=True)  # no child may run for a parent that was refused
            raise
        self._parents[request_id] = parent

    def step(self) -> list[RequestOutput]:
        """Run one engine step; return one merged output for each parent that advanced.

        Outputs of requests this sampler did not add pass through unchanged, after ours.
        """
        if not self.engine.has_unfinished_requests():
            return []
        advanced: dict[str, _Parent] = {}  # by parent id, in order of first output
        foreign = []
        for output in self.engine.step():
            route = self._routes.get(output.request_id)
            if route is None:
                foreign.append(output)
                continue
            parent, index = route
            for child_index, piece in _child_pieces(output, index):
                if parent.on_child is not None and len(output.outputs) == 1:
                    parent.on_child(child_index, piece)
                parent.aggregator.add(child_index, piece)
            advanced[parent.aggregator.parent_id] = parent
        merged = []
        for parent in advanced.values():
            output = parent.aggregator.pop()
            if output is not None:
                merged.append(output)
            if parent.aggregator.finished:
                self._forget(parent)
        return merged + foreign

    def abort(self, request_id: str) -> None:
        """Abort every child of ``request_id`` (nothing happens for an unknown or finished one)."""
        parent = self._parents.get(request_id)
        if parent is not None:
            self._forget(parent, abort=True)

    def has_unfinished_requests(self) -> bool:
        return bool(self._parents)

    def get_num_unfinished_requests(self) -> int:
        """Parents, not children (the engine's own count is n per parent)."""
        return len(self._parents)

    def _forget(self, parent: _Parent, abort: bool = False) -> None:
        self._parents.pop(parent.aggregator.parent_id, None)
        for engine_id in parent.engine_ids:
            self._routes.pop(engine_id, None)
        if abort and parent.engine_ids:
            # External ids: the engine maps each to its internal ids (all of a native parent's
            # children). Ids that already finished are ignored by the engine.
            try:
                self.engine.abort_request(list(parent.engine_ids))
            except EngineDeadError:
                pass  # a dead engine's requests went with it


def _child_pieces(output: RequestOutput, index: int | None) -> Iterator[tuple[int, RequestOutput]]:
    """Split an engine output into one output per child, with the child's index.

    A wrapper child's output holds its one sample (index 0 to the engine; ``index`` to us).
    A native output holds one sample per child, already indexed: one for streamed kinds, all n
    for FINAL_ONLY. Splitting lets one aggregator fold both modes by the same rules.
    """
    if index is not None:
        yield index, output
        return
    if len(output.outputs) == 1:
        yield output.outputs[0].index, output
        return
    for completion in output.outputs:
        piece = copy(output)
        piece.outputs = [completion]
        yield completion.index, piece


class SyncRunner:
    """Runs SampleRequests on an ``LLMEngine`` and records each as a ``Run``.

    It is the synchronous twin of ``backend.record()`` over the embedded backend: the same checks
    and seeds (``backend.prepare``), the same request header, the same RunRecorder and
    Observations, with time stamps from ``time.monotonic()``. So every view, analysis and export
    reads a batch run like a run from the browser.
    """

    def __init__(self, llm_engine, max_n: int = 32):
        self.engine = llm_engine
        self.sampler = SyncParallelSampler(llm_engine, max_n)
        self.tokenizer = llm_engine.tokenizer
        self._info = {**describe_engine(llm_engine), "front_end": "LLMEngine"}
        self.limits = Limits(
            max_n=max_n,
            max_model_len=self._info["max_model_len"],
            max_logprobs=self._info["max_logprobs"],
        )
        self._running: dict[str, RunRecorder] = {}  # by parent request id

    def info(self) -> dict[str, Any]:
        return {**self._info, "up": True}

    def render_prompt(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        return prompts.render(self.tokenizer, prompt, use_chat_template)

    def decode(self, token_ids: list[int]) -> str:
        return prompts.decode(self.tokenizer, token_ids)

    def submit(self, request: SampleRequest) -> Run:
        """Check ``request`` (InvalidRequest, before the engine sees anything), add it, and return
        its live Run; ``step()`` grows it. The request's blank seed is filled in, as in the UI."""
        prepared: Prepared = prepare(self, request)
        recorder = RunRecorder(prepared.record_header(), prepared.seeds, self.info(), self.decode)
        tokens = TokensPrompt(prompt_token_ids=prepared.prompt_token_ids, prompt=prepared.rendered_prompt)

        def on_child(index: int, output: RequestOutput) -> None:
            recorder.observe(child_observation(index, output))

        self.sampler.add_request(prepared.request_id, tokens, fanout.sampling_params(request), request.mode,
                                 on_child=on_child)
        self._running[prepared.request_id] = recorder
        return recorder.run

    def step(self) -> list[Run]:
        """One engine step for every run in flight; returns the runs that finished in it."""
        try:
            outputs = self.sampler.step()
        except EngineDeadError as e:
            for recorder in self._running.values():
                recorder.finish("error", "the vLLM engine core has died")
            self._running.clear()
            raise EngineUnavailable("the vLLM engine core has died; start the command again") from e
        t = time.monotonic()
        finished = []
        for output in outputs:
            recorder = self._running.get(output.request_id)
            if recorder is None:
                continue
            # Per-child facts came through on_child; the merged output carries one child's only.
            recorder.observe(observation_from_output(output, t, child_facts=False))
            if output.finished:
                finished.append(recorder.finish())
                del self._running[output.request_id]
        return finished

    def abort(self, request_id: str, reason: str = "stopped before the last sample finished") -> Run | None:
        """Abort one run in flight (every child in the engine) and mark it aborted."""
        recorder = self._running.pop(request_id, None)
        if recorder is None:
            return None
        try:
            self.sampler.abort(request_id)
        finally:
            recorder.finish("aborted", reason)
        return recorder.run

    def abort_all(self, reason: str = "stopped before the last sample finished") -> list[Run]:
        """Abort every run in flight; returns them, marked aborted."""
        return [self.abort(request_id, reason) for request_id in list(self._running)]

    @property
    def running(self) -> int:
        return len(self._running)

    def record(self, request: SampleRequest) -> Run:
        """Run one request to the end and return its finished Run.

        Whatever stops it early (Ctrl-C, an error) aborts its children and marks the Run, as the
        async ``record()`` does; the exception goes on to the caller.
        """
        run = self.submit(request)
        try:
            while not run.finished:
                self.step()
        except BaseException:
            self.abort(run.request["request_id"])
            raise
        return run

    def record_all(
        self, requests: Iterable[SampleRequest], max_in_flight: int = 1
    ) -> Iterator[tuple[int, Run | InvalidRequest]]:
        """Run many requests, at most ``max_in_flight`` parents at a time; yield
        ``(position, Run)`` as each finishes, or ``(position, InvalidRequest)`` for one refused.

        ``max_in_flight=1`` runs each request alone on an otherwise idle engine (the conditions of
        the UI and of replays, so seeded results reproduce). More in flight fills the engine's
        batch better, but the batch a request shares changes its seeded results (floating-point
        order; no batch-invariant mode on the CPU).

        Closing the iterator early, or an exception (Ctrl-C) inside it, aborts every run in flight.
        """
        pending = iter(enumerate(requests))
        position_of: dict[int, int] = {}  # id(run) -> position
        exhausted = False
        try:
            while True:
                while not exhausted and self.running < max_in_flight:
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    position, request = item
                    try:
                        run = self.submit(request)
                    except InvalidRequest as e:
                        yield position, e
                        continue
                    position_of[id(run)] = position
                if not self.running:
                    return
                for run in self.step():
                    yield position_of.pop(id(run)), run
        finally:
            if self.running:
                self.abort_all()

