"""Grouping the samples by meaning, given their sentence embeddings (one row per sample).

Semantic entropy (Kuhn et al. 2023, "Semantic Uncertainty: Linguistic Invariances for Uncertainty
Estimation in Natural Language Generation", ICLR) clusters the samples by meaning and takes the
entropy over the clusters, so that "Paris" and "It is Paris." count as one answer. The paper
decides "same meaning" by bidirectional entailment, greedily: each sample joins the first cluster
whose first member it is equivalent to, else starts a cluster. Here the same greedy pass decides
by the cosine similarity of embeddings reaching a threshold, which needs only a sentence-embedding
model. The embeddings are computed elsewhere (playground.backends.embeddings): this module is
numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from playground.analysis.answers import entropy_bits

DEFAULT_SIMILARITY = 0.85


def cosine_matrix(embeddings: np.ndarray) -> np.ndarray:
    """n x n cosine similarity of the rows; a zero row is similar to nothing (0), not even itself."""
    vectors = np.asarray(embeddings, dtype=np.float64)
    if vectors.ndim != 2:
        raise ValueError(f"embeddings must be one row per sample (2-D), got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return np.clip(unit @ unit.T, -1.0, 1.0)


def cluster_by_similarity(embeddings: np.ndarray, threshold: float = DEFAULT_SIMILARITY) -> list[int]:
    """A cluster number per row, numbered in order of first appearance: row k joins the first
    cluster whose first member has cosine similarity >= ``threshold`` with it (Kuhn et al.'s
    greedy pass), else it starts a new cluster."""
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"the similarity threshold must be between -1 and 1, got {threshold}")
    cosine = cosine_matrix(embeddings)
    leaders: list[int] = []  # the first row of each cluster
    labels = []
    for row in range(cosine.shape[0]):
        cluster = next((k for k, leader in enumerate(leaders) if cosine[row, leader] >= threshold), None)
        if cluster is None:
            leaders.append(row)
            cluster = len(leaders) - 1
        labels.append(cluster)
    return labels


@dataclass
class MeaningClusters:
    model: str
    threshold: float
    indices: list[int]  # the samples' indices, in the order of the embedding rows
    labels: list[int]  # the cluster of each, in the same order

    @property
    def clusters(self) -> list[list[int]]:
        """The sample indices in each cluster, clusters in order of first appearance."""
        found: dict[int, list[int]] = {}
        for index, label in zip(self.indices, self.labels, strict=True):
            found.setdefault(label, []).append(index)
        return [found[k] for k in sorted(found)]

    @property
    def entropy(self) -> float | None:
        """Semantic entropy in bits (the discrete estimate: cluster shares of the samples)."""
        return entropy_bits(len(c) for c in self.clusters)

    def to_dict(self) -> dict:
        return {"model": self.model, "threshold": self.threshold, "clusters": self.clusters,
                "entropy_bits": self.entropy}


def meaning_clusters(embeddings: np.ndarray, indices: list[int], model: str,
                     threshold: float = DEFAULT_SIMILARITY) -> MeaningClusters:
    """Cluster the samples ``indices`` (one embedding row each, same order) by meaning."""
    if len(indices) != len(embeddings):
        raise ValueError(f"{len(embeddings)} embeddings for {len(indices)} samples")
    return MeaningClusters(model, threshold, list(indices), cluster_by_similarity(embeddings, threshold))
