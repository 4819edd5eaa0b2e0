"""The QA matrix: one request under every output_kind × every path, each cell checked against the
contract of vLLM's n > 1 output kinds, then the cells' tokens compared.

A tester used to run CUMULATIVE, DELTA and FINAL_ONLY one at a time and compare by eye; this runs
all of them through our fan-out ("wrapper") and vLLM's own ParentRequest ("native") on the async
front end (AsyncLLM), the sync front end (LLMEngine) and, when asked, a vLLM server, and states a
verdict per cell.

The cells run one at a time, so each runs alone on its engine unless someone else is using it;
every cell records how many requests were in flight on its engine when it started and when it
ended, so a divergence between two cells can say whether their batches differed. Seeded results
depend on the batch (floating-point order), so a divergence is reported, with its first token,
but it is not a contract failure.

"Final" is re-derived here, not taken from the run recorder: a DELTA cell's concatenated pieces
and a CUMULATIVE cell's last values must equal the same path's FINAL_ONLY cell, when both ran
alone on the engine (otherwise their batches differed and that comparison is skipped, with a note).
A difference between them is excused, with a note, when the engine took their children in different
steps: a run's children reach the engine one by one, and a step may start before the last has
arrived, so their batches differed.

Besides the output kinds' contract, every cell is held to the path's conduct: no output it yielded
changes afterwards (no-mutation), every output carries the parent's id (parent-id), and the engine
counts the parent's children and is back to 0 after the run ends and after a stopped run
(accounting): a streamed cell runs its request once more and stops it at its first output, and
the engine's count is taken as the stop returns. A rule a path cannot show (a remote server's
objects) is listed as not checked.

This module runs the cells, judges them and compares them, and is the package's front door: the
paths are in sampling_paths.py, the matrix as data (table, report, JSON) in cells.py, the rules in
contract.py and conduct.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence

from playground.analysis import admission, first_divergence, steps_label
from playground.errors import InvalidRequest
from playground.qa.cells import BAD_MARK, OK_MARK, Cell, Comparison, Matrix
from playground.qa.contract import RULEBOOK, RULES
from playground.qa.sampling_paths import SERVER, SamplingPath, backend_paths, sync_paths
from playground.request import OUTPUT_KINDS, SampleRequest
from playground.sampling.plan import draw_seed

__all__ = [
    "BAD_MARK", "OK_MARK", "ONE_AT_A_TIME", "RULES", "Cell", "Matrix", "OnCell", "SamplingPath", "backend_paths",
    "run_matrix", "sync_paths",
]

OnCell = Callable[[int, int, str], None]  # (cells done, cells in all, the cell that starts now)
ONE_AT_A_TIME = ("Cells ran one at a time, so each ran alone on its engine unless other requests were "
                 "in flight there (recorded per cell: at its start and end, and the most seen beside its own while "
                 "it ran).")
NOT_STOPPED = ("FINAL_ONLY cells have no stop check: a cell's run is stopped after its first output, and FINAL_ONLY's "
               "first output is its last (a Stop before it, as the page's, ends each sample with its tokens so far).")


def alone_sentence(cells: list[Cell]) -> str:
    """Whether the cells had the engine to themselves, said once for the whole matrix (each cell's
    counts are in its own line)."""
    shared = [c.label for c in cells if not c.alone]
    if not shared:
        return "The cell ran alone on its engine." if len(cells) == 1 else \
            f"All {len(cells)} cells ran alone on their engine."
    return (f"{len(shared)} of the {len(cells)} cells shared their engine with other requests ({', '.join(shared)}): "
            "a batch of others can change a seeded sample.")


# After a stop that left requests in the engine: how long to wait for them to go, so the record says
# whether they went late or stayed (and the next cell starts on an idle engine either way).
STOP_WAIT_S, POLL_S = 2.0, 0.02
LOAD_POLL_S = 0.05  # how often the engine's count is read while a cell runs


# --- running the cells -----------------------------------------------------------------------------

async def run_matrix(request: SampleRequest, paths: Sequence[SamplingPath], kinds: Sequence[str] = OUTPUT_KINDS,
                     on_cell: OnCell | None = None, stop: Callable[[], bool] | None = None) -> Matrix:
    """Run ``request`` under every output_kind × path, one cell at a time, then check and compare.

    The request's own output_kind and mode are ignored (every cell sets its own); a blank seed is
    drawn once here, so every cell uses the same seeds. InvalidRequest (a setting the engine
    refuses) stops the matrix and is raised: it would fail every cell alike. ``stop()``, asked
    before each cell, ends it early: the matrix of the cells that ran, the others marked not run.
    """
    if request.seed is None:
        request = dataclasses.replace(request, seed=draw_seed())
    started, t0 = time.time(), time.monotonic()
    cells: list[Cell] = []
    total = len(kinds) * len(paths)
    for kind, path in ((kind, path) for kind in kinds for path in paths):
        if stop is not None and stop():
            break
        cell = Cell(kind, path.name, path.mode, path.engine)
        if on_cell is not None:
            on_cell(len(cells), total, cell.label)
        cells.append(await _run_cell(cell, path, dataclasses.replace(request, output_kind=kind, mode=path.mode)))
    header = {**request.to_dict(), "output_kind": None, "mode": None}
    stopped = [f"Stopped after {len(cells)} of {total} cells: the others did not run."] if len(cells) < total else []
    unstopped = [NOT_STOPPED] if "FINAL_ONLY" in kinds and any(p.stop is not None for p in paths) else []
    matrix = Matrix(header, list(kinds), [{"name": p.name, "mode": p.mode, "engine": p.engine} for p in paths],
                    cells, notes=[*stopped, ONE_AT_A_TIME, alone_sentence(cells), *unstopped], started_at=started)
    _judge(matrix)
    matrix.groups, matrix.comparisons = _groups_and_comparisons(matrix.cells)
    matrix.seconds = time.monotonic() - t0
    return matrix


async def _run_cell(cell: Cell, path: SamplingPath, request: SampleRequest) -> Cell:
    t0 = time.monotonic()
    cell.in_flight_at_start = await _count(path)
    seen: list[int] = []
    watching = asyncio.create_task(_watch_load(path, seen))
    try:
        cell.run = await path.run(dataclasses.replace(request))  # a copy: the run fills in its own fields
    except InvalidRequest:
        raise
    except Exception as e:  # an engine or server failure: this cell is red, the others still run
        cell.error = str(e) or type(e).__name__
    finally:
        watching.cancel()
    cell.others_during = _others(seen, request.n)
    cell.seconds = time.monotonic() - t0
    cell.in_flight_at_end = await _count(path)
    if path.stop is not None and cell.run is not None and request.output_kind != "FINAL_ONLY":
        # A stop comes after a run's first output, and FINAL_ONLY's first is its last (NOT_STOPPED).
        try:
            cell.stopped = await path.stop(dataclasses.replace(request))
        except Exception as e:
            cell.stop_error = str(e) or type(e).__name__
        cell.in_flight_after_stop = await _count(path)
        if cell.in_flight_after_stop:  # not 0 as the stop returned: a late abort, or none at all
            cell.stop_settled_s = await _settle(path)
    return cell


async def _watch_load(path: SamplingPath, seen: list[int]) -> None:
    """Read the engine's count of unfinished requests while a cell runs, until cancelled."""
    while True:
        if (count := await _count(path)) is not None:
            seen.append(count)
        await asyncio.sleep(LOAD_POLL_S)


def _others(seen: list[int], n: int) -> int | None:
    """The most requests beside the cell's own n children seen while it ran (a floor: its children
    that had finished left room unseen); None when the engine could not be counted. Read from the
    engine's counts, not from the run's events: which of its own children were unfinished is what
    the rules check, and a broken aggregator must not pass its own children off as others'."""
    return max(0, max(seen) - n) if seen else None


async def _count(path: SamplingPath) -> int | None:
    try:
        return await path.in_flight()
    except Exception:  # counting is a diagnostic; an engine that cannot answer fails its cell anyway
        return None


async def _settle(path: SamplingPath) -> float | None:
    """Seconds until the engine counts 0, polled for at most STOP_WAIT_S; None if it did not."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < STOP_WAIT_S:
        await asyncio.sleep(POLL_S)
        if await _count(path) == 0:
            return time.monotonic() - t0
    return None


def _judge(matrix: Matrix) -> None:
    """Check every cell; a streamed cell is held to its path's FINAL_ONLY cell when both ran alone.
    A difference from it is excused, with a note, when the engine took their children in
    different steps (their batches differed then)."""
    for cell in matrix.cells:
        final = None
        if cell.run is not None and cell.output_kind != "FINAL_ONLY" and "FINAL_ONLY" in matrix.kinds:
            reference = matrix.cell("FINAL_ONLY", cell.path)
            if reference is None:
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: it did not run")
            elif reference.run is None or reference.run.status != "finished":
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: it did not finish")
            elif not (cell.alone and reference.alone):
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: other requests were "
                                  f"in flight on the engine ({cell.in_flight()}; FINAL_ONLY {reference.in_flight()}), "
                                  "so their batches may have differed")
            else:
                final = reference.run
        judgement = RULEBOOK.judge(cell.subject(final))
        steps, taken = (admission(cell.run), admission(final)) if final is not None else (None, None)
        excuse = None
        if final is not None and None not in (steps, taken) and steps != taken:
            excuse = (f"the engine took the children in different steps ({steps_label(steps)}; FINAL_ONLY "
                      f"{steps_label(taken)}): their batches differed")
        elif final is not None and cell.engine.startswith(SERVER):  # its steps cannot be seen from here
            excuse = ("a server's engine cannot be watched or paused from here, and there the same seeded request "
                      "can give other tokens from one run to the next (its children may enter its engine over two "
                      "steps)")
        if judgement.violations and excuse is not None:
            alone = RULEBOOK.judge(cell.subject(None))
            if len(judgement.violations) > len(alone.violations):
                cell.notes.append(f"final values differ from this path's FINAL_ONLY cell's, and {excuse}, so the "
                                  "difference is not a contract failure")
                judgement = alone
        cell.violations, cell.unchecked = judgement.violations, judgement.unchecked


# --- comparing the cells ---------------------------------------------------------------------------

def _groups_and_comparisons(cells: Sequence[Cell]) -> tuple[list[list[str]], list[Comparison]]:
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
            comparisons.append(_comparison(a, b))
    return [[c.label for c in g] for g in groups], comparisons


def _ids(cell: Cell) -> list[list[int]]:
    return [list(s.token_ids) for s in cell.run.samples]


def _comparison(a: Cell, b: Cell) -> Comparison:
    ids_a, ids_b = _ids(a), _ids(b)
    for sample, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)):
        k = first_divergence(x, y)
        if k is not None:
            return Comparison(a.label, b.label, sample, k, x[k] if k < len(x) else None,
                              y[k] if k < len(y) else None, _batch_note(a, b))
    # Every sample both cells have agrees: one has fewer samples, and they part at the first it lacks.
    return Comparison(a.label, b.label, min(len(ids_a), len(ids_b)), 0, None, None, _batch_note(a, b))


def _batch_note(a: Cell, b: Cell) -> str:
    """Whether the two cells' batch composition differed, as far as the record can tell."""
    if a.engine != b.engine:
        alone = " Both ran alone on their engines." if a.alone and b.alone else ""
        return (f"They ran on different engines ({a.engine} vs {b.engine}), each with a batch of its own, so "
                f"batch composition is not comparable between them.{alone}")
    if a.alone and b.alone:
        alone = f"Same engine ({a.engine}), both alone (no other request in flight at start, end or between)"
        steps_a, steps_b = admission(a.run), admission(b.run)
        if steps_a is None or steps_b is None:
            return (f"{alone}: batch composition did not differ, unless the engine stepped before all n "
                    "children arrived.")
        if steps_a != steps_b:
            return (f"{alone}, but the engine took the children in different steps ({a.label}: "
                    f"{steps_label(steps_a)}; {b.label}: {steps_label(steps_b)}): their batches differed.")
        return f"{alone}, the children taken in the same steps: batch composition did not differ."
    return (f"Batch composition differed: other requests were in flight on {a.engine} "
            f"({a.label}: {a.in_flight()}; {b.label}: {b.in_flight()}).")
