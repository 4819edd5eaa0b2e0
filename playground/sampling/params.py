"""A checked request as vLLM SamplingParams, and the children's params from the fan-out plan.

The checks a SamplingParams must pass before anything reaches an engine live here too, because
the samplers accept vLLM's own SamplingParams (their API is AsyncLLM's), not only SampleRequests.
"""

from __future__ import annotations

from copy import copy

from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind

from playground.sampling import plan
from playground.sampling.request import SampleRequest, check_context, check_greedy, check_n


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


def check(prompt_token_ids: list[int], params: SamplingParams, mode: str, max_n: int, max_model_len: int) -> None:
    """Checks that must pass before anything reaches the engine (InvalidRequest otherwise)."""
    plan.check_mode(mode)
    check_n(params.n, max_n)
    check_greedy(params.temperature, params.n)
    max_tokens = params.max_tokens if params.max_tokens is not None else 1
    check_context(len(prompt_token_ids), max_tokens, max_model_len)
    plan.check_seed(params.seed, params.n)


def children(parent_id: str, params: SamplingParams, mode: str) -> list[tuple[plan.Child, SamplingParams]]:
    """The plan's children, each with an n = 1 copy of the parent's params and its own seed.

    vLLM leaves the children of an unseeded parent unseeded; the wrapper draws a base seed
    instead, so every sample it returns can be replayed alone with seed + i.
    """
    seed = params.seed if params.seed is not None else plan.draw_seed()
    result = []
    for child in plan.plan(parent_id, params.n, seed, mode):
        child_params = copy(params)
        child_params.n = 1
        child_params.seed = child.seed
        result.append((child, child_params))
    return result
