"""The pace a recorded run is replayed at: as recorded, k times faster, or a rate of sampled tokens
per second (the pace of a GPU, on a machine that has none).

A pace turns the recorded events' times (and the tokens each brought) into the times, after the
replay starts, at which each event is due. The replay waits for those times on a monotonic clock,
each measured from the start, never from the event before: a late event does not push the ones
after it, and when the replay is behind it emits what is due at once, so it does not drift.
"""

from __future__ import annotations

import asyncio
import bisect
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from playground.errors import InvalidRequest

MAX_SPEED = 10_000.0
MAX_RATE = 1e8  # tokens per second
PACE_HELP = ('"recorded" (as the run streamed), a speed-up like x4 (x0.5: half speed), or a rate of sampled '
             'tokens per second like "10000 tok/s"')
# A number as a person may write it, sign and exponent included, so "x-2" and "x1e9" are named as
# speed-ups out of bounds, not as a pace of no known form.
_NUMBER = r"([-+]?[0-9.]+(?:e[-+]?[0-9]+)?)"
_SPEED = re.compile(rf"^\s*(?:[x×]\s*{_NUMBER}|{_NUMBER}\s*[x×])\s*$", re.IGNORECASE)
_RATE = re.compile(rf"^\s*{_NUMBER}\s*(?:tok(?:ens)?\s*/\s*s|tps)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Pace:
    """``speed`` times the recorded pace, or ``rate`` sampled tokens per second (one of the two)."""

    speed: float = 1.0
    rate: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Pace:
        """``recorded``, ``x4`` (or ``4x``, ``×4``), ``10000 tok/s``; InvalidRequest (a sentence)
        for anything else."""
        if text is None or str(text).strip().lower() in ("", "recorded", "x1", "1x"):
            return cls()
        text = str(text)
        if found := _SPEED.match(text):
            speed = _number(found.group(1) or found.group(2), text)
            if not 0 < speed <= MAX_SPEED:
                raise InvalidRequest(f"a replay's speed-up must be above 0 and at most x{MAX_SPEED:.12g}, got {text!r}")
            return cls(speed=speed)
        if found := _RATE.match(text):
            rate = _number(found.group(1), text)
            if not 0 < rate <= MAX_RATE:
                raise InvalidRequest(f"a replay's rate must be above 0 and at most {MAX_RATE:.12g} tok/s, got {text!r}")
            return cls(rate=rate)
        raise InvalidRequest(f"the replay's pace must be {PACE_HELP}; got {text!r}")

    @property
    def label(self) -> str:
        """How the record and the page name it: "recorded", "x4", "10000 tok/s"; it reads back as the
        same pace (every digit written out: "1e+06" is not a pace a person writes)."""
        if self.rate is not None:
            return f"{self.rate:.12g} tok/s"
        return "recorded" if self.speed == 1.0 else f"x{self.speed:.12g}"

    def due(self, times: Sequence[float], tokens: Sequence[int]) -> list[float]:
        """When each event is due, in seconds after the replay starts, from the events' recorded
        times and the sampled tokens each brought. At a rate, event k is due once the tokens of
        events 0..k have been made at that rate: the run's tokens then arrive at exactly it."""
        due, latest, made = [], 0.0, 0
        for t, count in zip(times, tokens):
            made += count
            at = made / self.rate if self.rate is not None else max(0.0, t) / self.speed
            latest = max(latest, at)  # recorded times never go back; a damaged file's do not either
            due.append(latest)
        return due


def _number(text: str, whole: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidRequest(f"the replay's pace must be {PACE_HELP}; got {whole!r}") from None


class Warp:
    """The map from the recorded run's clock to the replay's (piecewise linear through the events'
    times), for what the record timed between events: the engine's own timestamps of each child."""

    def __init__(self, recorded: Sequence[float], replayed: Sequence[float]):
        self.recorded = [0.0, *recorded]
        self.replayed = [0.0, *replayed]

    def __call__(self, t: float) -> float:
        return _interpolate(t, self.recorded, self.replayed)

    def back(self, t: float) -> float:
        """The recorded time a replay time stands for."""
        return _interpolate(t, self.replayed, self.recorded)


def _interpolate(x: float, xs: list[float], ys: list[float]) -> float:
    if x <= xs[0]:
        return ys[0]
    k = bisect.bisect_right(xs, x)
    if k >= len(xs):  # beyond the last event: the pace of the whole run
        slope = (ys[-1] - ys[0]) / (xs[-1] - xs[0]) if xs[-1] > xs[0] else 1.0
        return ys[-1] + (x - xs[-1]) * slope
    x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
    return y0 if x1 == x0 else y0 + (x - x0) * (y1 - y0) / (x1 - x0)


class Clock:
    """Monotonic time, and a wait that a stop cuts short. The replay keeps its own clock so the
    scheduling can be checked step by step (``tests/test_replay.py`` steps one by hand)."""

    def now(self) -> float:
        return time.monotonic()

    async def wait(self, stop: asyncio.Future, seconds: float) -> None:
        """Until ``seconds`` have passed or ``stop`` is done, whichever comes first."""
        await asyncio.wait({stop}, timeout=seconds)
