"""The rules of parallel sampling, written once for both wrappers (AsyncLLM and LLMEngine).

This is vLLM's own design (``vllm/v1/engine/parallel_sampling.py``): a parent request with n > 1
becomes n child requests with n = 1, and the children's outputs are folded back into parent
outputs according to ``output_kind``. We rebuild it outside the engine so the playground can run
the same request through our fan-out and through vLLM's, and compare the two token for token.
"""

from __future__ import annotations

import secrets
from copy import copy

from vllm import RequestOutput, SamplingParams
from vllm.sampling_params import RequestOutputKind

from playground.errors import InvalidRequest
from playground.request import MAX_SEED, SampleRequest, check_context, check_greedy, check_n, child_seeds

MODES = ("wrapper", "native", "same-seed")


def child_request_id(index: int, parent_id: str) -> str:
    """The id vLLM gives child i of a parent, so engine logs read the same in both modes."""
    return f"{index}_{parent_id}"


def base_seed(params: SamplingParams) -> int:
    """The parent's seed, or a fresh random one.

    vLLM leaves the children of an unseeded parent unseeded. The wrapper draws a seed instead, so
    every sample it returns can be replayed alone with seed + i.
    """
    return params.seed if params.seed is not None else secrets.randbelow(2**31)


def child_params(params: SamplingParams, mode: str) -> list[SamplingParams]:
    """One n=1 copy of the parent's params per child, each with its own seed."""
    seeds = child_seeds(base_seed(params), params.n, mode)
    children = []
    for seed in seeds:
        child = copy(params)
        child.n = 1
        child.seed = seed
        children.append(child)
    return children


def validate(prompt_token_ids: list[int], params: SamplingParams, mode: str, max_n: int, max_model_len: int) -> None:
    """Checks that must pass before anything reaches the engine (InvalidRequest otherwise)."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    check_n(params.n, max_n)
    check_greedy(params.temperature, params.n)
    max_tokens = params.max_tokens if params.max_tokens is not None else 1
    check_context(len(prompt_token_ids), max_tokens, max_model_len)
    if params.seed is not None and not 0 <= params.seed <= MAX_SEED - params.n + 1:
        raise InvalidRequest(f"seed must be between 0 and 2**63-n, got {params.seed}")


def sampling_params(request: SampleRequest) -> SamplingParams:
    """The vLLM SamplingParams for a checked SampleRequest."""
    return SamplingParams(
        n=request.n,
        seed=request.seed,
        temperature=request.temperature,
        top_p=request.top_p,
        top_k=request.top_k,
        min_p=request.min_p,
        max_tokens=request.max_tokens,
        presence_penalty=request.presence_penalty,
        frequency_penalty=request.frequency_penalty,
        repetition_penalty=request.repetition_penalty,
        stop=list(request.stop) or None,
        logprobs=request.logprobs,
        ignore_eos=request.ignore_eos,
        output_kind=RequestOutputKind[request.output_kind],
    )


class ParentAggregator:
    """Folds the children's RequestOutputs into parent RequestOutputs, as vLLM does for n > 1.

    The rules, and why:
    - FINAL_ONLY: nothing until the last child finishes, then one output with all n samples in
      index order, because the caller asked for the finished result only.
    - DELTA and CUMULATIVE: outputs of the children that advanced are merged while the consumer
      has not taken them yet. DELTA concatenates pieces of the same index (nothing may be lost);
      CUMULATIVE keeps the newest value per index (it already holds everything before it). This is
      vLLM's own ``RequestOutput.add``, which its per-request output collector uses.
    - ``finished`` is true only once every child has finished, on the parent's last output.
    - A child that already finished is never returned again (an abort after a finish, say).
    """

    def __init__(self, parent_id: str, n: int, output_kind: RequestOutputKind):
        self.parent_id = parent_id
        self.n = n
        self.output_kind = output_kind
        self.unfinished = set(range(n))
        self._final: list = [None] * n
        self._pending: RequestOutput | None = None

    @property
    def finished(self) -> bool:
        return not self.unfinished

    def add(self, index: int, output: RequestOutput) -> None:
        """Take one child's output (its single CompletionOutput) for sample ``index``."""
        if index not in self.unfinished:
            return
        completion = output.outputs[0]
        completion.index = index
        if completion.finished():
            self.unfinished.discard(index)
        output.request_id = self.parent_id
        output.finished = self.finished
        if self.output_kind == RequestOutputKind.FINAL_ONLY:
            self._final[index] = completion
            if self.finished:
                output.outputs = list(self._final)
                self._pending = output
            return
        if self._pending is None:
            self._pending = output
        else:
            self._pending.add(output, aggregate=self.output_kind == RequestOutputKind.DELTA)

    def pop(self) -> RequestOutput | None:
        """The merged parent output waiting for the consumer, if any."""
        output, self._pending = self._pending, None
        return output
