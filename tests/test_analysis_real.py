"""One real round trip: record a small run with the engine; its record must be complete and its
bundle must round-trip unchanged, and every analysis must agree with it."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go
import pytest

from playground import analysis as A
from playground.request import SampleRequest
from playground.run import Run
from tests.helpers import record_to_end

N, MAX_TOKENS, TOP_K = 4, 12, 3
PROMPT = "Write a short poem about the sea:"


@pytest.fixture(scope="module")
def real_run(host) -> Run:
    from playground.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(host)
    request = SampleRequest(prompt=PROMPT, n=N, seed=11, max_tokens=MAX_TOKENS, logprobs=TOP_K, output_kind="DELTA",
                            mode="wrapper", use_chat_template=False)
    return record_to_end(backend, request)


def test_the_record_is_complete(real_run):
    assert real_run.status == "finished" and real_run.n == N
    for s in real_run.samples:
        assert 0 < len(s.token_ids) <= MAX_TOKENS
        assert len(s.token_texts) == len(s.token_ids) == len(s.token_times) == len(s.logprobs)
    data = real_run.to_dict()
    assert data["bundle_version"] == 5 and {"request", "samples", "events", "engine", "status"} <= set(data)
    for s, written in zip(real_run.samples, data["samples"]):  # plain; the times are the events'
        assert (written["seed"], written["text"], written["token_ids"]) == (s.seed, s.text, s.token_ids)
        assert "token_times" not in written, written
    assert data["request"]["rendered_prompt"] == PROMPT and data["request"]["prompt_token_ids"]
    assert len(data["events"]) == len(real_run.events)
    assert all(isinstance(e, list) and len(e) in (2, 3) for e in data["events"])  # [t, outputs, facts]
    assert len(real_run.tokens_frame()) == sum(len(s.token_ids) for s in real_run.samples)
    assert len(real_run.events_frame()) == len(real_run.events)


def test_the_record_holds_the_engines_view_of_each_child(real_run):
    """Per child: when the engine queued it and how long it waited, prefilled and decoded, on the
    time axis of the arrivals; per event: the parent's id and the engine's request count."""
    for s in real_run.samples:
        assert s.queued_at is not None and s.queued_at >= -0.05, s  # queued as the run started
        assert min(s.queued_s, s.prefill_s, s.decode_s) >= 0
        first_token_at = s.queued_at + s.queued_s + s.prefill_s
        # The engine made the first token before the caller received it.
        assert first_token_at <= s.token_times[0] + 0.05, (first_token_at, s.token_times[0])
    assert {e.request_id for e in real_run.events} == {real_run.request["request_id"]}
    counts = [e.engine_requests for e in real_run.events]
    assert all(c is not None and 0 <= c <= N for c in counts), counts
    assert max(counts) == N, "alone on the engine, vLLM counts the run's n children"
    assert A.other_requests(real_run) == 0
    conditions = real_run.engine["conditions"]
    assert conditions["dtype"] in ("float32", "bfloat16") and conditions["vllm_version"]
    assert "VLLM_CPU_OMP_THREADS_BIND" in conditions["environment"]
    timeline = A.child_timeline_figure(real_run)
    assert [t.name for t in timeline.data][:3] == ["queued", "prefill", "decode"]


def test_a_bundle_round_trips_through_json_unchanged(real_run):
    text = real_run.to_json()
    again = Run.from_json(text)
    assert again == real_run
    assert again.to_json() == text


def test_diff_and_tree_agree_with_the_token_ids(real_run):
    samples = real_run.samples
    tokens = [s.token_ids for s in samples]
    first, similar = A.first_divergences(tokens), A.similarity_matrix(tokens)
    prefix = A.common_prefix(real_run)
    for i, j in itertools.combinations(range(N), 2):
        a, b = tokens[i], tokens[j]
        if first[i, j] < 0:
            assert a == b and similar[i, j] == 1.0
        else:
            k = int(first[i, j])
            assert k >= prefix and a[:k] == b[:k] and (k == min(len(a), len(b)) or a[k] != b[k])
    for s in samples:
        diff = A.diff_samples(real_run.samples[0], s)
        assert len(diff) == len(s.token_ids)
        assert all(label == "equal" for _, label in diff[:prefix])

    root = A.divergence_tree(real_run)
    assert sum(b.count for b in root.leaves()) == N
    for leaf in root.leaves():  # the path to a leaf spells its samples' token ids
        path, key = [], leaf
        branches = {b.key: b for b in root.walk()}
        while key is not None:
            path = key.token_ids + path
            key = branches.get(key.parent)
        assert all(samples[i].token_ids == path for i in leaf.samples)
    for b in root.walk():
        if b.parent is not None and not b.end:
            assert b.prob is not None and 0 < b.prob <= 1 and len(b.alternatives) >= TOP_K


def test_uncertainty_and_timing_cover_every_token(real_run):
    tokens = sum(len(s.token_ids) for s in real_run.samples)
    frame = A.uncertainty_frame(real_run)
    assert len(frame) == tokens and frame["prob"].notna().all()
    assert (frame["entropy_lb_bits"] >= 0).all() and (frame["topk_mass"] <= 1 + 1e-6).all()
    agreement = A.agreement_frame(real_run)
    assert (agreement["agreement"].iloc[:A.common_prefix(real_run)] == 1.0).all()
    timing = A.timing_frame(real_run)
    assert len(timing) == N and (timing["ttft"] > 0).all()
    assert (timing["total_time"] <= real_run.wall_time).all()
    assert len(A.itl_frame(real_run)) == tokens - N
    events = A.event_outputs_frame(real_run)
    assert events.groupby("index")["new_tokens"].sum().tolist() == [len(s.token_ids) for s in real_run.samples]
    summary = A.run_row(real_run).iloc[0]
    assert summary["tokens"] == tokens and summary["n"] == N and summary["output_kind"] == "DELTA"


def test_every_figure_builds_on_the_real_run(real_run):
    figures = [A.pairwise_heatmap, A.tree_figure, A.uncertainty_figure, A.agreement_figure,
               A.tokens_over_time_figure, A.itl_figure, A.ttft_figure, A.events_figure]
    for figure in figures:
        fig = figure(real_run)
        assert isinstance(fig, go.Figure) and fig.layout.height and fig.data, figure.__name__
    assert len(A.uncertainty_figure(real_run).data) == 2 * N
    assert len(A.tokens_over_time_figure(real_run).data) == N
    assert len(A.events_figure(real_run).data[1].x) == N  # every sample's finish is marked
