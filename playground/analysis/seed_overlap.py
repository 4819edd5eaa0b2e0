"""Runs that share child seeds are not independent sets of samples.

Sample i of a run is seeded seed + i, so two runs whose base seeds are close draw some of the
same samples: runs with seeds 42 and 43 at n = 8 share seeds 43..49, seven of their eight
samples. Pooling such runs, or comparing them as if independent, counts those samples twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from playground.run import Run


def seed_overlaps(runs: Sequence[Run]) -> list[dict[str, int]]:
    """Every pair of runs (positions a < b in ``runs``) with shared child seeds, as
    {"a": a, "b": b, "shared": count}.

    ``shared`` is how many samples of one run can be paired, one to one, with a sample of the other
    that has the same seed (per seed, the smaller of its two counts): two same-seed runs of n
    samples with one seed share n. Samples with no recorded seed match nothing.
    """
    seeds = [Counter(s.seed for s in run.samples if s.seed is not None) for run in runs]
    overlaps = []
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            shared = sum((seeds[a] & seeds[b]).values())
            if shared:
                overlaps.append({"a": a, "b": b, "shared": shared})
    return overlaps


def seed_overlap_sentence(overlap: dict[str, int], names: Sequence[str] | None = None) -> str:
    """One line for people; runs are numbered from 1 unless ``names`` (by position) says otherwise."""
    a, b, shared = overlap["a"], overlap["b"], overlap["shared"]
    both = f"{names[a]} and {names[b]}" if names else f"runs {a + 1} and {b + 1}"
    seeds = "child seed" if shared == 1 else "child seeds"
    return f"{both} share {shared} {seeds}: their samples are not independent"
