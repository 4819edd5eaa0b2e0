"""The set measures (what the n samples say together) on small hand-made runs whose answers are
known: identical samples, all-different samples, two answer groups of known sizes, and the
extremes (n = 1, no sample, empty samples, no extractable answer). No engine; one real
sentence-embedding model (shipped in a wheel, loaded offline) for grouping by meaning."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from playground import analysis as A
from playground.analysis import InvalidExtractor, parse_extractor
from playground.commands import batch
from playground.run import Run, Sample


def make_run(samples: list[tuple[str, list[int]]], seed: int = 100) -> Run:
    return Run(request={"prompt": "p", "mode": "wrapper"}, status="finished", wall_time=1.0,
               samples=[Sample(index=i, seed=seed + i, text=text, token_ids=ids) for i, (text, ids) in
                        enumerate(samples)])


def bits(*shares: float) -> float:
    return -sum(p * math.log2(p) for p in shares)


IDENTICAL = make_run([("The answer is 42.", [1, 2, 3, 4])] * 3)
ALL_DIFFERENT = make_run([("red", [1, 2, 3]), ("blue", [4, 5, 6]), ("green", [7, 8, 9]), ("yellow", [10, 11, 12])])
# Two answer groups: three samples say 12 (identical tokens), two say 7 (identical tokens, disjoint from the 12s).
TWO_GROUPS = make_run([("so 12", [1, 2, 3])] * 3 + [("it is 7", [4, 5])] * 2)


# ---- diversity ----------------------------------------------------------------------------------

def test_identical_samples_are_one_effective_sample():
    d = A.set_diversity(IDENTICAL)
    assert (d.whole.distinct_1, d.whole.distinct_2, d.whole.distinct_3) == (pytest.approx(1 / 3),) * 3
    assert (d.whole.similarity_mean, d.whole.similarity_std, d.whole.similarity_min) == (1.0, 0.0, 1.0)
    assert d.whole.vendi == pytest.approx(1.0)
    # Nothing follows the shared prefix: no n-gram to count, the (empty) rests are alike, one effective sample.
    assert d.common_prefix == 4
    after = d.after_divergence
    assert (after.tokens, after.distinct_1, after.distinct_2, after.distinct_3) == (0, None, None, None)
    assert after.similarity_mean == 1.0 and after.vendi == pytest.approx(1.0)


def test_all_different_samples_are_n_effective_samples():
    d = A.set_diversity(ALL_DIFFERENT)
    assert (d.whole.distinct_1, d.whole.distinct_2, d.whole.distinct_3) == (1.0, 1.0, 1.0)
    assert (d.whole.similarity_mean, d.whole.similarity_std, d.whole.similarity_max) == (0.0, 0.0, 0.0)
    assert d.whole.vendi == pytest.approx(4.0)
    assert d.common_prefix == 0 and d.after_divergence == d.whole


def test_two_blocks_of_identical_samples():
    d = A.set_diversity(TWO_GROUPS).whole
    assert d.distinct_1 == pytest.approx(5 / 13)  # 1 2 3 | 4 5 over 3·3 + 2·2 unigrams
    # 4 of the 10 pairs are identical (similarity 1), 6 share nothing (0).
    assert d.similarity_mean == pytest.approx(0.4) and d.similarity_std == pytest.approx(math.sqrt(0.4 * 0.6))
    # K is block-diagonal with blocks of ones: eigenvalues of K/n are 3/5 and 2/5, so VS = exp(H(3/5, 2/5)).
    assert d.vendi == pytest.approx(math.exp(-(0.6 * math.log(0.6) + 0.4 * math.log(0.4))))


def test_partial_overlap_pairwise_similarity_kernel_and_repeats():
    assert A.similarity_matrix([[1, 2, 3, 4], [1, 2, 5, 4]])[0, 1] == pytest.approx(0.75)  # 2·LCS 3 / 8
    # Bags {1, 2, (1,2)} and {1, 3, (1,3)}: one shared feature of three each, cosine 1/3.
    kernel = A.ngram_kernel([[1, 2], [1, 3]])
    assert kernel == pytest.approx(np.array([[1, 1 / 3], [1 / 3, 1]]))
    assert A.vendi_score(kernel) == pytest.approx(math.exp(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))))
    # distinct-n counts repeats inside one sample too (Li et al. pool all n-grams).
    assert A.distinct_n([[7, 7, 7, 7]], 1) == 0.25 and A.distinct_n([[7, 7, 7, 7]], 2) == pytest.approx(1 / 3)


def test_one_sample_no_sample_and_empty_samples():
    one = A.set_diversity(make_run([("a b", [5, 6, 5])]))
    assert (one.whole.distinct_1, one.whole.distinct_2, one.whole.distinct_3) == (pytest.approx(2 / 3), 1.0, 1.0)
    assert one.whole.similarity_mean is None and one.whole.similarity_std is None  # no pair
    assert one.whole.vendi == pytest.approx(1.0) and one.common_prefix == 3
    none = A.set_diversity(make_run([]))
    assert none.whole.samples == 0 and none.whole.vendi is None and none.whole.distinct_1 is None
    empty = A.set_diversity(make_run([("", [])] * 3)).whole
    assert empty.distinct_1 is None and empty.similarity_mean == 1.0 and empty.vendi == pytest.approx(1.0)
    # An empty sample beside others is unlike them all: two effective samples.
    assert A.set_diversity(make_run([("", []), ("x", [9])])).whole.vendi == pytest.approx(2.0)


def test_after_divergence_ignores_the_shared_prefix():
    shared = [1, 2, 3, 4, 5, 6]
    d = A.set_diversity(make_run([("a", shared + [7, 8]), ("b", shared + [9, 10])]))
    assert d.common_prefix == 6
    assert d.whole.similarity_mean == pytest.approx(12 / 16)
    assert d.after_divergence.similarity_mean == 0.0 and d.after_divergence.vendi == pytest.approx(2.0)
    assert d.after_divergence.distinct_2 == 1.0 and d.whole.distinct_2 < 1.0


# ---- extractors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, text, answer", [
    ("normalized", "  Hello,   World!!\n", "hello world"),
    ("normalized", "Café—au lait", "café au lait"),
    ("normalized", " ... ", None),
    ("normalized", "ＣＡＦＥ", "cafe"),  # full-width letters: the text's compatibility form
    ("normalized", "cafe\u0301 STRASSE", "café strasse"),  # a combining accent; folded, not lowered
    ("last-number", "٣٫٥ or ７", "7"),  # digits of any script, written in ASCII
    ("last-number", "الجواب ١٬٠٠٠", "1000"),  # Arabic-Indic digits, the Arabic thousands separator
    ("last-number", "它是٣٫٥", "3.5"),  # the Arabic decimal separator
    ("first-line", "\n\n  Paris.\nMore text", "Paris."),
    ("first-line", "  \n ", None),
    ("last-number", "3 apples and 1,234.50 pears.", "1234.5"),
    ("last-number", "x = -5", "-5"),
    ("last-number", "pages 2-3", "3"),
    ("last-number", "It is 3.0, or -0.0", "0"),
    ("last-number", "The answer is 42.", "42"),
    ("last-number", "about .50 or -.25", "-0.25"),
    ("last-number", "no digits here", None),
    ("boxed", r"first \boxed{1} then \boxed{\frac{1}{2}} done", r"\frac{1}{2}"),
    ("boxed", r"\boxed {x + {y}}", "x + {y}"),
    ("boxed", r"\boxed{1 and never closed", None),
    ("boxed", r"\boxed{ }", None),
    (r"regex:answer is (\w+)", "The answer is Paris, surely.", "Paris"),
    (r"regex:answer is (\w+)", "No idea.", None),
    (r"regex:(\d+)?x", "x", None),  # the group took no part in the match
])
def test_extractors(spec, text, answer):
    assert parse_extractor(spec)(text) == answer


@pytest.mark.parametrize("spec, message", [
    ("regex:(unclosed", "the pattern '(unclosed' does not compile"),
    (r"regex:\d+", r"the pattern '\d+' has 0 groups; it needs exactly one"),
    ("regex:(a)(b)", "the pattern '(a)(b)' has 2 groups"),
    ("regex", "needs a pattern with one group"),
    ("lastnumber", "unknown answer extractor 'lastnumber'"),
])
def test_an_extractor_that_cannot_work_is_named(spec, message):
    with pytest.raises(InvalidExtractor, match=re.escape(message)):
        parse_extractor(spec)


# ---- answers ------------------------------------------------------------------------------------

def test_two_answer_groups_of_known_sizes():
    a = A.group_answers(TWO_GROUPS, "last-number")
    assert [(g.answer, g.size, g.indices, g.seeds) for g in a.groups] == [("12", 3, [0, 1, 2], [100, 101, 102]),
                                                                          ("7", 2, [3, 4], [103, 104])]
    assert a.groups[1].example == "it is 7"
    assert a.majority.answer == "12" and a.vote_share == pytest.approx(0.6) and not a.tied
    assert a.entropy == pytest.approx(bits(0.6, 0.4)) and a.unanswered == []


def test_the_set_csv_says_how_answers_were_read_and_with_a_reference_which_are_right(tmp_path):
    """The Export tab's files take the Set tab's extractor and reference as they stand: the CSV
    names the extractor on every row and, with a reference, says if each answer is it; the report
    gets pass@k from the same reference."""
    import pandas as pd

    from playground.ui import export_tab

    frame = A.samples_frame(TWO_GROUPS, A.set_measures(TWO_GROUPS, "last-number"), reference="the answer: 7")
    assert frame["extractor"].unique().tolist() == ["last-number"] and frame["reference"].iloc[0] == "the answer: 7"
    assert frame["correct"].tolist() == [False, False, False, True, True]  # "7" read from the reference too
    assert "correct" not in A.samples_frame(TWO_GROUPS, A.set_measures(TWO_GROUPS, "last-number")).columns
    written = pd.read_csv(export_tab.set_file(tmp_path, TWO_GROUPS, "last-number", None, "7"))
    assert written["correct"].tolist() == [False, False, False, True, True]
    report = Path(export_tab.report_file(tmp_path, TWO_GROUPS, "last-number", None, "7")).read_text(encoding="utf-8")
    assert "pass@1" in report and "Answer groups (last-number)" in report
    assert "reference" not in TWO_GROUPS.request, "the run on screen is left as it was"


def test_agreement_extremes():
    same = A.group_answers(IDENTICAL, "last-number")
    assert (len(same.groups), same.vote_share, same.entropy) == (1, 1.0, 0.0)
    spread = A.group_answers(ALL_DIFFERENT)  # the default: the whole text, normalised
    assert spread.extractor == "normalized" and len(spread.groups) == 4
    assert spread.tied and spread.majority.answer == "red"  # a tie goes to the earliest sample
    assert spread.vote_share == 0.25 and spread.entropy == pytest.approx(2.0)
    one = A.group_answers(make_run([("It is 7.", [1])]), "last-number")
    assert (one.vote_share, one.entropy, one.tied) == (1.0, 0.0, False)


def test_samples_with_no_answer_count_against_the_vote_but_not_the_entropy():
    run = make_run([("7", [1]), ("7", [1]), ("seven", [2]), ("", [])])
    a = A.group_answers(run, "last-number")
    assert a.unanswered == [2, 3] and a.answered == 2
    assert a.vote_share == 0.5 and a.entropy == 0.0
    nothing = A.group_answers(make_run([("no number", [1]), ("", [])]), "last-number")
    assert nothing.groups == [] and nothing.majority is None and nothing.unanswered == [0, 1]
    assert nothing.vote_share is None and nothing.entropy is None
    empty = A.group_answers(make_run([]))
    assert (empty.n, empty.vote_share, empty.entropy) == (0, None, None)


def test_entropy_bits():
    assert A.entropy_bits([]) is None and A.entropy_bits([0, 0]) is None
    assert A.entropy_bits([5]) == 0.0 and A.entropy_bits([1, 1, 1, 1]) == pytest.approx(2.0)
    assert A.entropy_bits([3, 1]) == pytest.approx(bits(0.75, 0.25))


# ---- the majority: one rule, said the same in every view ----------------------------------------

def texts_run(texts: list[str], request_id: str = "run") -> Run:
    run = make_run([(text, [k + 1]) for k, text in enumerate(texts)])
    run.request["request_id"] = request_id
    return run


# Hand-made sets of 8: every answer different; two answers tied at 3 votes each (and one of 2); a clear majority.
ALL_DISTINCT = texts_run(["the pacific ocean is approximately the same size as the atlantic ocean", "red", "blue",
                          "green", "yellow", "purple", "orange", "black"], "distinct")
TWO_WAY_TIE = texts_run(["red", "blue", "red", "blue", "green", "red", "blue", "green"], "tie")
CLEAR_MAJORITY = texts_run(["red", "red", "blue", "red", "red", "green", "red", "blue"], "majority")


def test_no_answer_with_more_votes_than_every_other_is_no_majority():
    distinct, tie, clear = (A.group_answers(run) for run in (ALL_DISTINCT, TWO_WAY_TIE, CLEAR_MAJORITY))
    assert distinct.winner is None and distinct.tied and len(distinct.leaders) == 8 and distinct.top_votes == 1
    assert distinct.majority_text() == "no majority: all 8 answers differ"
    assert tie.winner is None and tie.tied and [g.answer for g in tie.leaders] == ["red", "blue"]
    assert tie.majority_text() == "no majority: 2 answers tie with 3 votes each"
    assert clear.winner.answer == "red" and not clear.tied and clear.leaders == [clear.winner]
    assert clear.majority_text() == "red" and clear.top_votes == 5
    # The vote share stays a number in a tie: the share each tied answer has (1/n: no two agree).
    assert (distinct.vote_share, tie.vote_share, clear.vote_share) == (1 / 8, 3 / 8, 5 / 8)
    # ``majority`` is still the first of the most common answers, not a claim that it won.
    assert distinct.majority.answer.startswith("the pacific") and tie.majority.answer == "red"


def test_majority_text_cuts_an_answer_never_the_reason_there_is_none():
    assert A.majority_text("x" * 50, 5, 1, chars=10) == "x" * 9 + "…"
    assert A.majority_text(None, 3, 2, chars=10) == "no majority: 2 answers tie with 3 votes each"
    assert A.majority_text("red", 1, 3) == "no majority: all 3 answers differ"  # an answer among tied ones: none won
    assert A.majority_text(None, 1, 2) == "no majority: the 2 answers differ"
    assert A.majority_text(None, 0, 0) == "no majority: no sample gave an answer"
    assert A.majority_text("7", 1, 1) == "7"  # one sample, one answer: more votes than every (no) other
    assert A.group_answers(make_run([("no number", [1])]), "last-number").majority_text() == (
        "no majority: no sample gave an answer")
    for run in (ALL_DISTINCT, TWO_WAY_TIE):  # the tie is said instead of an answer, never glued to one
        assert "(tie)" not in A.group_answers(run).majority_text()


def test_the_set_row_is_data_no_majority_is_null_and_the_tie_is_counted():
    rows = [A.set_measures(run).row() for run in (ALL_DISTINCT, TWO_WAY_TIE, CLEAR_MAJORITY)]
    fields = ["majority", "majority_size", "vote_share", "tied", "tied_answers"]
    assert [[row[f] for f in fields] for row in rows] == [[None, 1, 1 / 8, True, 8], [None, 3, 3 / 8, True, 2],
                                                          ["red", 5, 5 / 8, False, 1]]
    # The words for a table people read, from the row alone:
    assert [A.majority_text(r["majority"], r["majority_size"], r["tied_answers"]) for r in rows] == [
        "no majority: all 8 answers differ", "no majority: 2 answers tie with 3 votes each", "red"]
    nothing = A.set_measures(make_run([("no number", [1])]), "last-number").row()
    assert (nothing["majority"], nothing["majority_size"], nothing["tied_answers"]) == (None, 0, 0)
    assert A.set_measures(TWO_WAY_TIE).to_dict()["figures"]["majority"] is None  # JSON: null


def test_the_groups_chart_says_why_there_is_no_majority_and_marks_every_tied_answer():
    titles, colors = [], []
    for run in (ALL_DISTINCT, TWO_WAY_TIE, CLEAR_MAJORITY):
        fig = A.answer_groups_figure(A.group_answers(run))
        titles.append(fig.layout.title.text)
        colors.append(list(fig.data[0].marker.color))
    head = "Answer groups (normalized)<br>"
    assert titles == [f"{head}<sup>no majority: all 8 answers differ (vote share 12.5% each)</sup>",
                      f"{head}<sup>no majority: 2 answers tie with 3 votes each (vote share 37.5% each)</sup>",
                      f"{head}<sup>majority vote share 62.5%</sup>"]
    dark, light = "#2563eb", "#93c5fd"
    assert colors == [[dark] * 8, [dark, dark, light], [dark, light, light]]
    nothing = A.answer_groups_figure(A.group_answers(make_run([("no number", [1])]), "last-number"))
    assert nothing.layout.title.text.endswith("no majority: no sample gave an answer</sup>")


def test_the_what_if_table_says_no_majority_rather_than_a_tied_answer():
    options = [A.Alternative(11, 0.5, " is:"), A.Alternative(12, 0.3, " was:"), A.Alternative(13, 0.2, " will be:")]
    # Each answer is read from the whole text: before the point, the forced token, the branch's own.
    table = A.what_if_table(list(zip(options, [ALL_DISTINCT, TWO_WAY_TIE, CLEAR_MAJORITY], strict=True)),
                            "normalized", "The answer")
    assert table.columns.tolist() == A.WHAT_IF_COLUMNS
    assert table["majority"].tolist() == ["no majority: all 8 answers differ",
                                          "no majority: 2 answers tie with 3 votes each", "the answer will be red"]
    assert table["vote_share"].tolist() == [1 / 8, 3 / 8, 5 / 8]  # a number in every row: each tied answer's share
    assert table["request_id"].tolist() == ["distinct", "tie", "majority"]
    assert not table["majority"].str.contains("(tie)", regex=False).any()


# ---- meaning ------------------------------------------------------------------------------------

def test_clusters_by_cosine_similarity_on_a_hand_made_matrix():
    # rows 0 and 1 point the same way; row 2 is close to row 1 (0.95) but not to row 0 (0.8): the greedy
    # pass compares with each cluster's first member, so it does not chain into cluster 0. Row 3 is zero.
    a, b = np.array([1.0, 0.0]), np.array([math.cos(0.3), math.sin(0.3)])
    c = np.array([math.cos(0.6435), math.sin(0.6435)])  # cos 0.6435 = 0.8 against a
    rows = np.stack([a, 2 * a, c, np.zeros(2), b])
    assert A.cluster_by_similarity(rows, 0.9) == [0, 0, 1, 2, 0]
    assert A.cluster_by_similarity(rows, 0.75) == [0, 0, 0, 1, 0]
    clusters = A.meaning_clusters(rows, [10, 11, 12, 13, 14], "hand-made", 0.9)
    assert clusters.clusters == [[10, 11, 14], [12], [13]]
    assert clusters.entropy == pytest.approx(bits(0.6, 0.2, 0.2))
    with pytest.raises(ValueError, match="2 embeddings for 3 samples"):
        A.meaning_clusters(rows[:2], [0, 1, 2], "m")


def test_a_real_embedding_model_groups_paraphrases(embedding_model):
    from playground.backends.embeddings import EmbeddingModelError, load_embedder

    run = make_run([("The capital of France is Paris.", [1]), ("Paris is the capital of France.", [2]),
                    ("I like turtles.", [3])])
    embeddings = load_embedder(embedding_model).embed([s.text for s in run.samples])
    assert embeddings.shape == (3, 384)
    measures = A.set_measures(run, "normalized", embeddings, embedding_model, threshold=0.85)
    assert len(measures.answers.groups) == 3  # three different texts...
    assert measures.meaning.clusters == [[0, 1], [2]]  # ...two meanings
    assert measures.meaning.entropy == pytest.approx(bits(2 / 3, 1 / 3))
    assert A.samples_frame(run, measures)["meaning_cluster"].tolist() == [1, 1, 2]
    with pytest.raises(EmbeddingModelError, match="'nobody/no-such-model' could not be loaded.*downloads are off"):
        load_embedder("nobody/no-such-model")


# ---- tables, figure, batch summary --------------------------------------------------------------

def test_frames_and_the_groups_chart():
    run = make_run([("so 12", [1, 2]), ("12!", [1, 3]), ("7", [4]), ("no", [5])])
    measures = A.set_measures(run, "last-number")
    row = measures.row()
    assert list(row) == A.SET_COLUMNS
    assert (row["majority"], row["majority_size"], row["vote_share"], row["groups"]) == ("12", 2, 0.5, 2)
    assert row["unanswered"] == [3] and row["meaning_clusters"] is None
    samples = A.samples_frame(run, measures)
    assert samples["answer"].tolist()[:3] == ["12", "12", "7"] and samples["group"].tolist()[:3] == [1, 1, 2]
    assert samples.loc[3, ["answer", "group", "group_size"]].isna().all()  # no answer: empty cells in the CSV
    groups = A.groups_frame(measures.answers)
    assert groups["samples"].tolist() == ["0, 1", "2", "3"] and groups["answer"].tolist()[2] == "(no answer)"
    bar = A.answer_groups_figure(measures.answers).data[0]
    assert list(bar.customdata) == ["0,1", "2", "3"]  # what a click on a bar reads
    assert list(bar.x) == [2, 1, 1] and list(bar.y) == ["12 (group 1)", "7 (group 2)", "(no answer)"]
    table = A.measures_table(measures.diversity)
    assert table.columns.tolist() == ["figure", "whole samples", "after token 0"]
    to_json = measures.to_dict()
    assert to_json["groups"][0] == {"answer": "12", "size": 2, "samples": [0, 1], "seeds": [100, 101],
                                    "example": "so 12"}
    assert to_json["answers"][3] == {"sample": 3, "answer": None, "group": None}


def test_answer_groups_are_labelled_so_no_label_reads_as_a_decimal_in_the_chart_and_the_report():
    """Read as the last number, groups 2, 3 and 5 answering 8, 10 and 3 were labelled "2. 8",
    "3. 10", "5. 3" (2.8?): the answer comes first and the group is said in words, on the Set tab's
    chart and in the report alike; the bar of the samples with no answer lists their seeds."""
    from playground.analysis.sample_set import group_label
    from playground.ui import set_tab

    texts = ["7", "7", "7", "8", "8", "it is 10", "10", "5", "5", "3", "3", "none", "4"]
    run = make_run([(text, [k]) for k, text in enumerate(texts)])
    labels = list(set_tab.set_values(run, "last-number").chart.data[0].y)
    assert labels[:5] == ["7 (group 1)", "8 (group 2)", "10 (group 3)", "5 (group 4)", "3 (group 5)"]
    assert labels[-1] == "(no answer)" and not any(re.match(r"\d+\. ", label) for label in labels)
    assert group_label(2, "a long answer " * 10).endswith("… (group 2)")  # cut, the group kept
    answers = A.group_answers(run, "last-number")
    assert "seeds 111" in A.answer_groups_figure(answers).data[0].hovertext[-1]  # sample 11's seed
    assert A.groups_frame(answers).iloc[-1][["answer", "seeds"]].tolist() == ["(no answer)", "111"]
    report = A.run_report(run, extractor="last-number")
    assert all(json.dumps(label) in report for label in labels) and '"2. 8"' not in report


def test_batch_summary_has_the_set_measures():
    frame = batch.summary_frame({1: TWO_GROUPS, 2: IDENTICAL}, "last-number")
    assert frame["answers"].tolist() == [2, 1] and frame["majority"].tolist() == ["12", "42"]
    assert frame["vote_share"].tolist() == [0.6, 1.0]
    assert frame["answer_entropy"].tolist() == [round(bits(0.6, 0.4), 2), 0.0]
    assert frame["vendi"].tolist() == [1.96, 1.0]


# ---- the Set tab's values -----------------------------------------------------------------------

def test_set_tab_values_and_a_bar_click():
    from playground.ui import set_tab
    from playground.ui.answer_controls import extractor_spec

    shown = set_tab.set_values(TWO_GROUPS, extractor_spec("last-number", "ignored"))
    assert "**Majority answer: `12`** given by 3 of 5 samples: vote share **60%**" in shown.headline
    assert list(shown.chart.data[0].customdata) == ["0,1,2", "3,4"]
    assert shown.groups["size"].tolist() == [3, 2] and shown.samples["group"].tolist() == [1, 1, 1, 2, 2]

    bad = set_tab.set_values(TWO_GROUPS, extractor_spec("regex", r"\d+"))
    assert bad.set_measures is None and "has 0 groups" in bad.headline
    assert bad.groups.empty and not bad.diversity.empty  # the diversity does not depend on the extractor
    assert extractor_spec("regex", r"is (\d+)") == r"regex:is (\d+)"
    assert set_tab.picked_indices("3,4@1718000000000") == [3, 4] and set_tab.picked_indices("junk") == []


def test_a_click_on_a_bar_tells_its_samples_in_chromium():
    """The tab alone in a real page and a real Chromium: Gradio's Plot has no click event, so CLICK_JS
    carries Plotly's click to the server; clicking a bar twice must say its samples each time."""
    from functools import partial

    import gradio as gr
    from playwright.sync_api import sync_playwright

    from playground.ui import set_tab
    from tests.helpers import free_port
    from tests.test_browser import CHROMIUM, click_bar

    with gr.Blocks() as demo:
        current = gr.State(TWO_GROUPS)
        with gr.Tabs():
            tab = set_tab.declare()
        set_tab.connect(tab, current)
        demo.load(None, None, None, js=set_tab.CLICK_JS)
        demo.load(partial(set_tab.redraw, tab), [current, *tab.controls().values()], list(tab.components().values()))
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto(url)
            page.wait_for_function("""() => {  // the figures the page load drew: two answer groups
                const title = document.querySelector('#set-groups-chart .gtitle');
                return title && title.textContent.includes('vote share 60%')
                    && document.querySelectorAll('#set-groups-chart g.point path').length === 2; }""",
                                   timeout=60_000)
            bars = page.locator("#set-groups-chart g.point path")
            for bar, samples, said in [(1, "3, 4", "#3 (seed 103), #4 (seed 104)"),
                                       (0, "0, 1, 2", "#0 (seed 100), #1 (seed 101), #2 (seed 102)"),
                                       (1, "3, 4", "2 sample(s) in this group: #3")]:
                click_bar(page, bars.nth(bar), f"samples: {samples}")
                page.locator("#set-picked-note").get_by_text(said).wait_for(timeout=10_000)
            browser.close()
    finally:
        demo.close()


def test_an_empty_pattern_asks_for_one():
    with pytest.raises(A.InvalidExtractor, match="the pattern is empty: type one with one group around the answer"):
        A.parse_extractor("regex:")


def test_a_stopped_runs_answers_say_that_they_read_cut_short_samples():
    """Stopped with most samples unfinished, the majority and every figure that counts answers
    read texts that were cut short: the Set tab, the report and Compare say how many; a finished
    run, or a stopped one whose samples had all finished, says nothing."""
    from playground.ui import set_tab

    run = make_run([("so 7", [1]), ("so 7", [1]), ("so", [2]), ("", [])])
    for s, reason in zip(run.samples, ("stop", "length", "abort", None)):
        s.finish_reason = reason
    run.status = "aborted"
    said = "2 of the 4 samples were stopped before they finished"
    assert set_tab.set_values(run, "last-number").headline.startswith(f"⚠️ {said}")
    assert said in A.run_report(run, extractor="last-number")
    assert A.cut_short_note(dataclasses.replace(run, status="finished")) == ""
    whole = dataclasses.replace(run, samples=run.samples[:2])
    assert A.cut_short_note(whole) == ""  # stopped after every sample had finished


def test_a_branchs_answers_are_read_from_the_whole_text_its_samples_end_up_with():
    """Branched at "O" of "Orange", the samples say "range", "range" and "live": their answers are
    read behind the words they continue (the record's branch.prefix_text), in the Set tab, its
    CSV, the report and analyze alike, as What if reads them; the report names the branch."""
    run = make_run([("range.", [1]), ("range.", [1]), ("live.", [2])])
    run.request["branch"] = {"run": "run-p", "sample": 0, "position": 1, "forced_token_id": 46,
                             "forced_text": "O", "prefix_text": "O"}
    answers = A.group_answers(run, "normalized")
    assert answers.winner.answer == "orange" and answers.winner.size == 2
    assert A.answer_texts(run) == ["Orange.", "Orange.", "Olive."]
    report = A.run_report(run, extractor="normalized")
    assert "A branch: branched from #0 at token 1, forced &#x27;O&#x27; of run-p" in report
    assert "orange" in report and ">range<" not in report
