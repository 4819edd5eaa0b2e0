"""The QA matrix: one request under every output_kind × every path, each cell checked against the
contract (../shared/notes/vllm-parallel-sampling.md), then the cells' tokens compared.

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
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from playground.analysis import first_divergence
from playground.backends.base import record
from playground.errors import InvalidRequest
from playground.qa.contract import RULES, Violation, check
from playground.run import Run
from playground.sampling.request import OUTPUT_KINDS, SampleRequest

MATRIX_VERSION = 1
OK_MARK, BAD_MARK = "✔", "✖"
ONE_AT_A_TIME = ("Cells ran one at a time, so each ran alone on its engine unless other requests were "
                 "in flight there (recorded per cell, at its start and end).")

# --- paths ---------------------------------------------------------------------------------------

@dataclass
class Path:
    """One way to run a SampleRequest into a Run: a front end, an engine, and a mode."""

    name: str  # "async wrapper", "sync native", "remote wrapper", ...
    mode: str  # "wrapper" or "native"
    engine: str  # which engine the cell runs on; cells on different engines never share a batch
    run: Callable[[SampleRequest], Awaitable[Run]]
    in_flight: Callable[[], Awaitable[int]]  # requests (children) unfinished on that engine now


def backend_paths(backend, front_end: str = "async") -> list[Path]:
    """The wrapper and native paths of a Backend (the embedded AsyncLLM, or a remote server)."""
    info = backend.info()
    if info.get("backend") == "openai":
        engine = f"vLLM server {info.get('base_url')}"
    else:
        engine = f"AsyncLLM ({_short(info.get('model', '?'))})"

    async def run(request: SampleRequest) -> Run:
        last = None
        async for last in record(backend, request):
            pass
        return last

    return [Path(f"{front_end} {mode}", mode, engine, run, backend.num_unfinished) for mode in ("wrapper", "native")]


def sync_paths(runner, front_end: str = "sync") -> list[Path]:
    """The wrapper and native paths of a SyncRunner (LLMEngine). A SyncRunner is not thread-safe,
    so its runs are serialized with one lock; each runs on a worker thread (it blocks)."""
    lock = threading.Lock()
    engine = f"LLMEngine ({_short(runner.info().get('model', '?'))})"

    def record(request: SampleRequest) -> Run:
        with lock:
            return runner.record(request)

    async def run(request: SampleRequest) -> Run:
        return await asyncio.to_thread(record, request)

    async def in_flight() -> int:
        return runner.engine.get_num_unfinished_requests()  # the engine counts children

    return [Path(f"{front_end} {mode}", mode, engine, run, in_flight) for mode in ("wrapper", "native")]


def _short(model: str) -> str:
    return str(model).rstrip("/").rsplit("/", 1)[-1]


# --- the matrix ----------------------------------------------------------------------------------

@dataclass
class Cell:
    output_kind: str
    path: str
    mode: str
    engine: str
    run: Run | None = None
    error: str | None = None
    violations: list[Violation] = field(default_factory=list)
    in_flight_at_start: int | None = None  # other requests on the engine when the cell started
    in_flight_at_end: int | None = None  # ... and when it ended (its own are done by then)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.output_kind} × {self.path}"

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def alone(self) -> bool:
        """No other request was in flight on the engine at the cell's start or end."""
        return self.in_flight_at_start == 0 and self.in_flight_at_end == 0

    def verdict(self) -> str:
        """"✔", or "✖ rule: message" for the first broken rule (and how many more)."""
        if self.ok:
            return OK_MARK
        more = f" (+{len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        return f"{BAD_MARK} {self.violations[0]}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_kind": self.output_kind, "path": self.path, "mode": self.mode, "engine": self.engine,
            "ok": self.ok, "verdict": self.verdict(),
            "violations": [dataclasses.asdict(v) for v in self.violations],
            "in_flight_at_start": self.in_flight_at_start, "in_flight_at_end": self.in_flight_at_end,
            "alone": self.alone, "seconds": round(self.seconds, 3), "error": self.error, "notes": self.notes,
            "run": self.run.to_dict() if self.run is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        data = {k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(cls)}}
        data["violations"] = [Violation(**v) for v in data.get("violations", [])]
        data["run"] = Run.from_dict(data["run"]) if data.get("run") is not None else None
        return cls(**data)


@dataclass
class Comparison:
    """Two cells whose final token ids differ, with where, and whether their batches could differ."""

    a: str  # cell labels
    b: str
    sample: int
    position: int
    a_token: int | None  # None: the sample ended there
    b_token: int | None
    batch: str  # what is known about the two cells' batch composition

    def __str__(self) -> str:
        def token(t):
            return "end" if t is None else f"id {t}"

        return (f"{self.b} differs from {self.a}: sample {self.sample} first diverges at token {self.position} "
                f"({token(self.a_token)} vs {token(self.b_token)}). {self.batch}")


@dataclass
class Matrix:
    request: dict[str, Any]
    kinds: list[str]
    paths: list[dict[str, str]]  # name, mode, engine
    cells: list[Cell]
    comparisons: list[Comparison] = field(default_factory=list)
    groups: list[list[str]] = field(default_factory=list)  # cells with identical final token ids
    notes: list[str] = field(default_factory=list)
    started_at: float = 0.0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every cell holds every contract rule. Divergence between cells is not a rule."""
        return all(c.ok for c in self.cells)

    @property
    def path_names(self) -> list[str]:
        return [p["name"] for p in self.paths]

    def cell(self, output_kind: str, path: str) -> Cell:
        return next(c for c in self.cells if c.output_kind == output_kind and c.path == path)

    def table(self) -> pd.DataFrame:
        """output_kind rows × path columns, each cell "✔" or "✖ rule: message"."""
        rows = {kind: [self.cell(kind, p).verdict() for p in self.path_names] for kind in self.kinds}
        frame = pd.DataFrame.from_dict(rows, orient="index", columns=self.path_names)
        frame.index.name = "output_kind"
        return frame

    def report(self) -> str:
        """The comparison notes and every broken rule, as lines for people."""
        r = self.request
        lines = [(f"Request: {r.get('prompt')!r}, n={r.get('n')}, seed={r.get('seed')} (sample i uses seed+i), "
                  f"max_tokens={r.get('max_tokens')}."), *self.notes]
        broken = [c for c in self.cells if not c.ok]
        if broken:
            lines.append("Broken rules:")
            for c in broken:
                lines += [f"  {c.label}: {v}" for v in c.violations]
        if self.groups:
            if len(self.groups) == 1:
                lines.append(f"Final token ids: all {len(self.groups[0])} cells that ran gave the same token ids "
                             f"for every sample.")
            else:
                lines.append(f"Final token ids: {len(self.groups)} groups of identical cells: "
                             + "; ".join(f"[{', '.join(g)}]" for g in self.groups))
        lines += [f"  {c}" for c in self.comparisons]
        for c in self.cells:
            lines += [f"  {c.label}: {note}" for note in c.notes]
        count = sum(not c.ok for c in self.cells)
        lines.append(f"Verdict: every rule holds in all {len(self.cells)} cells." if self.ok else
                     f"Verdict: {count} of {len(self.cells)} cells break a contract rule.")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "matrix_version": MATRIX_VERSION, "ok": self.ok, "request": self.request, "kinds": self.kinds,
            "paths": self.paths, "rules": RULES, "notes": self.notes,
            "table": self.table().reset_index().to_dict(orient="records"),
            "comparisons": [{**dataclasses.asdict(c), "message": str(c)} for c in self.comparisons],
            "groups": self.groups, "started_at": self.started_at, "seconds": round(self.seconds, 3),
            "cells": [c.to_dict() for c in self.cells],
        }

    def to_json(self, indent: int | None = None) -> str:
        """The whole matrix as one JSON file: every cell's run bundle, verdicts and comparisons."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Matrix:
        return cls(request=data["request"], kinds=data["kinds"], paths=data["paths"],
                   cells=[Cell.from_dict(c) for c in data["cells"]],
                   comparisons=[Comparison(**{k: v for k, v in c.items() if k != "message"})
                                for c in data.get("comparisons", [])],
                   groups=data.get("groups", []), notes=data.get("notes", []),
                   started_at=data.get("started_at", 0.0), seconds=data.get("seconds", 0.0))

    @classmethod
    def from_json(cls, text: str) -> Matrix:
        return cls.from_dict(json.loads(text))


OnCell = Callable[[int, int, str], None]  # (cells done, cells in all, the cell that starts now)


async def run_matrix(request: SampleRequest, paths: Sequence[Path], kinds: Sequence[str] = OUTPUT_KINDS,
                     on_cell: OnCell | None = None) -> Matrix:
    """Run ``request`` under every output_kind × path, one cell at a time, then check and compare.

    The request's own output_kind and mode are ignored (every cell sets its own); a blank seed is
    drawn once here, so every cell uses the same seeds. InvalidRequest (a setting the engine
    refuses) stops the matrix and is raised: it would fail every cell alike.
    """
    if request.seed is None:
        request = dataclasses.replace(request, seed=secrets.randbelow(2**31))
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


async def _run_cell(cell: Cell, path: Path, request: SampleRequest) -> Cell:
    t0 = time.monotonic()
    cell.in_flight_at_start = await _count(path)
    try:
        cell.run = await path.run(request)
    except InvalidRequest:
        raise
    except Exception as e:  # an engine or server failure: this cell is red, the others still run
        cell.error = str(e) or type(e).__name__
    cell.seconds = time.monotonic() - t0
    cell.in_flight_at_end = await _count(path)
    return cell


async def _count(path: Path) -> int | None:
    try:
        return await path.in_flight()
    except Exception:  # counting is a diagnostic; an engine that cannot answer fails its cell anyway
        return None


def _judge(matrix: Matrix) -> None:
    """Check every cell; a streamed cell is held to its path's FINAL_ONLY cell when both ran alone."""
    for cell in matrix.cells:
        if cell.run is None:
            cell.violations = [Violation("run-error", f"the {cell.path} path raised: {cell.error}")]
            continue
        final = None
        if cell.output_kind != "FINAL_ONLY" and "FINAL_ONLY" in matrix.kinds:
            reference = matrix.cell("FINAL_ONLY", cell.path)
            if reference.run is None or reference.run.status != "finished":
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: it did not finish")
            elif not (cell.alone and reference.alone):
                cell.notes.append("final values not compared with this path's FINAL_ONLY cell: other requests were "
                                  f"in flight on the engine ({_in_flight(cell)}; FINAL_ONLY {_in_flight(reference)}), "
                                  "so their batches may have differed")
            else:
                final = reference.run
        cell.violations = check(cell.run, final)


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
            f"({a.label}: {_in_flight(a)}; {b.label}: {_in_flight(b)}).")


def _in_flight(cell: Cell) -> str:
    return f"{_count_text(cell.in_flight_at_start)} at start, {_count_text(cell.in_flight_at_end)} at end"


def _count_text(count: int | None) -> str:
    return "unknown" if count is None else str(count)
