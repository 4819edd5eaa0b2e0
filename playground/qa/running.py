"""Running the QA matrix: every output_kind × path, one cell at a time, then judging each cell.

A cell runs its request to the end, counting the requests in flight on its engine before and
after; a streamed cell then runs the same request once more and stops it at its first output, and
counts again as the stop returns, so the ``accounting`` rule sees whether the engine is back to 0
after an end and after a stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence

from playground.errors import InvalidRequest
from playground.qa.cells import ONE_AT_A_TIME, Cell, Matrix
from playground.qa.compare import compare
from playground.qa.contract import judge
from playground.qa.sampling_paths import SamplingPath
from playground.sampling import plan
from playground.sampling.request import OUTPUT_KINDS, SampleRequest

OnCell = Callable[[int, int, str], None]  # (cells done, cells in all, the cell that starts now)
# After a stop that left requests in the engine: how long to wait for them to go, so the record says
# whether they went late or stayed (and the next cell starts on an idle engine either way).
STOP_WAIT_S, POLL_S = 2.0, 0.02


async def run_matrix(request: SampleRequest, paths: Sequence[SamplingPath], kinds: Sequence[str] = OUTPUT_KINDS,
                     on_cell: OnCell | None = None) -> Matrix:
    """Run ``request`` under every output_kind × path, one cell at a time, then check and compare.

    The request's own output_kind and mode are ignored (every cell sets its own); a blank seed is
    drawn once here, so every cell uses the same seeds. InvalidRequest (a setting the engine
    refuses) stops the matrix and is raised: it would fail every cell alike.
    """
    if request.seed is None:
        request = dataclasses.replace(request, seed=plan.draw_seed())
    started, t0 = time.time(), time.monotonic()
    cells: list[Cell] = []
    total = len(kinds) * len(paths)
    for kind in kinds:
        for path in paths:
            cell = Cell(kind, path.name, path.mode, path.engine)
            if on_cell is not None:
                on_cell(len(cells), total, cell.label)
            cells.append(await _run_cell(cell, path, dataclasses.replace(request, output_kind=kind, mode=path.mode)))
    header = {**request.to_dict(), "output_kind": None, "mode": None}
    matrix = Matrix(header, list(kinds), [{"name": p.name, "mode": p.mode, "engine": p.engine} for p in paths],
                    cells, notes=[ONE_AT_A_TIME], started_at=started)
    _judge(matrix)
    matrix.groups, matrix.comparisons = compare(matrix.cells)
    matrix.seconds = time.monotonic() - t0
    return matrix


async def _run_cell(cell: Cell, path: SamplingPath, request: SampleRequest) -> Cell:
    t0 = time.monotonic()
    cell.in_flight_at_start = await _count(path)
    try:
        cell.run = await path.run(dataclasses.replace(request))  # a copy: the run fills in its own fields
    except InvalidRequest:
        raise
    except Exception as e:  # an engine or server failure: this cell is red, the others still run
        cell.error = str(e) or type(e).__name__
    cell.seconds = time.monotonic() - t0
    cell.in_flight_at_end = await _count(path)
    if path.stop is not None and cell.run is not None and request.output_kind != "FINAL_ONLY":
        # FINAL_ONLY's first output is its last: there is nothing to stop at.
        try:
            cell.stopped = await path.stop(dataclasses.replace(request))
        except Exception as e:
            cell.stop_error = str(e) or type(e).__name__
        cell.in_flight_after_stop = await _count(path)
        if cell.in_flight_after_stop:  # not 0 as the stop returned: a late abort, or none at all
            cell.stop_settled_s = await _settle(path)
    return cell


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
    """Check every cell; a streamed cell is held to its path's FINAL_ONLY cell when both ran alone."""
    for cell in matrix.cells:
        final = None
        if cell.run is not None and cell.output_kind != "FINAL_ONLY" and "FINAL_ONLY" in matrix.kinds:
            reference = matrix.cell("FINAL_ONLY", cell.path)
            if reference.run is None or reference.run.status != "finished":
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: it did not finish")
            elif not (cell.alone and reference.alone):
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: other requests were "
                                  f"in flight on the engine ({cell.in_flight()}; FINAL_ONLY {reference.in_flight()}), "
                                  "so their batches may have differed")
            else:
                final = reference.run
        judgement = judge(cell.subject(final))
        cell.violations, cell.unchecked = judgement.violations, judgement.unchecked
