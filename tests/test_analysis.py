"""The analysis package on hand-built runs whose answers are known by construction."""

from __future__ import annotations

import math
import random
import re

import pandas as pd
import plotly.graph_objects as go
import pytest

from playground import analysis as A
from playground.analysis.tree import LABEL_WIDTH, fold
from playground.run import Event, EventOutput, Run, Sample, TokenLogprob

# A toy vocabulary: token id -> decoded piece. 7 and 8 are the two halves of 'é' (0xC3 0xA9):
# the first decodes to '' (it ends inside the character), the second carries it.
VOCAB = {1: "The", 2: " sea", 3: " is", 4: " calm", 5: "\n", 6: "\t", 7: "", 8: "é", 9: " <b>&", 10: ' "it\'s"'}


def make_run(seqs, kind="DELTA", logprobs=None, finished=None, status="finished", cached=None, step=0.1):
    """A Run as the recorder would leave it: step k (at t = step*(k+1)) delivers token k of every
    sample that has one; a sample finishes with its last token (an empty one, in the first event).
    ``finished`` lists the samples that finished (default: all); ``logprobs`` maps index -> list."""
    finished = set(range(len(seqs))) if finished is None else set(finished)
    samples = []
    for i, ids in enumerate(seqs):
        samples.append(Sample(
            index=i, seed=100 + i, text="".join(VOCAB.get(t, f"w{t} ") for t in ids), token_ids=list(ids),
            token_texts=[VOCAB.get(t, f"w{t} ") for t in ids],
            token_times=[step * (k + 1) for k in range(len(ids))],
            logprobs=(logprobs or {}).get(i), finish_reason="length" if i in finished else None,
            num_cached_tokens=(cached or {}).get(i),
        ))
    steps = max((len(s) for s in seqs), default=0)
    events = []
    for k in range(max(steps, 1)):
        outputs = []
        for s in samples:
            ids = s.token_ids
            if k < len(ids) or (k == 0 and not ids):
                last = k >= len(ids) - 1
                carried = ids[k:k + 1] if kind == "DELTA" else ids[:k + 1]
                outputs.append(EventOutput(s.index, "".join(VOCAB.get(t, "") for t in carried), carried,
                                           s.finish_reason if last else None))
        events.append(Event(step * (k + 1), False, outputs))
    if kind == "FINAL_ONLY":
        events = [Event(step * max(steps, 1), True, [
            EventOutput(s.index, s.text, list(s.token_ids), s.finish_reason) for s in samples])]
        for s in samples:
            s.token_times = [step * max(steps, 1)] * len(s.token_ids)
    elif status != "running":
        events[-1].finished = True
    return Run(request={"n": len(seqs), "mode": "wrapper", "output_kind": kind, "seed": 100,
                        "request_id": "run-test", "num_prompt_tokens": 5},
               samples=samples, events=events, status=status,
               wall_time=None if status == "running" else step * max(steps, 1) + 0.05)


def lp(token_id, probs, rank=None):
    """A TokenLogprob whose top list is ``probs`` {token id: p} in rank order."""
    top = [(t, math.log(p), VOCAB.get(t, f"w{t}")) for t, p in probs.items()]
    chosen = dict(probs).get(token_id)
    return TokenLogprob(token_id, math.log(chosen) if chosen else None,
                        rank if rank is not None else list(probs).index(token_id) + 1, VOCAB.get(token_id), top)


# ---- tokens -------------------------------------------------------------------------------------

def test_visible_draws_whitespace_partial_characters_and_controls():
    assert A.visible(" a\tb\nc") == "·a→b↵\nc"
    assert A.visible(" a\tb\nc", multiline=False) == "·a→b↵c"
    assert A.visible("") == A.PARTIAL and A.PARTIAL != ""
    assert A.visible("\x00") not in ("\x00", "")
    assert A.visible("é🙂") == "é🙂"


def test_pieces_fill_a_record_without_token_texts():
    run = make_run([[1, 2, 3]])
    run.samples[0].token_texts = ["The"]  # e.g. caught mid-event, or no decoder
    got = A.pieces(run.samples[0])
    assert len(got) == 3 and got[0] == "The" and all(got[1:])


# ---- diff ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    ([1, 2, 3], [1, 2, 3], None),          # identical
    ([1, 2, 3], [4, 2, 3], 0),             # at position 0
    ([1, 2, 3], [1, 2, 4], 2),             # at the last token
    ([1, 2], [1, 2, 3, 4], 2),             # a prefix: where the shorter ends
    ([1, 2, 3, 4], [1, 2], 2),
    ([], [], None),                         # two empty completions
    ([], [1], 0),
])
def test_first_divergence(a, b, expected):
    assert A.first_divergence(a, b) == expected


def test_common_prefix_and_identical_groups():
    assert A.common_prefix(make_run([[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 5]])) == 2
    assert A.common_prefix(make_run([[1, 2], [3, 2]])) == 0
    assert A.common_prefix(make_run([[1, 2, 3]])) == 3  # n=1: the whole sample
    assert A.common_prefix(make_run([[], [1]])) == 0
    said = {seqs: A.shared_prefix_sentence(make_run([list(s) for s in seqs]))
            for seqs in (((1, 2, 5), (1, 2, 3, 9)), ((1, 2), (3, 2)), ((1, 2, 3),), ((7,), (7,)), ((1, 2), (1, 3)))}
    assert list(said.values()) == ["All 2 samples share their first 2 tokens.",
                                   "The 2 samples differ from their first token.", "One sample, of 3 tokens.",
                                   "All 2 samples are identical (1 token).",
                                   "All 2 samples share their first token."]
    # A run stopped or failed before some samples had a token: said, not read as parting at token 0.
    assert [A.shared_prefix_sentence(make_run(seqs)) for seqs in (
        [[1, 2, 3], [], [1, 2, 9]], [[4], [], []], [[], []], [[1, 2], [3], []])] == [
        "1 of the 3 samples has no tokens. The other 2 share their first 2 tokens.",
        "2 of the 3 samples have no tokens. The other has 1 token.", "None of the 2 samples has a token.",
        "1 of the 3 samples has no tokens. The other 2 differ from their first token."]
    # Of more than two, one that begins otherwise is enough: said so, not as if no two began alike.
    assert A.shared_prefix_sentence(make_run([[1, 2], [1, 3], [4, 2]])) == (
        "The 3 samples share no beginning: not all of them start with the same token.")
    assert A.identical_groups(make_run([[1, 2], [3], [1, 2], [3], [4]])) == [[0, 2], [1, 3]]
    assert A.identical_groups(make_run([[1], [2]])) == []
    assert A.identical_groups(make_run([[], []])) == [[0, 1]]


def test_pairwise_first_divergence_and_similarity_known_pairs():
    tokens = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4], []]
    first, similar = A.first_divergences(tokens), A.similarity_matrix(tokens)
    assert first[0, 1] == first[1, 0] == 3
    assert similar[0, 1] == pytest.approx(0.75)  # 2*3 matches / 8 tokens
    assert first[0, 2] == -1 and similar[0, 2] == 1.0  # identical
    assert first[0, 3] == 0 and similar[0, 3] == 0.0
    assert A.first_divergences([[1, 2]]).shape == (1, 1)  # n=1: no pairs


def test_diff_samples_labels_each_token():
    run = make_run([[1, 2, 3, 4], [1, 2, 9, 4, 5]])
    pairs = A.diff_samples(run.samples[0], run.samples[1])
    assert [label for _, label in pairs] == ["equal", "equal", "replace", "equal", "insert"]
    assert [text for text, _ in pairs] == ["The", "·sea", "·<b>&", "·calm", "↵\n"]
    assert [label for _, label in A.diff_samples(run.samples[0], run.samples[0])] == ["equal"] * 4


def test_diff_samples_can_show_deleted_reference_tokens():
    run = make_run([[1, 2, 3], [1, 3]])
    ref, sample = run.samples
    assert [label for _, label in A.diff_samples(ref, sample)] == ["equal", "equal"]
    assert A.diff_samples(ref, sample, deleted=True) == [("The", "equal"), ("·sea", "delete"), ("·is", "equal")]
    assert A.diff_samples(*make_run([[1], []]).samples) == []  # an empty completion against a reference


def test_diff_html_escapes_and_boxes_every_token():
    run = make_run([[1, 9], [1, 9, 5]])
    html = A.diff_html(A.diff_samples(*run.samples))
    assert "<b>" not in html and "&lt;b&gt;&amp;" in html
    assert html.count("<span") == 3 and "tok-insert" in html and "tok-equal" in html
    assert A.diff_html([]).startswith("<div")
    # the key is drawn as the tokens are, and the labels differ by more than colour (solid, dashed)
    inserted = re.search(r'class="tok tok-insert"[^>]*style="([^"]*)"', html).group(1)
    legend = A.diff_legend()
    assert f'style="{inserted}">inserted</span>' in legend and "solid" in inserted
    assert "dashed" in re.search(r'tok-replace" style="([^"]*)"', legend).group(1)


def test_pairwise_heatmap_is_symmetric_and_labelled_with_divergence():
    fig = A.pairwise_heatmap(make_run([[1, 2, 3], [1, 2, 4], [1, 2, 3]]))
    (heat,) = fig.data
    z = [list(r) for r in heat.z]
    assert len(z) == 3 and all(z[k][k] == 1.0 for k in range(3))
    assert all(z[a][b] == z[b][a] for a in range(3) for b in range(3))
    assert heat.text[0][1] == "2" and heat.text[0][2] == "=" and heat.text[2][0] == "="
    assert heat.customdata[1][0] == 2 and heat.customdata[0][2] == -1  # the hover's first divergence
    assert "first divergence at token %{customdata}" in heat.hovertemplate
    assert fig.layout.height
    alone = A.pairwise_heatmap(make_run([[1, 2, 3]]))  # n=1: a sentence, not a square of one colour
    assert not alone.data and "no pair to compare" in alone.layout.annotations[0].text


def test_the_pairwise_heatmap_of_a_large_run_draws_its_first_samples_and_says_so():
    n = A.MAX_HEATMAP + 4
    fig = A.pairwise_heatmap(make_run([[1, 2, k % 7] for k in range(n)]))
    (heat,) = fig.data
    assert len(heat.z) == len(heat.y) == A.MAX_HEATMAP and heat.text is None  # no cell text this large
    assert heat.y[-1] == f"sample {A.MAX_HEATMAP - 1}"
    assert f"of the first {A.MAX_HEATMAP} samples (of {n})" in fig.layout.title.text


# ---- tree ---------------------------------------------------------------------------------------

def branch_by_tokens(root, token_ids):
    return next(b for b in root.walk() if b.token_ids == token_ids)


def test_tree_collapses_chains_and_counts_samples():
    root = A.divergence_tree(make_run([[1, 2, 3, 4], [1, 2, 3, 5], [1, 6], [1, 2, 3, 4]]))
    assert [c.token_ids for c in root.children] == [[1]]  # shared first token
    assert branch_by_tokens(root, [1]).count == 4
    assert branch_by_tokens(root, [2, 3]).samples == [0, 1, 3]  # a collapsed chain
    assert branch_by_tokens(root, [4]).samples == [0, 3]
    assert branch_by_tokens(root, [5]).samples == [1] and branch_by_tokens(root, [6]).samples == [2]
    assert branch_by_tokens(root, [2, 3]).start == 1 and branch_by_tokens(root, [4]).start == 3
    assert sorted(b.count for b in root.leaves()) == [1, 1, 2]
    assert sum(b.count for b in root.leaves()) == 4


def test_tree_divergence_at_position_0_and_identical_samples():
    root = A.divergence_tree(make_run([[1, 2], [3, 4], [5, 6]]))
    assert [c.token_ids for c in root.children] == [[1, 2], [3, 4], [5, 6]]
    root = A.divergence_tree(make_run([[1, 2, 3]] * 3))
    assert len(root.leaves()) == 1 and root.leaves()[0].count == 3 and root.leaves()[0].token_ids == [1, 2, 3]


def test_tree_marks_samples_that_stop_early_and_empty_completions():
    root = A.divergence_tree(make_run([[1, 2], [1, 2, 3], []]))
    ends = [b for b in root.walk() if b.end]
    assert [(e.samples, e.start) for e in ends] == [([2], 0), ([0], 2)]
    assert sum(b.count for b in root.leaves()) == 3
    root = A.divergence_tree(make_run([[], []]))
    assert root.leaves() == [root] and root.count == 2


def test_tree_n1_is_one_branch():
    root = A.divergence_tree(make_run([[1, 2, 3, 4]]))
    assert len(root.children) == 1 and root.children[0].token_ids == [1, 2, 3, 4]
    assert root.children[0].text == "The sea is calm"


def test_tree_carries_branch_probability_and_alternatives():
    logprobs = {
        0: [lp(1, {1: 0.9, 2: 0.1}), lp(2, {2: 0.6, 3: 0.3})],
        1: [lp(1, {1: 0.9, 2: 0.1}), lp(3, {2: 0.6, 3: 0.3})],
    }
    root = A.divergence_tree(make_run([[1, 2], [1, 3]], logprobs=logprobs))
    assert branch_by_tokens(root, [1]).prob == pytest.approx(0.9)
    b2, b3 = branch_by_tokens(root, [2]), branch_by_tokens(root, [3])
    assert b2.prob == pytest.approx(0.6) and b3.prob == pytest.approx(0.3)
    assert [t for t, _ in b3.alternatives] == ["·sea", "·is"]
    assert [p for _, p in b3.alternatives] == pytest.approx([0.6, 0.3])
    assert A.divergence_tree(make_run([[1, 2], [1, 3]])).children[0].prob is None  # no logprobs
    # Folded, the rare branches' box is as likely as any of their tokens, not drawn as certain.
    logprobs[2] = [lp(1, {1: 0.9, 2: 0.1}), lp(4, {2: 0.6, 4: 0.05})]
    logprobs[3] = [lp(1, {1: 0.9, 2: 0.1}), lp(2, {2: 0.6, 3: 0.3})]
    folded = fold(A.divergence_tree(make_run([[1, 2], [1, 3], [1, 4], [1, 2]], logprobs=logprobs)), 2)
    others = next(b for b in folded.walk() if b.others)
    assert others.others == 2 and others.prob == pytest.approx(0.3 + 0.05)


def test_tree_figure_traces_counts_and_truncated_labels():
    long = list(range(100, 140))  # 40 tokens "w100 w101 ..."
    run = make_run([long, long[:20] + [5], [1]])
    fig = A.tree_figure(run)
    (icicle,) = fig.data
    branches = list(A.divergence_tree(run).walk())
    assert list(icicle.ids) == [b.key for b in branches] and list(icicle.values) == [b.count for b in branches]
    assert icicle.values[0] == 3 and icicle.branchvalues == "total"
    assert all(len(label) <= LABEL_WIDTH for label in icicle.labels)
    assert any("w139" in h for h in icicle.hovertext)  # the full text is in the hover
    leaves = [b for b in branches if not b.children]
    assert len(leaves) == 3 and sum(b.count for b in leaves) == 3
    assert icicle.marker.colorscale is None  # no logprobs: no probability colours
    assert fig.layout.height


def test_tree_labels_escape_markup_but_show_quotes_as_they_are():
    (icicle,) = A.tree_figure(make_run([[1, 9, 10], [1, 2]])).data
    label = next(label for label in icicle.labels if "b&gt;" in label)
    assert "<b>" not in label and "&lt;b&gt;&amp;" in label  # a sample's markup is text
    assert "\"it's\"" in label and "&quot;" not in label and "&#x27;" not in label  # plotly shows entities as written


def test_tree_figure_stays_sized_for_32_samples():
    rng = random.Random(0)
    seqs = [[1, 2] + [rng.randrange(10, 14) for _ in range(12)] for _ in range(32)]
    fig = A.tree_figure(make_run(seqs))
    leaves = A.divergence_tree(make_run(seqs)).leaves()
    assert sum(b.count for b in leaves) == 32
    assert fig.layout.height >= 28 * len(leaves)


# ---- uncertainty --------------------------------------------------------------------------------

def test_token_entropy_known_values_in_bits():
    entropy, mass, residual = A.token_entropy(lp(1, {1: 0.5, 2: 0.25}))
    assert mass == pytest.approx(0.75) and residual == pytest.approx(0.25)
    # listed: 0.5 log2 2 + 0.25 log2 4 = 1 bit; the residual 0.25 in tokens of p <= 0.25: >= 0.25 log2 4
    assert entropy == pytest.approx(1.0 + 0.5)
    entropy, _, residual = A.token_entropy(lp(1, {1: 1.0}))
    assert entropy == pytest.approx(0.0) and residual == pytest.approx(0.0)
    # A small residual below p_k counts as at least one outcome of its own mass: r log2(1/r).
    entropy, _, residual = A.token_entropy(lp(1, {1: 0.6, 2: 0.3}))
    assert residual == pytest.approx(0.1)
    assert entropy == pytest.approx(-(0.6 * math.log2(0.6) + 0.3 * math.log2(0.3)) + 0.1 * math.log2(10))


def test_token_entropy_never_exceeds_the_true_entropy_and_beats_both_older_bounds():
    rng = random.Random(1)
    for _ in range(300):
        weights = [rng.random() ** 4 for _ in range(30)]
        probs = sorted((w / sum(weights) for w in weights), reverse=True)
        true_entropy = -sum(p * math.log2(p) for p in probs)
        k = rng.randrange(0, 6)
        chosen = rng.randrange(30)  # maybe far below the top-k, as vLLM may list it
        listed = {t: probs[t] for t in range(k)}
        listed.setdefault(chosen, probs[chosen])
        bound, _, residual = A.token_entropy(lp(chosen, listed, rank=chosen + 1))
        assert bound <= true_entropy + 1e-9
        exact_part = -sum(p * math.log2(p) for p in listed.values())
        assert bound >= exact_part - 1e-9
        if residual > 1e-9:  # the rest as one outcome (the wall's old bound) is never tighter
            assert bound >= exact_part + residual * -math.log2(residual) - 1e-9


def test_uncertainty_frame_rows_and_missing_logprobs():
    logprobs = {0: [lp(1, {1: 0.8, 2: 0.2}), lp(2, {3: 0.5, 2: 0.4})]}
    frame = A.uncertainty_frame(make_run([[1, 2], [1, 3, 4]], logprobs=logprobs))
    assert len(frame) == 5 and "entropy_lb_bits" in frame.columns
    row = frame[(frame["sample"] == 0) & (frame["position"] == 1)].iloc[0]
    assert row["prob"] == pytest.approx(0.4) and row["rank"] == 2 and "·is 0.500" in row["alternatives"]
    assert frame[frame["sample"] == 1]["prob"].isna().all()  # sample 1 recorded no logprobs


def test_the_tokens_export_says_each_tokens_p_and_which_tokens_the_text_leaves_out():
    """A data reader gets p beside the logprob, each sample's finish_reason on its rows, and
    which tokens are in its text: vLLM leaves the end-of-turn token (and a stop string) out."""
    logprobs = {0: [lp(1, {1: 0.8, 2: 0.2}), lp(2, {3: 0.5, 2: 0.4}), lp(3, {3: 0.9})]}
    run = make_run([[1, 2, 3], [1, 3]], logprobs=logprobs, finished=[0, 1])
    run.samples[0].text = "".join(run.samples[0].token_texts[:2])  # its last token is past its text
    table = A.tokens_table(run)
    assert table.columns.tolist() == ["sample", "seed", "position", "token_id", "token_text", "t", "logprob", "prob",
                                      "rank", "entropy_lb_bits", "in_text", "finish_reason"]
    first = table[table["sample"] == 0]
    assert first["prob"].tolist() == pytest.approx([0.8, 0.4, 0.9]) and first["in_text"].tolist() == [True, True, False]
    assert table[table["sample"] == 1]["in_text"].tolist() == [True, True]
    assert set(table["finish_reason"]) == {"length"}
    # parts of characters (empty pieces): in the text with the token that completes their character;
    # a character the sample's end cut in two is not in its text (vLLM drops it)
    run.samples[0].token_ids, run.samples[0].token_texts, run.samples[0].text = [7, 8, 9, 7], ["", "日", " ", ""], "日 "
    run.samples[0].logprobs = None
    assert A.tokens_table(run)[lambda t: t["sample"] == 0]["in_text"].tolist() == [True, True, True, False]


def test_agreement_frame_known_shares():
    frame = A.agreement_frame(make_run([[1, 2, 3], [1, 2, 4], [1, 5], [1]])).set_index("position")
    assert list(frame["reached"]) == [4, 3, 2]
    assert list(frame["agreement"]) == pytest.approx([1.0, 2 / 3, 0.5])
    assert frame.loc[1, "top_token"] == "·sea" and frame.loc[1, "distinct"] == 2
    assert A.agreement_frame(make_run([[], []])).empty


def test_uncertainty_figures_traces():
    logprobs = {i: [lp(1, {1: 0.7, 2: 0.3}), lp(2, {2: 0.6, 3: 0.4})] for i in range(3)}
    run = make_run([[1, 2]] * 3, logprobs=logprobs)
    fig = A.uncertainty_figure(run)
    assert len(fig.data) == 6  # probability and entropy per sample
    assert "·is 0.400" in fig.data[0].hovertext[1] and fig.layout.height
    assert len(A.uncertainty_figure(make_run([[1, 2]] * 3)).data) == 0  # no logprobs: a message
    many = A.uncertainty_figure(make_run([[1, 2]] * 12, logprobs={i: logprobs[0] for i in range(12)}))
    assert [t.name for t in many.data[:2]] == ["mean of all 12"] * 2  # past eight lines, a mean over faint ones
    assert len(many.data) == 2 + 24 and all(t.opacity == 0.35 for t in many.data[2:])
    bars = A.agreement_figure(run).data[0]
    assert list(bars.y) == [1.0, 1.0]


# ---- timing -------------------------------------------------------------------------------------

def test_timing_known_values_and_same_event_tokens():
    run = make_run([[1, 2, 3, 4], [1]])
    run.samples[0].token_times = [0.1, 0.2, 0.2, 0.5]  # tokens 1 and 2 arrived in one event
    frame = A.timing_frame(run).set_index("sample")
    assert frame.loc[0, "ttft"] == pytest.approx(0.1) and frame.loc[0, "total_time"] == pytest.approx(0.5)
    assert frame.loc[0, "tokens_per_s"] == pytest.approx(8.0)
    assert frame.loc[0, "decode_tokens_per_s"] == pytest.approx(7.5)
    assert frame.loc[0, "itl_max"] == pytest.approx(0.3)
    assert pd.isna(frame.loc[1, "decode_tokens_per_s"]) and pd.isna(frame.loc[1, "itl_mean"])
    itl = A.itl_frame(run)
    assert list(itl["itl"]) == pytest.approx([0.1, 0.0, 0.3]) and list(itl["same_event"]) == [False, True, False]


def test_timing_final_only_and_empty_samples():
    frame = A.timing_frame(make_run([[1, 2, 3], [1, 2, 3]], kind="FINAL_ONLY"))
    assert frame["decode_tokens_per_s"].isna().all() and (frame["itl_max"] == 0).all()
    frame = A.timing_frame(make_run([[], [1]]))
    assert pd.isna(frame.loc[0, "ttft"]) and frame.loc[0, "tokens"] == 0


def test_timing_figures_traces():
    run = make_run([[1, 2, 3], [1, 2], []])
    lines = A.tokens_over_time_figure(run).data
    assert len(lines) == 2 and list(lines[0].y) == [0, 1, 2, 3]
    assert len(A.itl_figure(run).data) == 2
    assert len(A.ttft_figure(run).data[0].y) == 2
    assert len(A.itl_figure(make_run([[1], []])).data) == 0


# ---- events -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, events, marks, carried", [
    ("DELTA", 3, 6, 6),         # one mark per token step; each carries one token
    ("CUMULATIVE", 3, 6, 10),   # same marks; each carries everything so far: 1+2+3 + 1+2+1
    ("FINAL_ONLY", 1, 3, 6),    # one event holding all three
])
def test_events_frame_and_figure_by_output_kind(kind, events, marks, carried):
    run = make_run([[1, 2, 3], [1, 2], [4]], kind=kind)
    frame = A.event_outputs_frame(run)
    assert frame["event"].nunique() == events and len(frame) == marks
    assert frame["tokens_carried"].sum() == carried
    assert frame.groupby("index")["new_tokens"].sum().tolist() == [3, 2, 1]
    fig = A.events_figure(run)
    output, finish = fig.data
    assert len(output.x) + len(finish.x) == marks and sorted(finish.y) == [0, 1, 2]
    assert len(fig.layout.shapes) == 1  # the event that finished the run


def test_the_events_timeline_of_a_large_run_marks_its_first_samples_and_counts_every_output():
    run = make_run([[1, 2]] * 40)
    fig = A.events_figure(run)
    marked = {y for trace in fig.data[:2] for y in trace.y}
    assert marked == set(range(32)) and f"{len(A.event_outputs_frame(run))} outputs" in fig.layout.title.text
    assert "of samples 0–31 of 40" in fig.layout.title.text and fig.layout.yaxis.range == (31.5, -0.5)


def test_events_of_a_run_in_progress():
    run = make_run([[1, 2, 3], [1, 2, 3, 4]], finished=[], status="running")
    fig = A.events_figure(run)
    assert len(fig.data[1].x) == 0 and len(fig.layout.shapes) == 0


# ---- one row per run ----------------------------------------------------------------------------

def test_run_row():
    run = make_run([[1, 2], [3], [1, 2]], cached={0: 0, 1: 16, 2: 16})
    row = A.run_row(run).iloc[0]
    assert row["n"] == 3 and row["tokens"] == 5 and row["output_kind"] == "DELTA"
    assert row["wall_time"] == pytest.approx(0.25) and row["tokens_per_s"] == pytest.approx(20.0)
    assert row["cached_prompt_tokens"] == [0, 16, 16]
    assert row["any_identical"] and row["identical_samples"] == "0=2"
    unique = A.run_row(make_run([[1], [2]])).iloc[0]
    assert not unique["any_identical"] and unique["identical_samples"] == "none"


def test_run_row_of_a_run_in_progress():
    run = make_run([[1, 2], [3]], finished=[1], status="running")
    row = A.run_row(run).iloc[0]
    assert row["status"] == "running" and row["wall_time"] == pytest.approx(0.2)
    assert "running ×1" in row["finish_reasons"]


# ---- every function on every shape of run ---------------------------------------------------------

UTF8 = [[1, 7, 8, 2], [1, 7, 8, 3]]  # 'The' + half of 'é' + its other half + ...

EDGE_RUNS = {
    "n1": make_run([[1, 2, 3]]),
    "empty": make_run([[], []]),
    "some_empty": make_run([[1, 2], []]),
    "identical": make_run([[1, 2, 3]] * 4),
    "at_0": make_run([[1, 2], [2, 2]]),
    "at_last": make_run([[1, 2, 3], [1, 2, 4]]),
    "lengths": make_run([[1, 2, 3, 4, 5], [1, 2]]),
    "running": make_run([[1, 2], [1]], finished=[], status="running"),
    "utf8": make_run(UTF8, logprobs={0: [lp(t, {t: 0.9}) for t in UTF8[0]]}),
    "final_only": make_run([[1, 2], [1, 3]], kind="FINAL_ONLY"),
    "cumulative": make_run([[1, 2], [1, 3]], kind="CUMULATIVE"),
}

FRAMES = [A.uncertainty_frame, A.agreement_frame, A.timing_frame, A.itl_frame,
          A.event_outputs_frame, A.run_row]
FIGURES = [A.pairwise_heatmap, A.tree_figure, A.uncertainty_figure, A.agreement_figure, A.tokens_over_time_figure,
           A.itl_figure, A.ttft_figure, A.events_figure]


@pytest.mark.parametrize("name", EDGE_RUNS)
def test_every_analysis_handles_the_run(name):
    run = EDGE_RUNS[name]
    for frame in FRAMES:
        assert isinstance(frame(run), pd.DataFrame), frame.__name__
    for figure in FIGURES:
        fig = figure(run)
        assert isinstance(fig, go.Figure) and fig.layout.height, figure.__name__
        fig.to_json()  # serialisable, as gr.Plot needs
    assert sum(b.count for b in A.divergence_tree(run).leaves()) == run.n
    assert len(A.timing_frame(run)) == run.n
    for s in run.samples:
        assert len(A.pieces(s)) == len(s.token_ids)
        if s.index:
            assert len(A.diff_samples(run.samples[0], s)) == len(s.token_ids)


def test_split_multibyte_pieces_stay_visible_tokens():
    run = EDGE_RUNS["utf8"]
    pairs = A.diff_samples(run.samples[0], run.samples[1])
    assert [t for t, _ in pairs] == ["The", A.PARTIAL, "é", "·is"]
    assert [label for _, label in pairs] == ["equal", "equal", "equal", "replace"]
    shared = A.divergence_tree(run).children[0]
    assert shared.token_ids == [1, 7, 8] and shared.text == "Theé"
    assert A.PARTIAL in A.tree_figure(run).data[0].hovertext[1]  # each token shown, a split one too
    assert A.agreement_frame(run).loc[1, "top_token"] == A.PARTIAL


def test_analysis_survives_the_json_bundle():
    logprobs = {0: [lp(1, {1: 0.9, 2: 0.1}), lp(2, {2: 0.6, 3: 0.3})]}
    run = make_run([[1, 2], [1, 3]], logprobs=logprobs)
    again = Run.from_json(run.to_json())
    assert A.tree_figure(again).to_json() == A.tree_figure(run).to_json()
    pd.testing.assert_frame_equal(A.uncertainty_frame(again), A.uncertainty_frame(run))
