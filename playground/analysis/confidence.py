"""How uncertain the model was, read from the set of samples: the black-box measures of Lin et al.
2023 ("Generating with Confidence: Uncertainty Quantification for Black-box Large Language
Models", TMLR) on the samples' texts, and, when the run has logprobs, the white-box ones on the
samples' probabilities.

Black box: W is the pairwise Jaccard similarity of the samples' sets of words (lower-cased,
split at whitespace), a graph whose edges say how alike two samples are. Two empty texts are
identical (1.0); an empty text and one with words share nothing (0.0). W_ii = 1.

- **EigV** = sum over the eigenvalues l of the normalised Laplacian I - D^-1/2 W D^-1/2 (D: the
  row sums of W) of max(0, 1 - l): about the number of clusters of alike samples, 1 when all
  samples say the same words, n when no two share a word.
- **DegMat** = 1 - sum(W) / n^2: 0 when all samples are alike, 1 - 1/n when none share a word.

White box, from the sampled tokens' logprobs: a sample's sequence log-probability (the sum), its
mean token negative log-likelihood, and its perplexity exp(mean NLL); and the set's Monte-Carlo
estimate of the sequence entropy, -mean(sequence log-probability) over the samples, in nats
(Malinin & Gales 2021, "Uncertainty Estimation in Autoregressive Structured Prediction", ICLR).
vLLM returns the model's raw logprobs by default, before temperature, top-p and penalties, so
these describe the model rather than the distribution the samples were drawn from:
``logprob_note`` says which the run's engine returned (its ``--logprobs-mode``) wherever a
probability is shown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from playground.run import Run, Sample
from playground.text import fold

LOGPROB_NOTES = {
    "raw_logprobs": ("Log-probabilities are vLLM's raw logprobs (its default): the model's distribution before "
                     "temperature, top-p and penalties, not the distribution the samples were drawn from."),
    "processed_logprobs": ("Log-probabilities are after temperature, top-p, top-k, min-p and penalties (the "
                           "engine's --logprobs-mode processed_logprobs): the distribution the samples were drawn "
                           "from."),
}


def probabilities_note(*runs: Run) -> str:
    """``logprob_note`` of the first of ``runs`` that recorded logprobs ("" when none did): said
    under a figure of probabilities that several runs share (a sweep's chart, a comparison)."""
    with_logprobs = [run for run in runs if any(s.logprobs for s in run.samples)]
    return logprob_note(with_logprobs[0].engine) if with_logprobs else ""


def logprob_note(engine: dict | None) -> str:
    """What a probability shown of a run is, from its engine's ``logprobs_mode`` (a record's
    ``run.engine``): the model's own (vLLM's default), the one sampled from, or no probability at
    all (logits); a record that does not say (a remote server, an older bundle) is said so."""
    mode = (engine or {}).get("logprobs_mode")
    if mode in LOGPROB_NOTES:
        return LOGPROB_NOTES[mode]
    if mode is not None:
        return (f"The engine returned {mode.replace('_', ' ')} (--logprobs-mode {mode}), not log-probabilities: "
                "each p shown is exp of that value, not a probability.")
    return ("Log-probabilities are as the engine reported them, which the record does not name: vLLM's default "
            "(raw_logprobs) is the model's distribution before temperature, top-p and penalties, not the "
            "distribution the samples were drawn from.")
CONFIDENCE_COLUMNS = ["figure", "value", "meaning"]


def word_set(text: str) -> frozenset[str]:
    return frozenset(fold(text).split())


def jaccard_matrix(texts: Sequence[str]) -> np.ndarray:
    """n x n Jaccard similarity of the texts' word sets; two empty texts 1.0, one empty 0.0."""
    words = [word_set(t or "") for t in texts]
    vocabulary: dict[str, int] = {}
    rows, columns = [], []
    for row, found in enumerate(words):
        for word in found:
            rows.append(row)
            columns.append(vocabulary.setdefault(word, len(vocabulary)))
    # Sparse word incidence: X X^T counts the shared words of every pair at once.
    incidence = sparse.csr_matrix((np.ones(len(rows)), (rows, columns)), shape=(len(words), len(vocabulary)))
    shared = (incidence @ incidence.T).toarray()
    sizes = np.array([len(found) for found in words], dtype=np.float64)
    union = sizes[:, None] + sizes[None, :] - shared
    matrix = np.divide(shared, union, out=np.ones_like(shared), where=union > 0)  # union 0: both empty
    np.fill_diagonal(matrix, 1.0)
    return matrix


def eigv(similarity: np.ndarray) -> float | None:
    """sum(max(0, 1 - l)) over the eigenvalues l of I - D^-1/2 W D^-1/2; None for no sample.

    1 - l are the eigenvalues of D^-1/2 W D^-1/2, which is symmetric: eigvalsh. D > 0 because W
    has ones on its diagonal.
    """
    if similarity.shape[0] == 0:
        return None
    scale = 1.0 / np.sqrt(similarity.sum(axis=1))
    eigenvalues = np.linalg.eigvalsh(similarity * np.outer(scale, scale))
    return float(np.clip(eigenvalues, 0.0, None).sum())


def degmat(similarity: np.ndarray) -> float | None:
    """1 - sum(W) / n^2; None for no sample."""
    n = similarity.shape[0]
    return float(1.0 - similarity.sum() / (n * n)) if n else None


@dataclass(frozen=True)
class SequenceLogprob:
    """One sample's measures from its sampled tokens' logprobs."""

    logprob: float  # the sum: log p(sample | prompt)
    mean_nll: float  # -logprob / tokens
    perplexity: float  # exp(mean_nll)


def sequence_logprob(sample: Sample) -> SequenceLogprob | None:
    """None when the sample has no logprobs, or a token lacks one (a partial sum would flatter it)."""
    values = [lp.logprob for lp in sample.logprobs or []]
    if not values or any(v is None for v in values):
        return None
    total = float(sum(values))
    mean_nll = -total / len(values)
    return SequenceLogprob(total, mean_nll, math.exp(mean_nll))


@dataclass
class Confidence:
    """The uncertainty measures of one run; per-sample lists in ``samples`` order."""

    samples: list[int]  # sample indices
    eigv_jaccard: float | None
    degmat_jaccard: float | None
    sequence_logprob: list[float | None]
    mean_nll: list[float | None]
    perplexity: list[float | None]
    sequence_entropy: float | None  # nats, over the samples with logprobs; None when none has them

    @property
    def with_logprobs(self) -> int:
        return sum(v is not None for v in self.sequence_logprob)

    def to_dict(self) -> dict:
        return {"samples": self.samples, "eigv_jaccard": self.eigv_jaccard, "degmat_jaccard": self.degmat_jaccard,
                "sequence_logprob": self.sequence_logprob, "mean_nll": self.mean_nll,
                "perplexity": self.perplexity, "sequence_entropy": self.sequence_entropy}


def confidence_of(run: Run) -> Confidence:
    """The run's uncertainty measures, samples in index order."""
    samples = sorted(run.samples, key=lambda s: s.index)
    similarity = jaccard_matrix([s.text for s in samples])
    per_sample = [sequence_logprob(s) for s in samples]
    known = [f.logprob for f in per_sample if f is not None]
    return Confidence(
        [s.index for s in samples], eigv(similarity), degmat(similarity),
        [f.logprob if f else None for f in per_sample], [f.mean_nll if f else None for f in per_sample],
        [f.perplexity if f else None for f in per_sample], -float(np.mean(known)) if known else None,
    )


def confidence_table(c: Confidence, engine: dict | None = None) -> pd.DataFrame:
    """One row per measure for people, in the columns figure, value (rounded; empty when undefined) and meaning;
    with logprobs, a last row says what they are (``logprob_note`` of the run's ``engine``)."""
    nll = [v for v in c.mean_nll if v is not None]
    perplexity = [v for v in c.perplexity if v is not None]
    over = f"over the {c.with_logprobs} of {len(c.samples)} samples with logprobs"
    rows = [
        ("EigV (Jaccard)", c.eigv_jaccard,
         f"about how many distinct answers the samples give, by their words: 1 all alike, {len(c.samples)} none alike"),
        ("DegMat (Jaccard)", c.degmat_jaccard,
         "how unlike the samples' words are on average: 0 all alike, near 1 none alike"),
        ("sequence entropy (nats)", c.sequence_entropy,
         f"minus the mean log-probability of a whole sample, {over}: higher, less sure"),
        ("mean token NLL (nats)", float(np.mean(nll)) if nll else None,
         f"a token's negative log-likelihood, averaged per sample then {over}"),
        ("median perplexity", float(np.median(perplexity)) if perplexity else None,
         "the median of the samples' exp(mean token NLL) (of the two middle samples' for an even count): "
         "the model's effective choices per token"),
    ]
    if c.with_logprobs:
        rows.append(("(the log-probabilities)", None, logprob_note(engine)))
    return pd.DataFrame([{"figure": name, "value": None if value is None else round(value, 3), "meaning": meaning}
                         for name, value, meaning in rows], columns=CONFIDENCE_COLUMNS, dtype=object)
