"""A request as vLLM SamplingParams, and each child's params from the run's plan.

The checks a SamplingParams must pass before anything reaches an engine live here too, because
the samplers' public API is AsyncLLM's and LLMEngine's: a caller may bring its own SamplingParams
rather than a SampleRequest (which was checked, planned and turned into params once, upstream).
"""

from __future__ import annotations

from copy import copy

from vllm import SamplingParams
from vllm.exceptions import VLLMClientError
from vllm.sampling_params import RequestOutputKind

from playground.errors import InvalidRequest
from playground.request import SampleRequest, check_context, check_greedy, check_n
from playground.sampling.plan import Child, Plan


def sampling_params(request: SampleRequest, detokenize: bool = True) -> SamplingParams:
    """The vLLM SamplingParams of a checked SampleRequest: its sampler settings (the schema's),
    n, the base seed and the output_kind. ``detokenize=False`` when the caller makes the texts
    itself (``backends.pieces.Spelling``)."""
    settings = request.sampler_settings()
    settings["stop"] = list(settings["stop"]) or None
    # Logprobs as flat arrays, not a dict and an object per alternative: vLLM's own answer to their
    # cost ("GC costs significantly smaller"); the record keeps them as arrays too.
    try:
        return SamplingParams(n=request.n, seed=request.seed, output_kind=RequestOutputKind[request.output_kind],
                              flat_logprobs=request.logprobs is not None, detokenize=detokenize, **settings)
    except VLLMClientError as e:  # a bound of vLLM's that the schema does not repeat: a refusal all the same
        raise InvalidRequest(f"vLLM refuses this request: {e}") from None


def check(prompt_token_ids: list[int], params: SamplingParams, mode: str, max_n: int, max_model_len: int) -> None:
    """Checks that must pass before anything reaches the engine (InvalidRequest otherwise), for a
    caller's own SamplingParams (the mode and the seed are checked by the plan, made next)."""
    check_n(params.n, max_n)
    check_greedy(params.temperature, params.n)
    max_tokens = params.max_tokens if params.max_tokens is not None else 1
    check_context(len(prompt_token_ids), max_tokens, max_model_len)


def children(params: SamplingParams, plan: Plan) -> list[tuple[Child, SamplingParams]]:
    """The plan's children, each with an n = 1 copy of the parent's params and its own seed."""
    result = []
    for child in plan.children:
        child_params = copy(params)
        child_params.n = 1
        child_params.seed = child.seed
        result.append((child, child_params))
    return result
