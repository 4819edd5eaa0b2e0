"""The entropy of a token, in bits: one definition, computed here for every place that shows it.

vLLM returns the top-k logprobs and the sampled token's, not the whole distribution, so what can
be known is a lower bound. The listed tokens (the top-k and the sampled one) contribute
-sum(p log2 p) exactly. Each token not listed ranks below the top-k, so its p is at most the
smallest top-k probability p_k, and at most the residual mass r; and -p log2 p >= -p log2 m for
p <= m. So the rest contributes at least r * -log2(min(p_k, r)): the tighter of "the rest spread
below p_k" and "the rest as one outcome". Every part only undercounts: the sum is a lower bound,
never above log2 of the vocabulary.

The token wall (its colour and hover, sent as numbers: the browser derives none), the Logprobs
tab, the CSV export and the reports all read ``entropy_matrix``, which works on many positions at
once: a run streaming at a GPU's pace has thousands of new positions a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from playground.logprobs import Logprobs, TokenLogprob


def entropy_matrix(logp: np.ndarray, excluded: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bits, mass of the listed tokens, residual mass) per row. ``logp``: (positions, width) the
    listed tokens' logprobs, -inf past a row's own; ``excluded``: the listed tokens that do not
    bound the rest (the sampled token when it ranks below the top-k and its rank does not show it
    among the listed ranks: leaving it out only makes the bound more cautious)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.exp(logp)
        mass = p.sum(axis=1)
        residual = np.clip(1.0 - mass, 0.0, None)
        bits = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
        listed = np.isfinite(logp) & ~excluded
        bound = np.minimum(residual, np.where(listed, p, np.inf).min(axis=1, initial=np.inf))
        rest = np.where((residual > 1e-12) & (bound > 0), residual * -np.log2(bound), 0.0)
    return bits + rest, mass, residual


@dataclass
class Block:
    """Positions in the layout of ``entropy_matrix``: each row's listed logprobs."""

    logp: np.ndarray
    excluded: np.ndarray
    known: np.ndarray  # rows where anything was recorded

    def bits(self) -> list[float | None]:
        values = entropy_matrix(self.logp, self.excluded)[0]
        return [float(v) if k else None for v, k in zip(values, self.known)]


def of_positions(positions: Sequence[TokenLogprob | None]) -> Block:
    """TokenLogprobs of any shape (an old bundle, a remote server's, a hand-made run)."""
    rows, out = [], []
    for lp in positions:
        if lp is None:
            rows.append([])
            out.append([])
            continue
        listed = [(tid, v) for tid, v, _ in lp.top if v is not None]
        if not listed and lp.logprob is not None:
            listed = [(lp.token_id, lp.logprob)]
        inside = lp.rank is not None and lp.rank <= len(listed)
        rows.append([v for _, v in listed])
        out.append([not inside and tid == lp.token_id for tid, _ in listed])
    width = max((len(r) for r in rows), default=0) or 1
    logp = np.full((len(rows), width), -np.inf)
    excluded = np.zeros((len(rows), width), dtype=bool)
    for j, (row, ex) in enumerate(zip(rows, out)):
        logp[j, :len(row)], excluded[j, :len(ex)] = row, ex
    known = np.array([lp is not None and (lp.logprob is not None or bool(lp.top)) for lp in positions], dtype=bool)
    return Block(logp, excluded, known)


def of_arrays(sampled: np.ndarray, rank: np.ndarray, counts: np.ndarray, values: np.ndarray) -> Block:
    """Positions in ``Logprobs``' layout, many samples' at once: per position the sampled token's
    logprob and rank and how many alternatives it has; ``values``: the alternatives, in order. The
    sampled token is listed after its alternatives when its rank is below theirs."""
    m = len(counts)
    after = rank > counts  # listed after the top-k
    width = int((counts + after).max(initial=0)) or 1
    columns = np.arange(width)
    offsets = np.cumsum(counts) - counts
    take = columns < counts[:, None]
    logp = np.full((m, width), -np.inf)
    logp[take] = values[(offsets[:, None] + columns)[take]]
    at = after[:, None] & (columns == counts[:, None])
    logp[at] = np.broadcast_to(sampled[:, None], (m, width))[at]
    # "inside" when its rank is among the listed ranks: the sampled token after a top-k of k is
    # listed k+1th, so rank k+1 is inside; a lower rank is not, and it does not bound the rest.
    excluded = at & (rank > counts + 1)[:, None]
    return Block(logp, excluded, np.ones(m, dtype=bool))


def of_logprobs(lps: Logprobs, start: int = 0, stop: int | None = None) -> Block:
    """Positions ``start:stop`` of a sample's arrays."""
    stop = len(lps) if stop is None else min(stop, len(lps))
    starts = np.frombuffer(lps.starts, dtype=np.int32)[start:stop + 1]
    counts = np.diff(starts)
    values = np.frombuffer(lps.top_values, dtype=np.float32)[starts[0]:starts[-1]].astype(np.float64) \
        if len(starts) else np.empty(0)
    sampled = np.frombuffer(lps.sampled, dtype=np.float32)[start:stop].astype(np.float64)
    rank = np.frombuffer(lps.rank, dtype=np.int32)[start:stop]
    return of_arrays(sampled, rank, counts, values)


def token_entropy(lp: TokenLogprob) -> tuple[float, float, float]:
    """(entropy lower bound in bits, mass of the listed tokens, residual mass) at one position."""
    block = of_positions([lp])
    bits, mass, residual = entropy_matrix(block.logp, block.excluded)
    return float(bits[0]), float(mass[0]), float(residual[0])


def per_position(logprobs: Sequence[TokenLogprob] | None, length: int) -> tuple[list, list, list]:
    """Each of ``length`` positions' (bits, mass, residual), None where nothing was recorded."""
    if not logprobs:
        return [None] * length, [None] * length, [None] * length
    block = of_logprobs(logprobs) if isinstance(logprobs, Logprobs) else of_positions(list(logprobs))
    columns = entropy_matrix(block.logp, block.excluded)
    found = [[float(v) if k else None for v, k in zip(column, block.known)][:length] for column in columns]
    return tuple(column + [None] * (length - len(column)) for column in found)


def entropies(logprobs: Sequence[TokenLogprob] | None, length: int) -> list[float | None]:
    """Each position's bound in bits, for ``length`` positions (None where nothing was recorded)."""
    return per_position(logprobs, length)[0]
