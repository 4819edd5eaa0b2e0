"""Comparing the matrix's cells: which gave the same final token ids, where the others first
diverge, and whether their batches could have differed (seeded results depend on the batch, so
a divergence is reported with what is known, but it is not a contract failure)."""

from __future__ import annotations

from collections.abc import Sequence

from playground.analysis import first_divergence
from playground.qa.cells import Cell, Comparison


def compare(cells: Sequence[Cell]) -> tuple[list[list[str]], list[Comparison]]:
    """Group the cells that ran by identical final token ids; for each pair of groups, name the
    first diverging sample and token, preferring two cells on one engine (the telling pair)."""
    ran = [c for c in cells if c.run is not None]
    groups: list[list[Cell]] = []
    for cell in ran:
        ids = _ids(cell)
        group = next((g for g in groups if _ids(g[0]) == ids), None)
        if group is None:
            groups.append([cell])
        else:
            group.append(cell)
    comparisons = []
    for i, first in enumerate(groups):
        for second in groups[i + 1:]:
            pairs = [(a, b) for a in first for b in second]
            a, b = next(((a, b) for a, b in pairs if a.engine == b.engine), pairs[0])
            comparisons.append(_compare(a, b))
    return [[c.label for c in g] for g in groups], comparisons


def _ids(cell: Cell) -> list[list[int]]:
    return [list(s.token_ids) for s in cell.run.samples]


def _compare(a: Cell, b: Cell) -> Comparison:
    ids_a, ids_b = _ids(a), _ids(b)
    for sample, (x, y) in enumerate(zip(ids_a, ids_b)):
        k = first_divergence(x, y)
        if k is not None:
            break
    else:  # different sample counts
        sample, x, y = min(len(ids_a), len(ids_b)), [], []
        k = 0
    return Comparison(a.label, b.label, sample, k, x[k] if k < len(x) else None, y[k] if k < len(y) else None,
                      batch_note(a, b))


def batch_note(a: Cell, b: Cell) -> str:
    """Whether the two cells' batch composition differed, as far as the record can tell."""
    if a.engine != b.engine:
        alone = " Both ran alone on their engines." if a.alone and b.alone else ""
        return (f"They ran on different engines ({a.engine} vs {b.engine}), each with a batch of its own, so "
                f"batch composition is not comparable between them.{alone}")
    if a.alone and b.alone:
        return (f"Same engine ({a.engine}), both alone (no other request in flight at start or end): batch "
                "composition did not differ, unless the engine core stepped before all n children arrived.")
    return (f"Batch composition differed: other requests were in flight on {a.engine} "
            f"({a.label}: {a.in_flight()}; {b.label}: {b.in_flight()}).")
