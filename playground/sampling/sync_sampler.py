"""Parallel sampling over vLLM's synchronous V1 ``LLMEngine`` (add_request + step).

The async wrapper has a generator per parent request; the synchronous engine has none: the caller
adds requests, then calls ``step()`` until nothing is left. So here the fan-out is an
``add_request()`` that adds n children, and ``step()`` folds the children's outputs back into
parent outputs, by the same plan and aggregator as the async wrapper.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from copy import copy
from dataclasses import dataclass, field

from vllm import CompletionOutput, RequestOutput, SamplingParams, TokensPrompt
from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine.exceptions import EngineDeadError

from playground.errors import InvalidRequest
from playground.request import DEFAULT_MAX_N
from playground.sampling import aggregate, plan, prompts
from playground.sampling import params as child_params
from playground.sampling.admission import Gate
from playground.sampling.async_sampler import ChildObserver


@dataclass
class _Parent:
    """One parent request in flight: its aggregator, and the engine ids that belong to it."""

    aggregator: aggregate.ParentAggregator
    prompt: TokensPrompt
    engine_ids: list[str] = field(default_factory=list)  # children (wrapper) or the parent (native)
    on_child: ChildObserver | None = None
    # CUMULATIVE: index -> the sample's last completion, all an abort needs (DELTA and FINAL_ONLY
    # end an aborted sample empty). Kept after add(), which copied its live token list.
    last: dict[int, CompletionOutput] = field(default_factory=dict)


class SyncParallelSampler:
    """Our own n > 1 over an ``LLMEngine``, with vLLM's native path beside it for comparison.

    The rules, and why:
    - ``add_request()`` adds all n children before it returns, so no ``step()`` can run between
      them: vLLM's own fan-out adds its children back to back too, and the batch the children
      share decides their (seeded) results.
    - ``step()`` returns parent outputs only, one per parent per step at most, by output_kind.
      vLLM's native ``LLMEngine.step()`` returns one output per child, all carrying the parent's
      id; native mode is folded the same way, so a caller handles both modes alike.
    - ``abort()`` takes parent ids. LLMEngine itself yields nothing more for an aborted request;
      here the next ``step()`` ends the parent with one last output, finished, its unfinished
      samples marked "abort" with the tokens seen so far, as AsyncLLM's abort does. (A FINAL_ONLY
      child sends nothing before it ends, so its aborted sample comes back empty.)
    - ``has_unfinished_requests()`` counts parents: the children are our business, not the caller's.

    As in vLLM, a CUMULATIVE output's token list is live (it keeps growing on later steps): copy
    what you keep.
    """

    def __init__(self, llm_engine, max_n: int = DEFAULT_MAX_N):
        self.engine = llm_engine
        self.max_n = max_n
        self.max_model_len = llm_engine.vllm_config.model_config.max_model_len
        self._parents: dict[str, _Parent] = {}
        self._routes: dict[str, tuple[_Parent, int | None]] = {}  # engine id -> parent, child index
        self._aborted: list[_Parent] = []  # their last outputs go out with the next step()
        self.gate = Gate(llm_engine)

    def add_request(self, request_id: str, prompt: str | TokensPrompt, sampling_params: SamplingParams,
                    mode: str = "wrapper", *, on_child: ChildObserver | None = None) -> None:
        """Add a parent request of n samples. Modes as in ParallelSampler.generate.

        ``on_child(index, output)`` sees each child's own output before it is merged (per-child
        facts such as num_cached_tokens). Native FINAL_ONLY with n > 1 has no per-child outputs.
        """
        # Tokenized once, before any child, as in the async wrapper (same ids on every path).
        tokens = prompts.tokenize(self.engine.tokenizer, prompt)
        child_params.check(tokens["prompt_token_ids"], sampling_params, mode, self.max_n, self.max_model_len)
        run_plan = plan.make_plan(request_id, sampling_params.n, sampling_params.seed, mode)
        self.add_planned(tokens, sampling_params, run_plan, on_child=on_child)

    def add_planned(self, tokens: TokensPrompt, sampling_params: SamplingParams, run_plan: plan.Plan, *,
                    on_child: ChildObserver | None = None) -> None:
        """``add_request`` for a request already checked and planned (the runner's: one plan per
        run, made before anything reached the engine)."""
        request_id = run_plan.parent_id
        if run_plan.mode == "native":
            added = [(request_id, None, sampling_params)]
        else:
            added = [(child.request_id, child.index, params)
                     for child, params in child_params.children(sampling_params, run_plan)]
        # Outputs are routed by engine id, so two running parents must not share one.
        if request_id in self._parents or any(engine_id in self._routes for engine_id, _, _ in added):
            raise InvalidRequest(f"request id {request_id!r} is already in use by a running request")
        parent = _Parent(aggregate.ParentAggregator(request_id, run_plan.n, sampling_params.output_kind), tokens,
                         on_child=on_child)
        rendered = prompts.for_engine(self.engine, tokens)
        try:
            with self.gate.together_sync():  # a run's requests reach the scheduler in one step
                for engine_id, index, params in added:
                    # named before it is added: an add that fails after vLLM registered the request
                    # (a value its encoder cannot send) leaves it there unless it is aborted too
                    parent.engine_ids.append(engine_id)
                    self.engine.add_request(engine_id, dict(rendered), params)
                    self._routes[engine_id] = (parent, index)
        except BaseException:
            self._forget(parent, abort=True)  # no child may run for a parent that was refused
            raise
        self._parents[request_id] = parent

    def step(self) -> list[RequestOutput]:
        """Run one engine step; return one merged output for each parent that advanced. Outputs of
        requests this sampler did not add pass through unchanged, after ours.

        Right after ``abort()``, the next call returns the aborted parents' last outputs alone,
        without an engine step."""
        if self._aborted:
            aborted, self._aborted = self._aborted, []
            return self._merged({p.aggregator.parent_id: p for p in aborted})
        advanced: dict[str, _Parent] = {}  # by parent id, in order of first output
        foreign = []
        if self.engine.has_unfinished_requests():
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
                    if parent.aggregator.output_kind == RequestOutputKind.CUMULATIVE:
                        parent.last[child_index] = piece.outputs[0]  # vLLM makes a new one each step
                advanced[parent.aggregator.parent_id] = parent
        return self._merged(advanced) + foreign

    def _merged(self, advanced: dict[str, _Parent]) -> list[RequestOutput]:
        merged = []
        for parent in advanced.values():
            output = parent.aggregator.pop()
            if output is not None:
                merged.append(output)
            if parent.aggregator.finished:
                self._forget(parent)
        return merged

    def abort(self, request_ids: str | Iterable[str]) -> None:
        """Abort parents by id: every child leaves the engine now, and the next ``step()`` returns
        each parent's last output (see the class docstring). Unknown or finished ids are ignored."""
        for request_id in [request_ids] if isinstance(request_ids, str) else list(request_ids):
            parent = self._parents.get(request_id)
            if parent is None:
                continue
            self._forget(parent, abort=True)
            for index in sorted(parent.aggregator.unfinished):
                parent.aggregator.add(index, _abort_output(parent, index))
            self._aborted.append(parent)

    def has_unfinished_requests(self) -> bool:
        return bool(self._parents or self._aborted)

    def get_num_unfinished_requests(self) -> int:
        """Parents, not children (the engine's own count is n per parent)."""
        return len(self._parents) + len(self._aborted)

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


def _abort_output(parent: _Parent, index: int) -> RequestOutput:
    """The output AsyncLLM would give an aborted child: no new tokens for DELTA, everything so far
    for CUMULATIVE (FINAL_ONLY has sent nothing), finish_reason "abort"."""
    last = parent.last.get(index)
    text, ids = (last.text, last.token_ids) if last is not None else ("", [])
    completion = CompletionOutput(index=index, text=text, token_ids=list(ids), cumulative_logprob=None,
                                  logprobs=None, finish_reason="abort")
    return RequestOutput(request_id=parent.aggregator.parent_id, prompt=parent.prompt.get("prompt"),
                         prompt_token_ids=parent.prompt["prompt_token_ids"], prompt_logprobs=None,
                         outputs=[completion], finished=True)


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
