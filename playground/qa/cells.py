"""The QA matrix as data: its cells, the comparisons between them, its table, its report, and its
JSON file (every cell's run bundle with its verdict), which loads back as the same matrix."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from playground.qa.contract import RULES
from playground.qa.rules import Subject, Unchecked, Violation
from playground.run import Run

# 2: cells hold the rules they could not be checked against (unchecked) and a run of the same
# request stopped at its first output (stopped, in_flight_after_stop, stop_settled_s, stop_error).
MATRIX_VERSION = 2
OK_MARK, BAD_MARK = "✔", "✖"
NOT_RUN = "— not run (the matrix was stopped)"


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
    others_during: int | None = None  # the most requests beside its own seen while it ran (None: not counted)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    unchecked: list[Unchecked] = field(default_factory=list)  # rules this cell's run could not show
    stopped: Run | None = None  # the same request once more, stopped after its first output
    in_flight_after_stop: int | None = None  # as soon as the stop returned
    stop_settled_s: float | None = None  # when that was not 0: seconds until it was (None: not within the wait)
    stop_error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.output_kind} × {self.path}"

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def alone(self) -> bool:
        """No other request was in flight on the engine at the cell's start or end, nor seen beside
        its own while it ran (another browser's run can come and go between the two)."""
        return self.in_flight_at_start == 0 and self.in_flight_at_end == 0 and not self.others_during

    def subject(self, final: Run | None = None) -> Subject:
        """What the rules see of this cell."""
        return Subject(self.run, final, source=self.path, error=self.error, before=self.in_flight_at_start,
                       after=self.in_flight_at_end, stopped=self.stopped, after_stop=self.in_flight_after_stop,
                       settled_after_stop=self.stop_settled_s, stop_error=self.stop_error)

    def in_flight(self) -> str:
        """The in-flight counts at start and end, for people."""
        during = f", up to {self.others_during} beside its own while it ran" if self.others_during else ""
        return f"{_count_text(self.in_flight_at_start)} at start, {_count_text(self.in_flight_at_end)} at end{during}"

    def verdict(self) -> str:
        """"✔", "✔ (accounting not checked)" when a rule could not be held to (so a cell that
        could not show everything never looks the same as one that did), or "✖ rule: message"
        for the first broken rule (and how many more)."""
        if self.ok:
            rules = list(dict.fromkeys(u.rule for u in self.unchecked))
            return f"{OK_MARK} ({', '.join(rules)} not checked)" if rules else OK_MARK
        more = f" (+{len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        return f"{BAD_MARK} {self.violations[0]}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_kind": self.output_kind, "path": self.path, "mode": self.mode, "engine": self.engine,
            "ok": self.ok, "verdict": self.verdict(),
            "violations": [dataclasses.asdict(v) for v in self.violations],
            "unchecked": [dataclasses.asdict(u) for u in self.unchecked],
            "in_flight_at_start": self.in_flight_at_start, "in_flight_at_end": self.in_flight_at_end,
            "others_during": self.others_during,
            "alone": self.alone, "seconds": round(self.seconds, 3), "error": self.error, "notes": self.notes,
            "run": self.run.to_dict() if self.run is not None else None,
            "stopped": self.stopped.to_dict() if self.stopped is not None else None,
            "in_flight_after_stop": self.in_flight_after_stop, "stop_settled_s": self.stop_settled_s,
            "stop_error": self.stop_error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        data = {k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(cls)}}
        data["violations"] = [Violation(**v) for v in data.get("violations", [])]
        data["unchecked"] = [Unchecked(**u) for u in data.get("unchecked", [])]
        for name in ("run", "stopped"):
            data[name] = Run.from_dict(data[name]) if data.get(name) is not None else None
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

    def cell(self, output_kind: str, path: str) -> Cell | None:
        """The cell of that output_kind and path; None when it did not run (the matrix was stopped)."""
        return next((c for c in self.cells if c.output_kind == output_kind and c.path == path), None)

    def table(self) -> pd.DataFrame:
        """output_kind rows × path columns, each cell "✔", "✖ rule: message" or not run."""
        rows = {kind: [cell.verdict() if (cell := self.cell(kind, p)) is not None else NOT_RUN for p in self.path_names]
                for kind in self.kinds}
        frame = pd.DataFrame.from_dict(rows, orient="index", columns=self.path_names)
        frame.index.name = "output_kind"
        return frame

    def report(self) -> str:
        """The comparison notes, every broken rule and every rule that could not be checked, as
        lines for people."""
        r = self.request
        lines = [(f"Request: {r.get('prompt')!r}, n={r.get('n')}, seed={r.get('seed')} (sample i uses seed+i), "
                  f"max_tokens={r.get('max_tokens')}."), *self.notes,
                 f"Rules: {', '.join(RULES)} (what each means: the JSON file's \"rules\")."]
        broken = [c for c in self.cells if not c.ok]
        if broken:
            lines.append("Broken rules:")
            for c in broken:
                lines += [f"  {c.label}: {v}" for v in c.violations]
        unchecked = self.unchecked()
        if unchecked:
            lines.append("Not checked (the run cannot show it either way):")
            lines += [f"  {rule} on {self._where(cells)}: {reason}" for (rule, reason), cells in unchecked.items()]
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
        count, partial = sum(not c.ok for c in self.cells), sum(bool(c.unchecked) for c in self.cells if c.ok)
        lines.append(f"Verdict: every rule holds in all {len(self.cells)} cells." if self.ok and not partial else
                     f"Verdict: no cell breaks a rule; in {partial} of {len(self.cells)} cells some could not be "
                     "checked (above)." if self.ok else
                     f"Verdict: {count} of {len(self.cells)} cells {'breaks' if count == 1 else 'break'} a "
                     "contract rule.")
        return "\n".join(lines)

    def unchecked(self) -> dict[tuple[str, str], list[Cell]]:
        """(rule, why it could not be checked) -> the cells it applies to."""
        found: dict[tuple[str, str], list[Cell]] = {}
        for c in self.cells:
            for u in c.unchecked:
                found.setdefault((u.rule, u.reason), []).append(c)
        return found

    def _where(self, cells: list[Cell]) -> str:
        """Cells for a report line, by path: "remote wrapper (every output_kind); sync native (DELTA)"."""
        kinds: dict[str, list[str]] = {}
        for c in cells:
            kinds.setdefault(c.path, []).append(c.output_kind)
        return "; ".join(f"{path} (every output_kind)" if len(self.kinds) > 1 and set(found) >= set(self.kinds)
                         else f"{path} ({', '.join(found)})" for path, found in kinds.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "matrix_version": MATRIX_VERSION, "ok": self.ok, "request": self.request, "kinds": self.kinds,
            "paths": self.paths, "rules": dict(RULES), "notes": self.notes,
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


def _count_text(count: int | None) -> str:
    return "unknown" if count is None else str(count)
