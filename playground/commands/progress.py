"""Many runs from the command line, one way: ``batch`` and ``sweep`` hand their requests to
``run_all``, which runs them on a SyncRunner under a progress bar and ends on Ctrl-C or a dead
engine with what finished, leaving nothing running in the engine."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from playground.errors import EngineUnavailable, InvalidRequest
from playground.run import Run
from playground.sampling.request import SampleRequest


@dataclass
class Ending:
    """How the walk over the runs ended, when it did not run them all."""

    interrupted: bool = False  # Ctrl-C
    failure: str | None = None  # the engine failed; the rest did not run


def run_all(runner, requests: list[SampleRequest], take: Callable[[int, Run | InvalidRequest, object], None],
            ending: Ending, *, unit: str, desc: str, max_in_flight: int = 1, progress: bool = True) -> None:
    """Run ``requests`` on ``runner`` (a SyncRunner), handing each ``(position, outcome, bar)`` to
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
