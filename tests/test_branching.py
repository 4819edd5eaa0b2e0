"""Branching from a token: a new run whose prompt is another run's rendered prompt plus a sample's
first k tokens (and, when asked, a forced token), sent as ids. Real engine, real server."""

from __future__ import annotations

import pytest

from playground import analysis as A
from playground.request import SampleRequest
from playground.run import Run
from tests.helpers import assert_refused_clearly, record_to_end

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def greedy(backend) -> Run:
    return record_to_end(backend, SampleRequest(PROMPT, n=1, temperature=0, max_tokens=12, logprobs=3,
                                                use_chat_template=False, ignore_eos=True))


def test_a_greedy_branch_continues_with_the_samples_own_next_token(backend, greedy):
    """At temperature 0 the model's choice after the prefix is the one it made the first time:
    a branch at token k (no forced token) starts with the sample's token k, and says where it
    came from; its prompt token ids stay the rendered prompt's."""
    tokens = greedy.samples[0].token_ids
    for k in (0, 3, 7):
        point = A.BranchPoint(greedy.request["request_id"], 0, k)
        request = SampleRequest(PROMPT, n=1, temperature=0, max_tokens=3, use_chat_template=False,
                                prefix_token_ids=A.branch_prefix(greedy, 0, k) or None)
        branch = record_to_end(backend, request, labels={"branch": point.to_dict()})
        assert branch.samples[0].token_ids[0] == tokens[k], k
        assert branch.request["prompt_token_ids"] == greedy.request["prompt_token_ids"]
        assert branch.request["prefix_token_ids"] == (tokens[:k] or None)
        assert A.branch_label(branch) == f"branched from #0 at token {k} of {greedy.request['request_id']}"
        assert A.branched_from(branch) == greedy.request["request_id"] and A.branched_from(greedy) is None


def test_a_forced_alternative_is_the_branchs_first_context_token(backend, greedy):
    second = A.alternatives(greedy, 0, 2)[1]  # the model's second choice at token 2
    prefix = A.branch_prefix(greedy, 0, 2, second.token_id)
    point = A.BranchPoint(greedy.request["request_id"], 0, 2, second.token_id, second.text)
    branch = record_to_end(backend, SampleRequest(PROMPT, n=4, seed=3, max_tokens=4, use_chat_template=False,
                                                  prefix_token_ids=prefix), labels={"branch": point.to_dict()})
    assert prefix[-1] == second.token_id and len(prefix) == 3
    assert all(s.token_ids and s.finish_reason for s in branch.samples)  # only the new tokens
    assert A.branch_label(branch).startswith(f"branched from #0 at token 2, forced {second.text!r}")
    from playground.ui.views import history_label  # History's list tells the branches of one point apart

    assert f"⎇ of {greedy.request['request_id']} #0@2 forced {second.text!r}" in history_label(branch)


@pytest.mark.parametrize("prefix, says", [
    ([1, 49152], "prefix_token_ids[1] is 49152, not a token of the model: its ids are 0 to 49151"),
    ([-1], "prefix_token_ids[0] is -1, not a token of the model"),
    ([5] * 2044, "the prompt has 5 tokens and the prefix 2044, together longer than the context of 2048 tokens"),
    ([5] * 2000, "max_tokens=64 is too big: the prompt has 5 tokens and the prefix 2000"),
    ("seven", "prefix_token_ids must be token ids (whole numbers) in a list, or separated by commas or spaces, "
              "got 'seven'"),
    (["seven"], "prefix_token_ids[0] must be a whole number, got 'seven'"),
])
def test_a_prefix_the_engine_cannot_take_is_refused_through_sample_and_the_next_request_works(
        client, prefix, says):
    with pytest.raises(Exception) as refused:
        client.predict(prompt=PROMPT, n=2, seed=1, max_tokens=64, use_chat_template=False, prefix_token_ids=prefix,
                       api_name="/sample")
    assert_refused_clearly(refused.value, says)
    run = Run.from_json(client.predict(prompt=PROMPT, n=2, seed=1, max_tokens=4, use_chat_template=False,
                                       prefix_token_ids=[330, 3358], api_name="/sample"))
    assert run.status == "finished" and run.request["prefix_token_ids"] == [330, 3358]



def test_the_point_is_read_from_the_run_on_screen_unless_that_run_is_the_tabs_run_or_its_branch():
    """Engine-free: which run the Branch tab reads a point from. Opened on run A, the tab keeps A
    while A or a branch of A is on screen (a second branch from the same point); a new run B on
    screen moves it to B, as Branch pressed then branches from the run a person sees."""
    from playground.ui.branch_tab import point_run
    from tests.test_report import make_run

    a, b = make_run([[1, 2]], "run-a"), make_run([[3, 4]], "run-b")
    branch_of_a = make_run([[5]], "run-c", branch={"run": "run-a", "sample": 0, "position": 1})
    assert point_run(None, None) is None and point_run(a, None) is a and point_run(None, b) is b
    assert point_run(a, a) is a and point_run(a, branch_of_a) is a
    assert point_run(a, b) is b  # not the run the tab was opened on: that one is no longer on screen


@pytest.mark.parametrize("output_kind, stop", [("DELTA", []), ("CUMULATIVE", []), ("DELTA", ["。"]),
                                               ("FINAL_ONLY", ["。"])])
def test_a_branch_from_inside_a_character_reads_from_that_character_on(backend, output_kind, stop):
    """A branch point inside a character (a CJK character is three bytes, often cut across
    tokens): the prompt the engine gets ends inside it. Each sample's text and pieces read from
    the character the prefix began, never the prompt's text before it, which vLLM's own
    detokenizer would put there (vLLM issue #48853): spelled from the token table without stop
    strings, and vLLM's text with the echo taken off with them."""
    table = backend.token_table
    prompt = "日本の首都は"
    word = backend.tokenizer.encode("東京です。", add_special_tokens=False)
    k = next(k for k in range(1, len(word)) if table.pending(word[:k]))  # inside the first character
    request = SampleRequest(prompt, n=4, seed=2, max_tokens=10, use_chat_template=False, output_kind=output_kind,
                            stop=stop, prefix_token_ids=word[:k])
    run = record_to_end(backend, request)
    before = backend.decode(word[:k]).rstrip("\ufffd")  # the prefix's whole characters
    for s in run.samples:
        whole = backend.decode(word[:k] + s.token_ids)[len(before):]
        assert s.text and prompt not in s.text, s.text
        if s.finish_reason == "stop" and stop:  # vLLM cut it at the stop string
            assert whole.startswith(s.text) and whole[len(s.text):].startswith(stop[0]), (s.text, whole)
        else:
            assert s.text == whole.removesuffix("\ufffd"), (s.text, whole)
        assert "".join(s.token_texts).startswith(s.text), s.token_texts
        assert not s.token_texts[0].startswith("\ufffd"), s.token_texts  # the first piece completes it
