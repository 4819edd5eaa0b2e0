"""Many runs from the command line, one way: ``batch`` and ``sweep`` start their runner with
``start_runner`` (a SyncRunner over an engine of their own, or a LoopRunner over a vLLM server;
a context manager: what it runs is ended however the command ends), hand
their requests to ``run_all``, which runs them under a progress bar and ends on Ctrl-C or a dead
engine with what finished, leaving nothing running in the engine, write what finished with
``write_bundles`` and their table with ``print_summary``."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from playground import analysis
from playground.analysis.report import MISSING, cell
from playground.backends.resources import Workload
from playground.commands import exits
from playground.commands.cli import connect_remote, write_atomically
from playground.errors import EngineUnavailable, InvalidRequest
from playground.request import SampleRequest
from playground.run import Run

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Ending:
    """How the walk over the runs ended, when it did not run them all."""

    interrupted: bool = False  # Ctrl-C
    failure: str | None = None  # the engine failed; the rest did not run

    def told(self, not_run: int, what: str) -> int | None:
        """Say on stderr how the walk ended early and return the exit status (130 for Ctrl-C, 1 for
        a failed engine), or None when it ran to its end. ``not_run``: how many ``what`` (e.g.
        "prompt(s)") did not run or were aborted."""
        if self.interrupted:
            print(f"interrupted: {not_run} {what} did not run or were aborted", file=sys.stderr)
            return 130
        if self.failure:
            print(f"error: {self.failure}", file=sys.stderr)
            return 1
        return None


def start_runner(args, engine_kwargs: dict, error, workload: Workload | None = None):
    """The runner the flags ask for: with ``--backend openai``, a LoopRunner over the server
    (``error``, the parser's, says at once why a server cannot be used); else a SyncRunner over an
    engine started here for ``workload`` (its KV cache)."""
    if args.backend == "openai":
        from playground.backends.loop_runner import LoopRunner

        return LoopRunner(connect_remote(args, engine_kwargs, error))
    from playground.backends.sync import SyncRunner

    return SyncRunner.start(args.model, max_n=args.max_n, workload=workload, **engine_kwargs)


def run_all(runner, requests: list[SampleRequest], take: Callable[[int, Run | InvalidRequest, object], None],
            ending: Ending, *, unit: str, desc: str, max_in_flight: int = 1, progress: bool = True) -> None:
    """Run ``requests`` on ``runner`` (``start_runner``'s), handing each ``(position, outcome, bar)`` to
    ``take`` as it finishes (the outcome a Run, or the InvalidRequest the engine refused it with),
    and tick the tqdm ``bar`` after it; how it ended goes into ``ending`` (the caller's result).
    Closing the runner's generator, whatever ends the walk, aborts what is still in flight."""
    from tqdm import tqdm

    bar = tqdm(total=len(requests), unit=unit, desc=desc, file=sys.stderr, disable=not progress)
    outcomes = runner.record_all(requests, max_in_flight)
    try:
        with contextlib.closing(outcomes):
            for position, outcome in outcomes:
                take(position, outcome, bar)
                bar.update()
    except KeyboardInterrupt:
        ending.interrupted = True
    except EngineUnavailable as e:
        ending.failure = str(e)
    finally:
        bar.close()


def write_bundles(out: Path | None, bundles: Iterable[str]) -> None:
    """The bundles to ``out`` atomically, else to stdout, flushed before the recap on stderr."""
    if out is not None:
        write_atomically(out, bundles)
    else:
        for bundle in bundles:
            print(bundle)
        sys.stdout.flush()


def summary_text(frame: pd.DataFrame) -> str:
    """A summary table as a person reads it, each cell as every table of a report writes it
    (``report.cell``: yes and no, "—" for a figure there is none of, not Python's True, None or nan),
    but for a number, written as the user typed it (a temperature of 0.5, not 0.500)."""
    def said(value):
        return value if isinstance(value, float) and not math.isnan(value) else cell(value)

    return frame.astype(object).map(said).to_string(index=False, na_rep=MISSING)


def print_summary(table: Callable[[], pd.DataFrame], out: Path | None) -> int | None:
    """Print the runs' summary table (``table()``, a DataFrame) to stdout when the bundles went to
    ``out``, else to stderr (beside bundles on stdout it would break the JSONL). A typed pattern
    that took too long is said as an error and gives the usage status (the bundles are written
    already); else None."""
    try:
        print(summary_text(table()), file=sys.stdout if out else sys.stderr)
    except analysis.InvalidExtractor as e:
        print(f"error: the summary: {e}", file=sys.stderr)
        return exits.USAGE
    return None
