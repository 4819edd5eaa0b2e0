"""How diverse the n samples are as a set, measured on token ids.

Three measures, each with a long history in the literature on sampling from language models:

- **distinct-n** (Li et al. 2016, "A Diversity-Promoting Objective Function for Neural Conversation
  Models", NAACL): the number of distinct n-grams divided by the total number of n-grams, pooled
  over all samples. 1.0: no n-gram repeats anywhere in the set; 1/k: the set is k copies of one
  sample (that has no repeats of its own).
- **mean pairwise similarity** and its spread: for every pair of samples, the normalised Indel
  similarity 2·LCS/(|a|+|b|) (rapidfuzz; the longest common subsequence of token ids), then their
  mean, standard deviation, minimum and maximum. 1.0: all samples identical.
- **the Vendi score** (Friedman & Dieng 2023, "The Vendi Score: A Diversity Evaluation Metric for
  Machine Learning", TMLR): exp of the Shannon entropy of the eigenvalues of K/n, where K is a
  positive semi-definite similarity matrix with ones on its diagonal. Here K is the n-gram kernel
  of the paper's text experiments: the cosine similarity of the samples' bag-of-n-gram count
  vectors (n = 1 and 2). It reads as the *effective number of distinct samples*: 1 when all
  samples are the same, n when no two share an n-gram.

A long shared prefix (a prompt the model continues the same way every time) makes every sample
look alike, so each measure is also given for the text after the first divergence point: the
samples with their common prefix (the tokens all n share) cut off.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import sparse

from playground.analysis.diff import common_prefix, similarity_matrix
from playground.run import Run

DISTINCT_ORDERS = (1, 2, 3)
VENDI_ORDERS = (1, 2)  # the n-gram orders of the Vendi kernel's features
_EMPTY = ("<empty>",)  # the one feature of a sample with no token: empty samples are alike, unlike the rest


def ngrams(tokens: Sequence[int], order: int) -> list[tuple[int, ...]]:
    """Every run of ``order`` consecutive tokens, in order (none when the sample is shorter)."""
    return [tuple(tokens[k:k + order]) for k in range(len(tokens) - order + 1)]


def distinct_n(samples: Sequence[Sequence[int]], order: int) -> float | None:
    """Distinct ``order``-grams / all ``order``-grams, pooled over the samples (Li et al. 2016).

    None when the samples hold no ``order``-gram at all (all shorter than ``order``): a ratio of
    0/0 says nothing, and 0 or 1 would each claim something.
    """
    grams = [g for tokens in samples for g in ngrams(tokens, order)]
    return len(set(grams)) / len(grams) if grams else None


def pairwise_similarities(samples: Sequence[Sequence[int]]) -> np.ndarray:
    """The similarity of every pair i < j (n·(n-1)/2 values; none for one sample)."""
    matrix = similarity_matrix(samples)
    return matrix[np.triu_indices(len(samples), k=1)]


def ngram_kernel(samples: Sequence[Sequence[int]], orders: Sequence[int] = VENDI_ORDERS) -> np.ndarray:
    """The cosine similarity of bag-of-n-gram count vectors: positive semi-definite, ones on the
    diagonal (a sample too short for any n-gram counts as one 'empty' feature)."""
    bags = []
    for tokens in samples:
        bag = Counter(g for order in orders for g in ngrams(tokens, order))
        bags.append(bag or Counter([_EMPTY]))
    vocabulary: dict[tuple, int] = {}
    rows, columns, counts = [], [], []
    for row, bag in enumerate(bags):
        for gram, count in bag.items():
            rows.append(row)
            columns.append(vocabulary.setdefault(gram, len(vocabulary)))
            counts.append(count)
    # Sparse: n samples of thousands of tokens have hundreds of thousands of distinct n-grams.
    matrix = sparse.csr_matrix((np.asarray(counts, dtype=np.float64), (rows, columns)),
                               shape=(len(bags), len(vocabulary)))
    gram = (matrix @ matrix.T).toarray()
    norms = np.sqrt(np.diag(gram))
    return gram / np.outer(norms, norms) if len(bags) else gram


def vendi_score(kernel: np.ndarray) -> float | None:
    """exp(-sum(l * ln l)) over the eigenvalues l of K/n (Friedman & Dieng 2023); None for no sample.

    The eigenvalues of K/n sum to 1 (trace n / n) and are >= 0 for a PSD K, so they are a
    probability distribution; tiny negative ones from floating point are taken as 0.
    """
    n = kernel.shape[0]
    if n == 0:
        return None
    eigenvalues = np.clip(np.linalg.eigvalsh(kernel / n), 0.0, None)
    eigenvalues = eigenvalues[eigenvalues > 1e-12]
    return float(math.exp(-np.sum(eigenvalues * np.log(eigenvalues))))


@dataclass
class Diversity:
    """The diversity measures of one set of samples. None where a measure is undefined (no n-gram
    of that order; no pair with n = 1; no sample)."""

    samples: int
    tokens: int
    distinct_1: float | None
    distinct_2: float | None
    distinct_3: float | None
    similarity_mean: float | None
    similarity_std: float | None
    similarity_min: float | None
    similarity_max: float | None
    vendi: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def diversity_of(samples: Sequence[Sequence[int]]) -> Diversity:
    """Every diversity measure of a set of token-id sequences."""
    pairs = pairwise_similarities(samples)
    stats = (float(pairs.mean()), float(pairs.std()), float(pairs.min()), float(pairs.max())) if len(pairs) \
        else (None,) * 4
    return Diversity(len(samples), sum(len(tokens) for tokens in samples),
                     *(distinct_n(samples, order) for order in DISTINCT_ORDERS), *stats,
                     vendi_score(ngram_kernel(samples)))


@dataclass
class SetDiversity:
    """The measures for the whole samples, and for what follows their common prefix."""

    common_prefix: int  # tokens all n samples share: the first divergence point
    whole: Diversity
    after_divergence: Diversity

    def to_dict(self) -> dict:
        return {"common_prefix": self.common_prefix, "whole": self.whole.to_dict(),
                "after_divergence": self.after_divergence.to_dict()}


def set_diversity(run: Run) -> SetDiversity:
    """The run's diversity measures, whole and after the first divergence point.

    With n = 1 the "common prefix" is the whole sample, so nothing follows it.
    """
    shared = common_prefix(run)
    whole = [s.token_ids for s in run.samples]
    of_whole = diversity_of(whole)  # the pairs cost O(n² · length): computed again only when a prefix is cut
    return SetDiversity(shared, of_whole, diversity_of([tokens[shared:] for tokens in whole]) if shared else of_whole)
