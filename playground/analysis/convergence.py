"""How many samples a prompt needs: the set's measures against k, the number of samples drawn.

For every k = 1..n, what k samples drawn at random from the n would have given:

- **agreement@k**: the expected vote share of the majority answer among the k, E[largest answer
  group / k]. Samples with no answer are among the k but in no group, as in the vote share.
- **pass@k** (with a reference answer): the chance that at least one of the k gives the reference,
  by the unbiased estimator 1 - C(n-c, k) / C(n, k) of Chen et al. 2021 ("Evaluating Large
  Language Models Trained on Code"), c the samples that gave it. A closed form: exact for every n.
- **maj@k** (with a reference answer): the chance that the majority answer of the k is the
  reference. A tie for the most common answer is no majority, so the measure does not depend on the
  order of the samples.

agreement@k and maj@k are exact (by counting subsets) up to EXACT_UP_TO samples, and estimated
beyond from DRAWS random k-subsets per k (exact still at k = 1 and k = n, where they are plain
shares), with a 95% interval of the estimate at each k (one set of draws serves every k, so the errors at
nearby k move together): mean ± 1.96 standard errors for agreement@k,
Wilson's interval for maj@k, a share of successes.

**settled_at** is the stopping rule of Adaptive-Consistency (Aggarwal et al. 2023, "Let's Sample
Step by Step: Adaptive-Consistency for Efficient Reasoning and Coding with LLMs", EMNLP): read the
samples in order and stop at the first k where, with v1 and v2 the counts of the two most common
answers so far, P(p > 1/2) >= 0.95 for p ~ Beta(v1 + 1, v2 + 1): p is the leader's share of the
votes between the two, so the rule stops once the leader's lead is unlikely to be chance. It says
after how many samples drawing more stopped being worth it for the majority vote.

**how_many_samples** puts all this beside the set's uncertainty (confidence.py, EigV and the logprob
measures): one line for the command line, everything for JSON.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np
import plotly.graph_objects as go
from scipy.special import bdtr

from playground.analysis.answers import Extractor, group_answers, parse_extractor
from playground.analysis.confidence import Confidence, confidence_of
from playground.analysis.display import message_figure, truncate
from playground.run import Run

EXACT_UP_TO = 20  # samples: beyond, agreement@k and maj@k are estimated
DRAWS = 4000  # random k-subsets per k for the estimate
CONFIDENCE = 0.95  # of the stopping rule
_Z = 1.959964  # the standard normal's 97.5% quantile: a 95% interval
_COLORS = {"agreement_at_k": "#2563eb", "pass_at_k": "#16a34a", "maj_at_k": "#ea580c"}
CURVE_LABELS = {"agreement_at_k": "agreement@k", "pass_at_k": "pass@k", "maj_at_k": "maj@k"}


@dataclass
class Curve:
    """One measure for k = 1..n: ``values[k - 1]`` lies in [low, high], a 95% interval of the
    estimate where the value is estimated, the value itself where it is exact."""

    values: list[float]
    low: list[float]
    high: list[float]
    exact: list[bool]

    def at(self, k: int) -> float:
        return self.values[k - 1]

    @property
    def is_exact(self) -> bool:
        return all(self.exact)


@dataclass(frozen=True)
class Settled:
    """Where the stopping rule stopped: after ``at`` of the ``samples`` read (None: not within
    them), with ``answer`` the majority answer then."""

    at: int | None
    answer: str | None
    samples: int
    confidence: float = CONFIDENCE


def read_reference(reference: str | None, extractor: Extractor | str | None = None) -> str | None:
    """The reference answer as the samples' answers are read: by the same extractor, or as typed
    (stripped) when the extractor finds nothing in it, so "42" matches under any extractor.
    None for no reference."""
    if reference is None or not str(reference).strip():
        return None
    extractor = extractor if isinstance(extractor, Extractor) else parse_extractor(extractor)
    return extractor(str(reference)) or str(reference).strip()


def with_reference(run: Run, reference: str | None) -> Run:
    """The run with ``reference`` as its record's reference answer (pass@k and maj@k read it
    there): a copy, the run itself left as it was; the run itself when none is given (blank)."""
    reference = (reference or "").strip()
    return dataclasses.replace(run, request={**run.request, "reference": reference}) if reference else run


def pass_at_k(answers: Sequence[str | None], reference: str) -> Curve:
    """1 - C(n-c, k) / C(n, k) for k = 1..n, c the answers equal to ``reference`` (read already).

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), the stable product Chen et al. give: C(n, k)
    overflows a float long before n = 1000.
    """
    n = len(answers)
    correct = sum(1 for a in answers if a is not None and a == reference)
    values = []
    for k in range(1, n + 1):
        values.append(1.0 if n - correct < k else 1.0 - math.prod(1.0 - k / i for i in range(n - correct + 1, n + 1)))
    return Curve(values, list(values), list(values), [True] * n)


def agreement_at_k(answers: Sequence[str | None], *, draws: int = DRAWS, seed: int = 0,
                   exact_up_to: int = EXACT_UP_TO) -> Curve:
    """E[largest answer group among k random samples / k] for k = 1..n (None: no answer)."""
    return _curves(answers, None, draws, seed, exact_up_to)[0]


def maj_at_k(answers: Sequence[str | None], reference: str, *, draws: int = DRAWS, seed: int = 0,
             exact_up_to: int = EXACT_UP_TO) -> Curve:
    """P(the majority answer of k random samples is ``reference``, read already) for k = 1..n; a
    tie for the most common answer is no majority."""
    return _curves(answers, reference, draws, seed, exact_up_to)[1]


def settle_probability(leader: int, runner_up: int) -> Fraction:
    """P(p > 1/2) for p ~ Beta(leader + 1, runner_up + 1), exactly.

    For integer parameters the Beta's distribution function is a binomial tail, so
    P(p > 1/2) = P(Binomial(leader + runner_up + 1, 1/2) <= leader): integers, no special function.
    """
    trials = leader + runner_up + 1
    return Fraction(sum(comb(trials, j) for j in range(leader + 1)), 2 ** trials)


def settled_at(answers: Sequence[str | None], confidence: float = CONFIDENCE) -> Settled:
    """The stopping rule over the answers in sample order (None: no answer, no vote).

    Takes any prefix, so a caller can pass the answers of the samples finished so far while a run
    streams, and ask again as more finish.
    """
    votes: Counter[str] = Counter()
    for k, answer in enumerate(answers, 1):
        if answer is None:
            continue  # the counts did not move: the rule cannot newly hold
        votes[answer] += 1
        top = votes.most_common(2)
        runner_up = top[1][1] if len(top) > 1 else 0
        if top[0][1] > runner_up and _holds(top[0][1], runner_up, confidence):  # a tie has P = 1/2
            return Settled(k, top[0][0], len(answers), confidence)
    return Settled(None, None, len(answers), confidence)


def _holds(leader: int, runner_up: int, confidence: float) -> bool:
    """settle_probability >= confidence, decided in floating point (the binomial distribution
    function, accurate to ~1e-14) unless that is within 1e-9 of the line, then in integers: exact
    either way, without summing thousands of big binomial coefficients at every sample of a long run."""
    close = float(bdtr(leader, leader + runner_up + 1, 0.5))
    if abs(close - confidence) > 1e-9:
        return close > confidence
    return settle_probability(leader, runner_up) >= Fraction(str(confidence))  # 0.95 exactly, not its binary neighbour


def settled_sentence(settled: Settled, n: int | None = None, reference: str | None = None) -> str:
    """One line for people; ``n``: the run's samples, when ``settled`` read only the first few;
    ``reference``: the right answer as read, when there is one (then it says whether the majority
    settled on it: a settled majority is no right answer by itself)."""
    total = n if n is not None else settled.samples
    if settled.at is not None:
        return f"the majority was settled after {settled.at} of {total} samples{on_reference(settled, reference)}"
    if total != settled.samples:
        return f"the majority did not settle within the first {settled.samples} of {total} samples"
    return f"the majority did not settle within the {settled.samples} samples"


def on_reference(settled: Settled, reference: str | None) -> str:
    """" on the reference", " on '23', not the reference", or "" (not settled, or no reference)."""
    if settled.at is None or reference is None:
        return ""
    return (" on the reference" if settled.answer == reference else
            f" on {truncate(str(settled.answer), 40)!r}, not the reference")


def settled_cell(at: int | float | None, n: int) -> int | str:
    """Where the majority settled, in a table for people: the number of samples it took, or "not
    within n" (``at`` None or NaN, as a table holds a missing number), not a blank that reads as
    missing data. Machine outputs keep the number or None (null: not settled within n)."""
    if at is None or (isinstance(at, float) and math.isnan(at)):
        return f"not within {n}"
    return int(at)


@dataclass
class Convergence:
    """The curves and the stopping rule of one run, under one extractor and reference."""

    n: int
    extractor: str
    reference: str | None  # as read by the extractor
    answers: list[str | None]  # in sample order
    agreement_at_k: Curve
    pass_at_k: Curve | None  # None without a reference
    maj_at_k: Curve | None  # None without a reference
    settled: Settled
    draws: int = DRAWS
    seed: int = 0

    @property
    def exact(self) -> bool:
        return all(c.is_exact for c in self.curves().values())

    def curves(self) -> dict[str, Curve]:
        """The curves present, by their names in ``to_dict``."""
        named = {"agreement_at_k": self.agreement_at_k, "pass_at_k": self.pass_at_k, "maj_at_k": self.maj_at_k}
        return {name: curve for name, curve in named.items() if curve is not None}

    def to_dict(self) -> dict:
        """The curves as lists over k = 1..n (pass and maj None without a reference), the stopping
        rule (``settled_at`` None and ``settled_answer`` None: not settled within the n samples), and,
        for estimated curves, their 95% bands."""
        bands = {name: {"low": c.low, "high": c.high} for name, c in self.curves().items() if not c.is_exact}
        return {
            "n": self.n, "extractor": self.extractor, "reference": self.reference,
            "agreement_at_k": self.agreement_at_k.values,
            "pass_at_k": self.pass_at_k.values if self.pass_at_k else None,
            "maj_at_k": self.maj_at_k.values if self.maj_at_k else None,
            "settled_at": self.settled.at, "settled_answer": self.settled.answer,
            "exact": self.exact, "draws": None if self.exact else self.draws, "bands": bands,
        }


def convergence_of(run: Run, extractor: Extractor | str | None = None, reference: str | None = None, *,
                   draws: int = DRAWS, seed: int = 0, exact_up_to: int = EXACT_UP_TO) -> Convergence:
    """The run's curves against k and where its majority settled. ``seed`` seeds the random
    subsets of the estimate, so the same run gives the same curves."""
    extractor = extractor if isinstance(extractor, Extractor) else parse_extractor(extractor)
    grouped = group_answers(run, extractor)
    answers = [grouped.answers[s.index] for s in sorted(run.samples, key=lambda s: s.index)]
    wanted = read_reference(reference, extractor)
    agreement, majority = _curves(answers, wanted, draws, seed, exact_up_to)
    passes = pass_at_k(answers, wanted) if wanted is not None else None
    return Convergence(run.n, extractor.spec, wanted, answers, agreement, passes, majority, settled_at(answers),
                       draws, seed)


def convergence_figure(c: Convergence) -> go.Figure:
    """The curves against k, an estimate's 95% band as a filled area, and a line where the
    majority settled."""
    title = "How many samples"
    if not c.n:
        return message_figure(title, "No samples.")
    ks = list(range(1, c.n + 1))
    fig = go.Figure()
    for name, curve in c.curves().items():
        color = _COLORS[name]
        if not curve.is_exact:
            fig.add_trace(go.Scatter(
                x=ks + ks[::-1], y=curve.high + curve.low[::-1], fill="toself", fillcolor=_faint(color),
                line={"width": 0}, hoverinfo="skip", showlegend=False, name=f"{CURVE_LABELS[name]} 95% band"))
        fig.add_trace(go.Scatter(x=ks, y=curve.values, mode="lines+markers" if c.n <= 40 else "lines",
                                 name=CURVE_LABELS[name], line={"color": color},
                                 hovertemplate=f"{CURVE_LABELS[name]}: %{{y:.3f}} at k=%{{x}}<extra></extra>"))
    if c.settled.at is not None:
        fig.add_vline(x=c.settled.at, line_dash="dot", line_color="#6b7280",
                      annotation_text=f"settled after {c.settled.at}", annotation_position="top left")
    how = "exact" if c.exact else f"estimated from {c.draws} draws, bands: 95% at each k"
    fig.update_layout(title=f"{title}: k of the {c.n} drawn at random ({how})", height=400,
                      xaxis_title="k (samples drawn)", yaxis={"title": "probability", "range": [0, 1.04]},
                      showlegend=True,  # a single curve (no reference) is named too, not only in its hover
                      legend={"orientation": "h", "y": -0.2})
    return fig


@dataclass
class HowMany:
    convergence: Convergence
    confidence: Confidence

    def headline(self) -> str:
        """E.g. "settled after 12 of 32 on the reference · pass@1 0.406 · pass@32 0.969 · EigV 3.20"
        (with a reference: whether the majority settled on it, and pass@k; pass@n only when it
        differs from pass@1, i.e. n > 1)."""
        c = self.convergence
        if not c.n:
            return "no samples"
        settled = c.settled.at
        parts = [f"settled after {settled} of {c.n}" if settled is not None else f"not settled within {c.n}"]
        parts[0] += on_reference(c.settled, c.reference)
        if c.pass_at_k is not None:
            parts += [f"pass@{k} {c.pass_at_k.at(k):.3f}" for k in sorted({1, c.n})]
        if self.confidence.eigv_jaccard is not None:
            parts.append(f"EigV {self.confidence.eigv_jaccard:.2f}")
        return " · ".join(parts)

    def to_dict(self) -> dict:
        """Everything, for JSON: agreement_at_k, pass_at_k, maj_at_k (lists over k = 1..n),
        settled_at, eigv_jaccard, degmat_jaccard, the per-sample sequence_logprob, mean_nll and
        perplexity (in ``samples`` order) and the set's sequence_entropy, with what they were
        computed from (n, extractor, reference, exact or estimated)."""
        return self.convergence.to_dict() | self.confidence.to_dict()


def how_many_samples(run: Run, extractor: Extractor | str | None = None, reference: str | None = None, *,
                     draws: int = DRAWS, seed: int = 0) -> HowMany:
    return HowMany(convergence_of(run, extractor, reference, draws=draws, seed=seed), confidence_of(run))


# ---- computing the curves -----------------------------------------------------------------------

def _curves(answers: Sequence[str | None], reference: str | None, draws: int, seed: int,
            exact_up_to: int) -> tuple[Curve, Curve | None]:
    """agreement@k and (with a reference) maj@k, exact up to ``exact_up_to`` samples, else estimated."""
    n = len(answers)
    sizes = Counter(a for a in answers if a is not None)
    unanswered = n - sum(sizes.values())
    if n <= exact_up_to:
        majority = None
        if reference is not None:
            others = [size for answer, size in sizes.items() if answer != reference]
            majority = _exact_curve(_exact_majority(sizes.get(reference, 0), others, unanswered))
        return _exact_curve(_exact_agreement(list(sizes.values()), unanswered)), majority
    return _estimated(answers, sizes, reference, draws, seed)


def _exact_curve(values: list[float]) -> Curve:
    return Curve(values, list(values), list(values), [True] * len(values))


def _times(a: list[int], b: list[int]) -> list[int]:
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def _capped_subsets(sizes: list[int], unanswered: int, cap: int) -> list[int]:
    """Coefficient k: the number of k-subsets of the samples in which no answer group has more than
    ``cap`` samples (samples with no answer: any number). The product over the groups of the
    polynomials sum_{x <= cap} C(size, x) z^x, times (1 + z)^unanswered."""
    poly = [comb(unanswered, x) for x in range(unanswered + 1)]
    for size in sizes:
        poly = _times(poly, [comb(size, x) for x in range(min(size, cap) + 1)])
    return poly


def _coefficient(poly: list[int], k: int) -> int:
    return poly[k] if 0 <= k < len(poly) else 0


def _exact_agreement(sizes: list[int], unanswered: int) -> list[float]:
    """E[largest group among k] / k for k = 1..n, with E[max] = sum_{t >= 0} P(max > t)."""
    n = sum(sizes) + unanswered
    capped = [_capped_subsets(sizes, unanswered, t) for t in range(max(sizes, default=0))]
    return [float(Fraction(sum(comb(n, k) - _coefficient(poly, k) for poly in capped), comb(n, k) * k))
            for k in range(1, n + 1)]


def _exact_majority(size: int, others: list[int], unanswered: int) -> list[float]:
    """P(the reference's group, ``size`` samples, has more of the k than any other group) for
    k = 1..n: the sum over x of C(size, x) times the number of (k - x)-subsets of the other samples
    in which every other group has fewer than x."""
    n = size + sum(others) + unanswered
    below = {x: _capped_subsets(others, unanswered, x - 1) for x in range(1, size + 1)}
    return [float(Fraction(sum(comb(size, x) * _coefficient(below[x], k - x) for x in range(1, min(size, k) + 1)),
                           comb(n, k))) for k in range(1, n + 1)]


def _estimated(answers: Sequence[str | None], sizes: Counter, reference: str | None, draws: int,
               seed: int) -> tuple[Curve, Curve | None]:
    """Both curves from ``draws`` random permutations of the samples: the first k of a permutation
    are a uniform random k-subset. Each permutation's group counts grow by one sample per k, so its
    largest count (and for maj@k, its leader and how many groups share the lead) is updated, not
    recounted."""
    n = len(answers)
    label = {answer: number for number, answer in enumerate(sizes)}
    groups = len(label)  # column ``groups`` counts the samples with no answer, and is never a leader
    labels = np.array([groups if a is None else label[a] for a in answers], dtype=np.int32)
    rng = np.random.default_rng(seed)
    drawn = labels[rng.permuted(np.tile(np.arange(n), (draws, 1)), axis=1)]
    rows = np.arange(draws)
    counts = np.zeros((draws, groups + 1), dtype=np.int32)
    largest = np.zeros(draws, dtype=np.int64)
    leader = np.full(draws, -1, dtype=np.int64)
    sharing = np.zeros(draws, dtype=np.int64)  # groups whose count equals the largest
    wanted = label.get(reference, -2) if reference is not None else None
    agree, agree_sd, wins = np.zeros(n), np.zeros(n), np.zeros(n)
    for k in range(1, n + 1):
        column = drawn[:, k - 1]
        counts[rows, column] += 1
        count = counts[rows, column]
        answered = column < groups
        ahead = answered & (count > largest)
        level = answered & (count == largest)
        sharing = np.where(ahead, 1, np.where(level, sharing + 1, sharing))
        leader = np.where(ahead, column, leader)
        largest = np.where(ahead, count, largest)
        share = largest / k
        agree[k - 1], agree_sd[k - 1] = share.mean(), share.std(ddof=1) if draws > 1 else 0.0
        if wanted is not None:
            wins[k - 1] = np.count_nonzero((leader == wanted) & (sharing == 1))
    half = _Z * agree_sd / math.sqrt(draws)
    answered_share = float(np.count_nonzero(labels < groups)) / n
    largest_share = max(sizes.values(), default=0) / n
    agreement = _banded(agree, agree - half, agree + half, {1: answered_share, n: largest_share})
    if wanted is None:
        return agreement, None
    if wanted == -2:  # no sample gave the reference: it is never the majority
        return agreement, _exact_curve([0.0] * n)
    p = wins / draws
    low, high = _wilson(p, draws)
    size = sizes[reference]
    whole = 1.0 if all(size > other for answer, other in sizes.items() if answer != reference) else 0.0
    return agreement, _banded(p, low, high, {1: size / n, n: whole})


def _banded(values: np.ndarray, low: np.ndarray, high: np.ndarray, known: dict[int, float]) -> Curve:
    """An estimated curve, with the values known exactly (one sample; all n) put in."""
    curve = Curve([float(v) for v in values], [float(max(0.0, v)) for v in low], [float(min(1.0, v)) for v in high],
                  [False] * len(values))
    for k, value in known.items():
        curve.values[k - 1] = curve.low[k - 1] = curve.high[k - 1] = value
        curve.exact[k - 1] = True
    return curve


def _wilson(p: np.ndarray, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's 95% interval for a share of successes: unlike p ± z·sd it does not shrink to a
    point when no draw (or every draw) succeeded."""
    z2 = _Z * _Z
    centre = (p + z2 / (2 * draws)) / (1 + z2 / draws)
    half = _Z * np.sqrt(p * (1 - p) / draws + z2 / (4 * draws * draws)) / (1 + z2 / draws)
    # Where no draw (every draw) succeeded the interval reaches 0 (1) exactly; rounding would miss it.
    return np.where(p == 0, 0.0, centre - half), np.where(p == 1, 1.0, centre + half)


def _faint(color: str) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, 0.18)"
