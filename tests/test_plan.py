"""The fan-out plan and the aggregation by output_kind, without an engine (milliseconds).

Modelled on vLLM's own tests of ParentRequest and its output collector
(tests/v1/engine/test_parallel_sampling.py, test_output_processor.py): outputs are built by hand
as the engine would hand them over, in orders a real engine cannot be made to produce on demand
(one child finishing long before the others, two pieces of one child queued before the consumer
reads), and the parent outputs are checked against the n > 1 contract.
"""

from __future__ import annotations

import pytest
from vllm import CompletionOutput, RequestOutput, SamplingParams
from vllm.sampling_params import RequestOutputKind

from playground.errors import InvalidRequest
from playground.request import MAX_SEED, check_seed
from playground.sampling import params as child_params
from playground.sampling import plan
from playground.sampling.aggregate import ParentAggregator

# --- the plan ------------------------------------------------------------------------------------


def test_children_are_named_and_seeded_as_vllm_does():
    run_plan = plan.make_plan("run-1", 3, 7, "wrapper")
    assert [(c.index, c.request_id, c.seed) for c in run_plan.children] == [(0, "0_run-1", 7), (1, "1_run-1", 8),
                                                                             (2, "2_run-1", 9)]
    assert (run_plan.parent_id, run_plan.mode, run_plan.seed, run_plan.n) == ("run-1", "wrapper", 7, 3)
    assert plan.make_plan("run-1", 3, 7, "same-seed").seeds == [7, 7, 7]
    assert plan.make_plan("run-1", 3, 7, "native").seeds == [7, 8, 9], "vLLM's own rule, for the record"
    drawn = plan.make_plan("run-1", 2, None, "wrapper")
    assert drawn.seed is not None and drawn.seeds == [drawn.seed, drawn.seed + 1], "the wrapper draws a blank seed"
    assert plan.make_plan("run-1", 2, None, "native").seeds == [None, None], "native leaves it blank, as vLLM"
    recorded = plan.make_plan("run-1", 2, None, "native", seed_native=True)
    assert recorded.seeds == [recorded.seed, recorded.seed + 1], "a recorded run is seeded in every mode"


def test_the_largest_seeds_fit_and_one_more_is_refused_with_the_range():
    top = MAX_SEED - 3
    assert plan.make_plan("p", 4, top, "wrapper").seeds[-1] == MAX_SEED
    with pytest.raises(InvalidRequest, match=r"largest base seed for n=4 is 9223372036854775804"):
        plan.make_plan("p", 4, top + 1, "wrapper")
    with pytest.raises(InvalidRequest, match=r"from 0 to 2\*\*63-1 \(9223372036854775807\), got -1"):
        check_seed(-1, 1)
    with pytest.raises(InvalidRequest, match="mode must be one of wrapper, native, same-seed"):
        plan.make_plan("p", 1, 1, "turbo")


def test_child_params_are_n1_copies_with_their_own_seed():
    parent = SamplingParams(n=3, seed=41, temperature=0.8, max_tokens=5, output_kind=RequestOutputKind.DELTA)
    pairs = child_params.children(parent, plan.make_plan("run-2", 3, 41, "wrapper"))
    assert [(c.request_id, p.n, p.seed, p.temperature) for c, p in pairs] == [
        ("0_run-2", 1, 41, 0.8), ("1_run-2", 1, 42, 0.8), ("2_run-2", 1, 43, 0.8)]
    assert parent.n == 3 and parent.seed == 41, "the parent's params are not changed"
    same = child_params.children(parent, plan.make_plan("run-3", 3, 41, "same-seed"))
    assert [p.seed for _, p in same] == [41, 41, 41], "the plan's seeds, not a second rule"


# --- the aggregator ------------------------------------------------------------------------------

def child(index: int, text: str, ids: list[int], finish: str | None = None) -> RequestOutput:
    """What the engine hands over for one child (index 0 to the engine: it has n = 1)."""
    completion = CompletionOutput(index=0, text=text, token_ids=list(ids), cumulative_logprob=None, logprobs=None,
                                  finish_reason=finish)
    return RequestOutput(request_id=f"{index}_parent", prompt="p", prompt_token_ids=[1], prompt_logprobs=None,
                         outputs=[completion], finished=finish is not None)


def view(output: RequestOutput | None) -> list[tuple[int, str, list[int], str | None]] | None:
    if output is None:
        return None
    return [(c.index, c.text, list(c.token_ids), c.finish_reason) for c in output.outputs]


def test_final_only_waits_for_the_last_child_and_gives_index_order():
    agg = ParentAggregator("parent", 3, RequestOutputKind.FINAL_ONLY)
    assert agg.add(2, child(2, "c", [3], "stop")) is True
    assert agg.pop() is None, "nothing before every child finished"
    agg.add(0, child(0, "a", [1], "length"))
    assert agg.pop() is None
    assert agg.add(1, child(1, "b", [2], "length")) is True
    last = agg.pop()
    assert view(last) == [(0, "a", [1], "length"), (1, "b", [2], "length"), (2, "c", [3], "stop")]
    assert last.finished and last.request_id == "parent"


def test_delta_concatenates_queued_pieces_of_one_child_and_keeps_arrival_order():
    agg = ParentAggregator("parent", 2, RequestOutputKind.DELTA)
    assert agg.add(1, child(1, "x", [9])) is False
    agg.add(0, child(0, "a", [1]))
    agg.add(1, child(1, "y", [8]))  # the consumer has not read: merged into child 1's piece
    first = agg.pop()
    assert view(first) == [(1, "xy", [9, 8], None), (0, "a", [1], None)]
    assert not first.finished and first.request_id == "parent"
    assert agg.pop() is None


def test_cumulative_keeps_the_newest_value_and_finished_is_set_once_at_the_end():
    agg = ParentAggregator("parent", 2, RequestOutputKind.CUMULATIVE)
    agg.add(0, child(0, "a", [1]))
    agg.add(0, child(0, "ab", [1, 2]))
    assert view(agg.pop()) == [(0, "ab", [1, 2], None)]
    agg.add(0, child(0, "abc", [1, 2, 3], "length"))  # child 0 finishes early: its output is not final
    early = agg.pop()
    assert view(early) == [(0, "abc", [1, 2, 3], "length")] and not early.finished
    agg.add(1, child(1, "z", [7], "stop"))
    last = agg.pop()
    assert view(last) == [(1, "z", [7], "stop")] and last.finished


def test_a_finished_child_is_never_returned_again():
    agg = ParentAggregator("parent", 2, RequestOutputKind.DELTA)
    agg.add(0, child(0, "a", [1], "stop"))
    agg.pop()
    assert agg.add(0, child(0, "", [], "abort")) is True, "an abort after a finish is ignored"
    assert agg.pop() is None
    assert agg.unfinished == {1}
