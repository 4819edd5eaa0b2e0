"""How many samples a run needed, in one line for the command line and in full for JSON: where its
majority settled (convergence.py), pass@1 and pass@n against a reference, and EigV (confidence.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.analysis.answers import Extractor
from playground.analysis.confidence import Confidence, confidence_of
from playground.analysis.convergence import DRAWS, Convergence, convergence_of
from playground.run import Run


@dataclass
class HowMany:
    convergence: Convergence
    confidence: Confidence

    def headline(self) -> str:
        """E.g. "settled after 12 of 32 · pass@1 0.41 · pass@32 0.97 · EigV 3.20" (pass@k only with a
        reference; pass@n only when it differs from pass@1, i.e. n > 1)."""
        c = self.convergence
        if not c.n:
            return "no samples"
        settled = c.settled.at
        parts = [f"settled after {settled} of {c.n}" if settled is not None else f"not settled within {c.n}"]
        if c.pass_at_k is not None:
            parts += [f"pass@{k} {c.pass_at_k.at(k):.2f}" for k in sorted({1, c.n})]
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


def how_many_headline(run: Run, extractor: Extractor | str | None = None, reference: str | None = None) -> str:
    return how_many_samples(run, extractor, reference).headline()
