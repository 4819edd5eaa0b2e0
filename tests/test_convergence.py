"""How many samples a prompt needs, on hand-made runs whose measures are worked out here by hand:
agreement@k, pass@k and maj@k against k, the stopping rule, EigV and DegMat, the logprob measures,
shared child seeds, and the estimate beyond EXACT_UP_TO samples against an exact count. No engine."""

from __future__ import annotations

import dataclasses
import math
import re
from math import comb
from pathlib import Path

import pytest

from playground import analysis as A
from playground.run import Run, Sample, TokenLogprob


def make_run(texts: list[str], seed: int | None = 100, same_seed: bool = False) -> Run:
    def seed_of(i: int) -> int | None:
        return None if seed is None else seed if same_seed else seed + i

    return Run(request={"prompt": "p", "mode": "same-seed" if same_seed else "wrapper"}, status="finished",
               samples=[Sample(index=i, seed=seed_of(i), text=text, token_ids=[i]) for i, text in enumerate(texts)])


def at_least_one(n: int, correct: int, k: int) -> float:
    """pass@k by its definition: 1 - (k-subsets with no correct sample) / (all k-subsets)."""
    return 1 - comb(n - correct, k) / comb(n, k)


# ---- agreement@k, pass@k, maj@k on small sets -----------------------------------------------------

def test_two_of_three_agree():
    answers = ["A", "A", "B"]
    # k=1: every single sample is its own majority. k=2: {A,A} 2/2, {A,B} twice 1/2 -> (1 + 1/2 + 1/2) / 3.
    # k=3: the largest group has 2 of 3.
    assert A.agreement_at_k(answers).values == pytest.approx([1.0, 2 / 3, 2 / 3])
    # pass@k, reference A (c = 2): k=1 2/3; k=2 every pair holds an A.
    assert A.pass_at_k(answers, "A").values == pytest.approx([2 / 3, 1.0, 1.0])
    # reference B (c = 1): k=1 1/3; k=2 two of the three pairs hold the B; k=3 all.
    assert A.pass_at_k(answers, "B").values == pytest.approx([1 / 3, 2 / 3, 1.0])
    # maj@k, reference A: k=1 2/3; k=2 only {A,A} has a majority (the two {A,B} tie); k=3 A wins 2-1.
    assert A.maj_at_k(answers, "A").values == pytest.approx([2 / 3, 1 / 3, 1.0])
    assert A.maj_at_k(answers, "B").values == pytest.approx([1 / 3, 0.0, 0.0])
    curve = A.agreement_at_k(answers)
    assert curve.is_exact and curve.low == curve.values == curve.high and curve.at(2) == pytest.approx(2 / 3)


def test_a_tie_is_no_majority():
    answers = ["A", "A", "B", "B"]
    # k=2: of the 6 pairs only {A,A} has A as majority; k=3: 4 triples, the 2 AAB ones; k=4: 2-2, a tie.
    assert A.maj_at_k(answers, "A").values == pytest.approx([0.5, 1 / 6, 0.5, 0.0])
    # agreement k=2: {A,A}, {B,B} 1; four mixed pairs 1/2 -> (2 + 4/2) / 6. k=3: every triple 2/3. k=4: 2/4.
    assert A.agreement_at_k(answers).values == pytest.approx([1.0, 4 / 6, 2 / 3, 0.5])


def test_samples_with_no_answer_are_drawn_but_never_agree_nor_match():
    answers = ["A", None, "A"]
    # k=1: 2 of 3 samples answer. k=2: {A,A} 1, {A,None} twice 1/2 -> 2/3. k=3: 2 of 3.
    assert A.agreement_at_k(answers).values == pytest.approx([2 / 3, 2 / 3, 2 / 3])
    assert A.agreement_at_k([None, None]).values == [0.0, 0.0]
    # Two unanswered samples are not a group that could beat a lone answer.
    assert A.maj_at_k(["A", None, None], "A").values == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert A.pass_at_k([None, "7", None], "7").values == pytest.approx([1 / 3, 2 / 3, 1.0])


def test_pass_at_k_is_exact_for_large_n():
    answers = ["right"] * 30 + ["wrong"] * 970  # C(1000, 500) overflows a float
    curve = A.pass_at_k(answers, "right")
    assert curve.is_exact and len(curve.values) == 1000
    assert curve.at(1) == pytest.approx(0.03)
    # 1 - (970/1000)(969/999): no correct sample among two.
    assert curve.at(2) == pytest.approx(1 - 970 * 969 / (1000 * 999))
    assert curve.at(500) == pytest.approx(1 - math.prod((970 - j) / (1000 - j) for j in range(500)))
    assert curve.at(971) == 1.0  # fewer wrong samples than k


def test_the_reference_is_read_by_the_extractor_or_taken_as_typed():
    assert A.read_reference("The answer is 42.", "last-number") == "42"
    assert A.read_reference(" forty-two ", "last-number") == "forty-two"  # no number in it: as typed, stripped
    assert A.read_reference(" Paris! ", None) == "paris"  # the default extractor: normalized
    assert A.read_reference("  ", "last-number") is None and A.read_reference(None) is None


# ---- the stopping rule --------------------------------------------------------------------------

def beta_above_half(v1: int, v2: int) -> float:
    """P(p > 1/2), p ~ Beta(v1 + 1, v2 + 1), by numerical integration of the density."""
    steps = 20000
    norm = math.factorial(v1) * math.factorial(v2) / math.factorial(v1 + v2 + 1)
    xs = [(j + 0.5) / steps for j in range(steps)]
    above = sum(x ** v1 * (1 - x) ** v2 for x in xs if x > 0.5) / steps
    return above / norm


@pytest.mark.parametrize("v1, v2", [(3, 0), (4, 0), (5, 1), (6, 1), (4, 4)])
def test_the_settle_probability_is_the_beta_tail(v1, v2):
    assert float(A.settle_probability(v1, v2)) == pytest.approx(beta_above_half(v1, v2), abs=1e-6)


def test_settles_at_a_known_sample():
    # Four agreeing answers: P = 31/32 >= 0.95 (three: 15/16 = 0.9375 is not enough).
    assert A.settled_at(["7"] * 8) == A.Settled(4, "7", 8)
    # A A B A A A A: after 6, v = (5, 1): P(Bin(7) <= 5) = 1 - (1 + 7)/128 = 0.9375; after 7, v = (6, 1):
    # 1 - (1 + 8)/256 = 0.965.
    settled = A.settled_at(list("AABAAAA") + ["B"] * 5)
    assert (settled.at, settled.answer, settled.samples) == (7, "A", 12)
    # A sample with no answer does not vote but is counted in k.
    assert A.settled_at(["A", None, "A", None, "A", "A"]).at == 6
    assert A.settled_sentence(settled) == "the majority was settled after 7 of 12 samples"
    assert A.settled_sentence(settled, 32) == "the majority was settled after 7 of 32 samples"
    assert A.settled_sentence(settled, 32, settled.answer) == "the majority was settled after 7 of 32 samples on the " \
                                                              "reference"
    assert A.settled_sentence(settled, 32, "nothing like it").endswith(f"on {settled.answer!r}, not the reference")


def test_a_set_that_never_settles():
    never = A.settled_at(list("ABABABABAB"))  # every even k a tie; every odd k one ahead: P <= 2/3
    assert never == A.Settled(None, None, 10)
    assert A.settled_sentence(never) == "the majority did not settle within the 10 samples"
    assert A.settled_sentence(A.settled_at(["A", None, "A"]), 32) == (
        "the majority did not settle within the first 3 of 32 samples")
    assert A.settled_at([None] * 5).at is None and A.settled_at([]).at is None


def test_a_table_cell_says_a_majority_that_did_not_settle_rather_than_a_blank():
    # all distinct, a 2-way tie and a clear majority, 8 samples each
    cells = [A.settled_cell(A.settled_at(list(answers)).at, 8) for answers in ("abcdefgh", "ababcabc", "aaaabaca")]
    assert cells == ["not within 8", "not within 8", 4]
    assert A.settled_cell(float("nan"), 8) == "not within 8"  # a table's missing number
    assert A.settled_cell(4.0, 8) == 4 and isinstance(A.settled_cell(4.0, 8), int)  # not "4.0"


def test_the_rule_reads_a_growing_prefix_as_a_run_streams():
    answers = ["9", "9", "9", "9", "1"]
    seen = [A.settled_at(answers[:done]).at for done in range(1, 6)]
    assert seen == [None, None, None, 4, 4]


# ---- a run: its curves, its stopping rule, its figure ---------------------------------------------

TEXTS = ["so it is 7", "so it is 7", "maybe 3", "so it is 7", "so it is 7", "so it is 7", "so it is 7", "maybe 3"]


def test_a_run_with_a_reference():
    c = A.convergence_of(make_run(TEXTS), "last-number", "The answer is 7")
    assert c.reference == "7" and c.answers == ["7", "7", "3", "7", "7", "7", "7", "3"] and c.exact
    assert c.pass_at_k.values == pytest.approx([at_least_one(8, 6, k) for k in range(1, 9)])
    assert c.settled == A.Settled(7, "7", 8)  # after 7: (6, 1)
    d = c.to_dict()
    assert set(d) >= {"agreement_at_k", "pass_at_k", "maj_at_k", "settled_at"}
    assert d["settled_at"] == 7 and d["pass_at_k"] == c.pass_at_k.values and len(d["maj_at_k"]) == 8
    assert d["bands"] == {}  # exact: no band
    without = A.convergence_of(make_run(TEXTS), "last-number").to_dict()
    assert without["pass_at_k"] is None and without["maj_at_k"] is None and len(without["agreement_at_k"]) == 8


def test_the_figure():
    fig = A.convergence_figure(A.convergence_of(make_run(TEXTS), "last-number", "7"))
    assert [t.name for t in fig.data] == ["agreement@k", "pass@k", "maj@k"]
    assert fig.layout.height and "exact" in fig.layout.title.text
    assert [s.x0 for s in fig.layout.shapes] == [7]  # where the majority settled
    big = make_run([str(i % 3) for i in range(30)])
    estimated = A.convergence_figure(A.convergence_of(big, "last-number", "0"))
    bands = [t for t in estimated.data if t.fill == "toself"]
    assert len(bands) == 2 and "estimated" in estimated.layout.title.text  # agreement and maj@k; pass@k is exact
    assert A.convergence_figure(A.convergence_of(make_run([]))).layout.height
    alone = A.convergence_figure(A.convergence_of(make_run(TEXTS), "last-number"))  # no reference: one curve
    assert [t.name for t in alone.data] == ["agreement@k"] and alone.layout.showlegend  # named on the chart
    assert alone.layout.yaxis.title.text == "probability"


# ---- beyond EXACT_UP_TO: the estimate against an exact count --------------------------------------

def exact_by_count_vectors(sizes: list[int], unanswered: int, k: int) -> tuple[float, float]:
    """agreement@k and maj@k (for the first group) by summing over how many of the k each group
    gets, weighted by the number of k-subsets that give those counts (multivariate hypergeometric)."""
    a, b, c = sizes
    total = comb(a + b + c + unanswered, k)
    agreement = majority = 0
    for x in range(a + 1):
        for y in range(b + 1):
            for z in range(c + 1):
                rest = k - x - y - z
                if 0 <= rest <= unanswered:
                    ways = comb(a, x) * comb(b, y) * comb(c, z) * comb(unanswered, rest)
                    agreement += ways * max(x, y, z)
                    majority += ways * (x > y and x > z)
    return agreement / total / k, majority / total


def test_the_estimate_beyond_twenty_samples_holds_the_exact_value():
    sizes, unanswered = [18, 12, 6], 4
    texts = ["x is 1"] * 18 + ["x is 2"] * 12 + ["x is 3"] * 6 + ["no idea"] * 4
    c = A.convergence_of(make_run(texts), "last-number", "1")
    assert c.n == 40 > A.EXACT_UP_TO and not c.exact
    assert c.agreement_at_k.exact[0] and c.agreement_at_k.exact[-1] and not any(c.agreement_at_k.exact[1:-1])
    exact = [exact_by_count_vectors(sizes, unanswered, k) for k in range(1, 41)]
    for curve, which in [(c.agreement_at_k, 0), (c.maj_at_k, 1)]:
        inside = [curve.low[k - 1] <= exact[k - 1][which] <= curve.high[k - 1] for k in range(1, 41)]
        # A 95% interval: most k hold the exact value, and none is far off.
        assert sum(inside) >= 36, (which, [k for k, ok in enumerate(inside, 1) if not ok])
        for k in range(1, 41):
            half = (curve.high[k - 1] - curve.low[k - 1]) / 2
            assert abs(curve.values[k - 1] - exact[k - 1][which]) <= 2 * half + 1e-9, (which, k)
    for k in (10, 20, 30):
        assert c.agreement_at_k.low[k - 1] <= exact[k - 1][0] <= c.agreement_at_k.high[k - 1]
        assert c.maj_at_k.low[k - 1] <= exact[k - 1][1] <= c.maj_at_k.high[k - 1]
    # The ends are known: one sample answers with p 36/40; all 40 have the largest group 18.
    assert c.agreement_at_k.at(1) == pytest.approx(36 / 40) and c.agreement_at_k.at(40) == pytest.approx(18 / 40)
    assert c.maj_at_k.at(1) == pytest.approx(18 / 40) and c.maj_at_k.at(40) == 1.0
    # Seeded: the same run gives the same curves; a reference nobody gave is never the majority.
    assert A.convergence_of(make_run(texts), "last-number", "1").to_dict() == c.to_dict()
    assert A.convergence_of(make_run(texts), "last-number", "5").maj_at_k.values == [0.0] * 40
    assert set(c.to_dict()["bands"]) == {"agreement_at_k", "maj_at_k"}


def test_256_distinct_answers_are_256_groups_of_one():
    run = make_run([f"answer {i}" for i in range(256)])
    c = A.convergence_of(run, "last-number", "3")
    # No two samples agree: the largest group of k is one sample, and k >= 2 is always a tie.
    assert c.agreement_at_k.values == pytest.approx([1 / k for k in range(1, 257)])
    assert c.maj_at_k.at(1) == pytest.approx(1 / 256) and max(c.maj_at_k.values[1:]) == 0.0


# ---- EigV, DegMat and the logprob measures ----------------------------------------------------------

def test_eigv_and_degmat_of_identical_and_disjoint_texts():
    same = A.jaccard_matrix(["The cat sat", "the CAT sat", "sat the cat"])  # word sets, lower-cased
    assert A.eigv(same) == pytest.approx(1.0) and A.degmat(same) == pytest.approx(0.0)
    disjoint = A.jaccard_matrix(["a b", "c d", "e f"])
    assert A.eigv(disjoint) == pytest.approx(3.0) and A.degmat(disjoint) == pytest.approx(1 - 1 / 3)


def test_eigv_and_degmat_of_a_partial_overlap():
    # {a, b} and {b, c}: J = 1/3. D = 4/3 on the diagonal, so D^-1/2 W D^-1/2 = (3/4) W, with eigenvalues
    # (3/4)(1 + 1/3) = 1 and (3/4)(1 - 1/3) = 1/2: EigV = 1 + 1/2. DegMat = 1 - (2 + 2/3) / 4.
    w = A.jaccard_matrix(["a b", "b c"])
    assert w[0, 1] == pytest.approx(1 / 3)
    assert A.eigv(w) == pytest.approx(1.5) and A.degmat(w) == pytest.approx(1 / 3)


def test_empty_texts():
    w = A.jaccard_matrix(["", "  ", "word"])
    assert w.tolist() == [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]  # two empty: alike; one: not
    assert A.eigv(w) == pytest.approx(2.0)
    assert A.eigv(A.jaccard_matrix([])) is None and A.degmat(A.jaccard_matrix([])) is None


def with_logprobs(run: Run, logprobs: list[list[float | None] | None]) -> Run:
    for sample, values in zip(run.samples, logprobs, strict=True):
        sample.logprobs = None if values is None else [TokenLogprob(0, v) for v in values]
    return run


def test_logprob_measures():
    run = with_logprobs(make_run(["a b c", "d", "e", "f f"]), [[-0.5, -1.0, -1.5], [-2.0], None, [-1.0, None]])
    c = A.confidence_of(run)
    assert c.sequence_logprob == [pytest.approx(-3.0), pytest.approx(-2.0), None, None]  # a missing logprob: None
    assert c.mean_nll == [pytest.approx(1.0), pytest.approx(2.0), None, None]
    assert c.perplexity == [pytest.approx(math.e), pytest.approx(math.e ** 2), None, None]
    assert c.sequence_entropy == pytest.approx((3.0 + 2.0) / 2)  # over the two samples that have them
    table = A.confidence_table(c)
    assert table.columns.tolist() == ["figure", "value", "meaning"]
    values = dict(zip(table["figure"], table["value"], strict=True))
    assert values["sequence entropy (nats)"] == 2.5 and values["mean token NLL (nats)"] == 1.5
    assert values["EigV (Jaccard)"] == 4.0  # four texts with no word in common
    raw = A.logprob_note({"logprobs_mode": "raw_logprobs"})
    assert "raw logprobs" in raw and "before temperature" in raw
    assert "the distribution the samples were drawn from" in A.logprob_note({"logprobs_mode": "processed_logprobs"})
    assert "not a probability" in A.logprob_note({"logprobs_mode": "raw_logits"})
    assert "the record does not name" in A.logprob_note({})  # a remote server's, an older bundle's
    none = A.confidence_table(A.confidence_of(make_run(["x"])))
    assert none.set_index("figure").loc["sequence entropy (nats)", "value"] is None


# ---- shared child seeds -------------------------------------------------------------------------

def test_runs_with_neighbouring_seeds_share_child_seeds():
    runs = [make_run(["t"] * 8, seed=42), make_run(["t"] * 8, seed=43), make_run(["t"] * 8, seed=1000)]
    overlaps = A.seed_overlaps(runs)
    assert overlaps == [{"a": 0, "b": 1, "shared": 7}]  # 43..49
    assert A.seed_overlap_sentence(overlaps[0]) == "runs 1 and 2 share 7 child seeds: their samples are not independent"
    assert A.seed_overlap_sentence({"a": 0, "b": 2, "shared": 1}, ["base", "greedy", "hot"]) == (
        "base and hot share 1 child seed: their samples are not independent")


def test_same_seed_runs_and_unknown_seeds():
    same = [make_run(["t"] * 8, seed=42, same_seed=True), make_run(["t"] * 8, seed=42, same_seed=True)]
    wrapper = make_run(["t"] * 8, seed=42)
    # Eight samples each of seed 42: all eight pair up. Against seeds 42..49 only one can.
    assert A.seed_overlaps(same + [wrapper]) == [{"a": 0, "b": 1, "shared": 8}, {"a": 0, "b": 2, "shared": 1},
                                                 {"a": 1, "b": 2, "shared": 1}]
    assert A.seed_overlaps([make_run(["t"] * 4, seed=None), make_run(["t"] * 4, seed=None)]) == []
    assert A.seed_overlaps([wrapper]) == [] and A.seed_overlaps([]) == []


def test_a_replay_and_the_run_it_plays_are_no_pair_of_dependent_samplings():
    source, other = make_run(["t"] * 4, seed=42), make_run(["t"] * 4, seed=43)
    source.request["request_id"] = "run-source"
    replay = make_run(["t"] * 4, seed=42)
    replay.request.update(request_id="run-replay", replay={"of": "run-source", "pace": "x4"})
    # The replay against its source: one sampling. Against another run it is its source's samples.
    assert A.seed_overlaps([source, replay, other]) == [{"a": 0, "b": 2, "shared": 3}, {"a": 1, "b": 2, "shared": 3}]
    again = make_run(["t"] * 4, seed=42)  # a second replay of the same run: that one sampling, a third time
    again.request.update(request_id="run-replay-2", replay={"of": "run-source", "pace": "recorded"})
    assert A.seed_overlaps([replay, again]) == [] and A.seed_overlaps([source, replay, again]) == []


# ---- the headline of a run ----------------------------------------------------------------------

def test_headline_and_everything_for_json():
    how_many = A.how_many_samples(make_run(TEXTS), "last-number", "7")
    # Two blocks of identical texts with no word in common: W is block-diagonal with blocks of ones,
    # D^-1/2 W D^-1/2 has eigenvalues 1, 1, 0...: EigV 2.
    assert how_many.headline() == "settled after 7 of 8 on the reference · pass@1 0.750 · pass@8 1.000 · EigV 2.00"
    assert A.how_many_samples(make_run(TEXTS), "last-number", "9").headline().startswith(
        "settled after 7 of 8 on '7', not the reference · pass@1 0.000")  # a settled majority, and a wrong one
    assert A.how_many_samples(make_run(TEXTS), "last-number").headline() == "settled after 7 of 8 · EigV 2.00"
    assert A.how_many_samples(make_run(["a", "b"])).headline() == "not settled within 2 · EigV 2.00"
    d = how_many.to_dict()
    for name in ["agreement_at_k", "pass_at_k", "maj_at_k", "settled_at", "eigv_jaccard", "degmat_jaccard",
                 "sequence_logprob", "mean_nll", "perplexity", "sequence_entropy"]:
        assert name in d, name
    assert d["sequence_logprob"] == [None] * 8 and d["sequence_entropy"] is None  # no logprobs recorded
    # 6² + 2² of the 64 pairs (i, j) are alike.
    assert d["degmat_jaccard"] == pytest.approx(1 - 40 / 64)


# ---- the command lines --------------------------------------------------------------------------

def test_analyze_prints_the_headline_and_writes_every_measure_and_the_shared_seeds(tmp_path, capsys):
    """``python app.py analyze`` (in this process, no engine): a run that carries its reference (as
    batch writes one from a line's "reference"), one given --reference, and two runs whose base
    seeds are 1 apart."""
    import json

    from playground.commands import analyze, exits

    first, second = make_run(TEXTS, seed=42), make_run(TEXTS, seed=43)
    first.request["reference"] = "7"
    path = tmp_path / "runs.jsonl"
    path.write_text(first.to_json() + "\n" + second.to_json() + "\n", encoding="utf-8")
    out = tmp_path / "measures.json"
    assert analyze.main([str(path), "--answer", "last-number", "--json", str(out)]) == exits.OK
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    assert lines[0].endswith("settled after 7 of 8 on the reference · pass@1 0.750 · pass@8 1.000 · EigV 2.00"), \
        lines[0]
    assert lines[1].endswith("settled after 7 of 8 · EigV 2.00"), lines[1]  # no reference: no pass@k
    assert "line 1 and line 2 share 7 child seeds" in printed.err
    document = json.loads(out.read_text(encoding="utf-8"))
    ids = [r["request_id"] for r in document["runs"]]  # a and b index the runs, and name them too
    assert document["seed_overlaps"] == [{"a": 0, "b": 1, "shared": 7, "a_request_id": ids[0], "b_request_id": ids[1]}]
    run = document["runs"][0]
    assert run["settled_at"] == 7 and run["pass_at_k"][0] == pytest.approx(0.75)
    assert run["eigv_jaccard"] == pytest.approx(2.0)
    assert len(run["agreement_at_k"]) == len(run["maj_at_k"]) == 8
    assert document["runs"][1]["pass_at_k"] is None

    assert analyze.main([str(path), "--answer", "last-number", "--reference", "3", "--json", str(out)]) == exits.OK
    assert json.loads(out.read_text(encoding="utf-8"))["runs"][1]["pass_at_k"][0] == pytest.approx(2 / 8)


def test_a_seed_sweep_from_count_steps_by_n_so_no_two_runs_share_a_seed():
    from playground.errors import InvalidRequest
    from playground.request import SampleRequest
    from playground.sampling.sweep_request import SweepRequest, seed_overlap_note

    sweep = SweepRequest.of(SampleRequest("p", n=8), "seed", "1:4")
    assert sweep.values == [1, 9, 17, 25] and seed_overlap_note(sweep) is None
    runs = [make_run(["t"] * 8, seed=value) for value in sweep.values]
    assert A.seed_overlaps(runs) == []
    close = SweepRequest.of(SampleRequest("p", n=8), "seed", "1 2 100")
    assert "base seeds 1 and 2 are closer than n=8" in seed_overlap_note(close)
    same = SweepRequest.of(SampleRequest("p", n=8, mode="same-seed"), "seed", "1 2 100")
    assert seed_overlap_note(same) is None, "in same-seed mode every sample uses the base seed: 1 and 2 share none"
    twice = SweepRequest.of(SampleRequest("p", n=8, mode="same-seed"), "seed", "5 5")
    assert "base seed 5 is swept twice" in (seed_overlap_note(twice) or "")
    for wrong, said in (("1:x", "got COUNT 'x'"), ("1:0", "got COUNT 0"), ("x:4", "seed must be a whole number")):
        with pytest.raises(InvalidRequest, match=said):  # COUNT named as COUNT, never as the request's n
            SweepRequest.of(SampleRequest("p", n=8), "seed", wrong)


# ---- in the report -------------------------------------------------------------------------------

def test_a_report_of_a_run_with_a_reference_says_how_many_samples_it_needs(tmp_path):
    """With a reference (the Set tab's, set on the run by the Export tab), a run's report has the
    Set tab's "How many samples do you need?": the sentence, the chart of agreement@k, pass@k and
    maj@k (in a report with charts), their table at k = 1, 2, 4, … n, and the uncertainty table.
    Without a reference, none of it; a report without charts keeps the tables."""
    from playground.analysis.report import HOW_MANY
    from playground.ui import export_tab
    from tests.test_report import check_self_contained, tables
    from tests.test_report import make_run as token_run

    read = "regex:(sea|grey)"  # sea, sea, grey, no answer: c = 2 of n = 4
    run = token_run([[1, 2, 3, 4], [1, 2, 5], [1, 6], [1, 7]], probs=[[0.5] * 4, [0.5] * 3, [0.5] * 2, [0.5] * 2])
    plain = A.run_report(run, A.set_measures_hook(read), read)
    assert HOW_MANY not in plain
    page = Path(export_tab.report_file(tmp_path, run, "regex", "(sea|grey)", "sea")).read_text(encoding="utf-8")
    assert "reference" not in run.request, "the run on screen is left as it was"
    figures = sum(i.startswith("figure-") for i in check_self_contained(page).ids)
    assert figures == sum(i.startswith("figure-") for i in check_self_contained(plain).ids) + 1
    assert f"{HOW_MANY} ({read}, against the reference “sea”)" in page
    assert "The majority did not settle within the 4 samples. pass@1 0.500, pass@4 1.000." in page
    assert "How many samples: k of the 4 drawn at random (exact)" in page  # the chart's title
    curves = next(t for t in tables(page) if t and "pass@k" in t[0])
    assert [(r["k"], r["agreement@k"], r["pass@k"], r["maj@k"]) for r in curves] == [
        ("1", "0.750", "0.500", "0.500"),  # 3 of 4 answered; 2 of 4 say sea
        ("2", "0.583", f"{at_least_one(4, 2, 2):.3f}", "0.500"),  # of 6 pairs, sea+sea agree; sea wins 3
        ("4", "0.500", "1.000", "1.000")]
    uncertainty = next(t for t in tables(page) if t and "meaning" in t[0])
    assert uncertainty[0]["figure"] == "EigV (Jaccard)"
    assert "before temperature, top-p and penalties" in page.replace("&#x27;", "'")

    both = A.comparison_report(dataclasses.replace(run, request={**run.request, "reference": "sea"}),
                               dataclasses.replace(run, request={**run.request, "request_id": "run-b"}),
                               extractor=read)
    assert both.count(HOW_MANY) == 1 and "How many samples: k of" not in both  # B has no reference; no charts
    big = Run(request={"prompt": "p", "n": 24, "reference": "1"}, status="finished",
              samples=[Sample(i, i, f"x is {i % 3}", [i], [f"x is {i % 3}"]) for i in range(24)])
    estimated = next(t for t in tables(A.run_report(big, extractor="last-number")) if t and "pass@k" in t[0])
    assert [r["k"] for r in estimated] == ["1", "2", "4", "8", "16", "24"]
    assert re.fullmatch(r"0\.\d{3} \(0\.\d{3}–0\.\d{3}\)", estimated[1]["maj@k"])  # an estimate, with its band
    assert estimated[1]["pass@k"] == f"{at_least_one(24, 8, 2):.3f}"  # pass@k is exact at every n
