"""A sweep: one prompt, one base seed, n samples, and a list of values for one sampler setting (or a
list of base seeds); each value is one full run.

With the same seeds, what differs between the runs comes from the setting alone, so the values
run one after another on an otherwise idle engine (the batch a request shares changes seeded
results). The sweep's own limits (how many values) and every run's request checks are made here,
once, for the command line and the page alike, before any engine sees a request.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from playground.errors import InvalidRequest
from playground.request import SWEEP_SETTINGS, Limits, SampleRequest, check_n
from playground.run import Run
from playground.sampling.plan import child_seeds, draw_seed

MAX_SWEEP_VALUES = 12  # each value is a full run, one after another: a sweep should stay a demo


@dataclass
class SweepRequest:
    """``base`` with ``param`` set to each of ``values`` in turn; ``values`` are coerced like the
    request's own field (so 1 and "1.0" are the same temperature)."""

    base: SampleRequest
    param: str
    values: list[Any] = field(default_factory=list)
    reference: str | None = None  # the right answer, kept in every run's bundle

    @classmethod
    def from_user(cls, param: str, values: Any, **settings: Any) -> SweepRequest:
        """Coerce loosely typed input: ``settings`` are any SampleRequest fields (the swept one is
        left out), ``values`` as for ``of``."""
        return cls.of(SampleRequest.from_user(**{k: v for k, v in settings.items() if k != param}), param, values)

    @classmethod
    def of(cls, base: SampleRequest, param: str, values: Any) -> SweepRequest:
        """``base`` swept over ``values``: a list, text separated by spaces or commas (the page's
        box), or both, each coerced like the request's own field (1 and "1.0" are one temperature).
        The base's own value of the swept setting is ignored.

        Base seeds may be written ``FROM:COUNT``: COUNT seeds from FROM, n apart. Sample i of a run
        uses seed + i, so runs whose base seeds are closer than n share child seeds and their
        samples are not independent; n apart, no two runs share one."""
        param = param.strip().lower() if isinstance(param, str) else param
        if param not in SWEEP_SETTINGS:
            raise InvalidRequest(f"a sweep varies one of {', '.join(SWEEP_SETTINGS)}, got {param!r}")
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, (list, tuple)):
            raise InvalidRequest(f"the sweep's values must be a list, got {type(values).__name__}")
        values = [part for v in values for part in (_split(v) if isinstance(v, str) else [v])]
        if param == "seed":
            values = [seed for v in values for seed in _seeds_apart(v, base.n)]
        coerced = []
        for position, value in enumerate(values, 1):
            if value is None:
                raise InvalidRequest(f"value {position} of the sweep is empty: give a {param} for every value")
            coerced.append(getattr(SampleRequest.from_user(prompt="", **{param: value}), param))
        return cls(base, param, coerced)

    def check(self, limits: Limits) -> None:
        """The sweep's limits, then every run's request checks, each failure naming its value."""
        count = len(self.values)
        if count == 0:
            raise InvalidRequest(f"the sweep has no values: give at least one {self.param}")
        if count > MAX_SWEEP_VALUES:
            raise InvalidRequest(f"a sweep runs at most {MAX_SWEEP_VALUES} values, one full run each; "
                                 f"got {count}: split it into several sweeps")
        seen = set()
        for value in self.values:
            if value in seen:
                raise InvalidRequest(f"{self.param}={value} appears twice in the sweep: each value runs once")
            seen.add(value)
        check_n(self.base.n, limits.max_n)  # max_n samples per value, like any run
        try:
            self.base.check(limits)
            shared = None
        except InvalidRequest as e:
            shared = str(e)  # the form's own problem (an empty prompt), whatever the value
        for position, request in enumerate(self.requests()):
            try:
                request.check(limits)
            except InvalidRequest as e:
                if str(e) == shared:
                    raise
                raise InvalidRequest(f"with {self.param}={self.values[position]} (value {position + 1} of the "
                                     f"sweep): {e}") from None

    def fix_seed(self, source=None) -> None:
        """A blank base seed becomes one random seed for the whole sweep, so every value's run
        uses the same seeds (a run would draw its own otherwise, and the sweep would compare
        different seeds as well as different settings)."""
        if self.param != "seed" and self.base.seed is None:
            self.base.seed = draw_seed(source)

    def requests(self) -> list[SampleRequest]:
        """One request per value, in order: the base with the swept setting changed."""
        return [dataclasses.replace(self.base, **{self.param: value}, stop=list(self.base.stop))
                for value in self.values]

    def label(self, position: int) -> dict[str, Any]:
        """What a run's bundle records of the sweep it belongs to (``request["sweep"]``)."""
        return {"param": self.param, "value": self.values[position], "position": position,
                "values": list(self.values)}

    def labels(self, position: int) -> dict[str, Any]:
        """What the run of the value at ``position`` records beside its request: the sweep, and the
        right answer when one is given."""
        return {"sweep": self.label(position), **({"reference": self.reference} if self.reference is not None else {})}

    def mark(self, run: Run, position: int) -> Run:
        run.request.update(self.labels(position))
        return run


def _seeds_apart(value: Any, n: int) -> list[Any]:
    """``FROM:COUNT`` as COUNT base seeds from FROM, n apart; any other value as it is."""
    if not isinstance(value, str) or ":" not in value:
        return [value]
    start, _, count = value.partition(":")
    form = (f"{value!r}: FROM:COUNT gives COUNT base seeds from FROM, n apart (COUNT a whole number from 1 to "
            f"{MAX_SWEEP_VALUES})")
    first = SampleRequest.from_user(prompt="", seed=start).seed  # a bad FROM is named as the seed it is
    try:
        how_many = int(count.strip())
    except ValueError:
        raise InvalidRequest(f"{form}, got COUNT {count!r}") from None
    if first is None or not 1 <= how_many <= MAX_SWEEP_VALUES:
        raise InvalidRequest(form + ("" if first is None else f", got COUNT {how_many}"))
    return [first + k * n for k in range(how_many)]


def seed_overlap_note(sweep: SweepRequest) -> str | None:
    """A sentence when the runs of a seed sweep share child seeds (by the plan's rule: base seeds
    closer than n, or in same-seed mode the same base seed)."""
    if sweep.param != "seed":
        return None
    n, mode = sweep.base.n, sweep.base.mode
    seeds = sorted(sweep.values)
    close = [(a, b) for a, b in zip(seeds, seeds[1:]) if set(child_seeds(a, n, mode)) & set(child_seeds(b, n, mode))]
    if not close:
        return None
    a, b = close[0]
    if mode == "same-seed":
        return (f"base seed {a} is swept twice: in same-seed mode every sample uses the base seed, so those runs "
                "are the same run")
    return (f"base seeds {a} and {b} are closer than n={n}: sample i uses seed + i, so those runs share "
            f"child seeds and their samples are not independent; FROM:COUNT gives seeds n apart")


def _split(text: str) -> list[str]:
    """Values typed in one box (or one flag): separated by spaces, commas or semicolons."""
    return [part for part in re.split(r"[\s,;]+", text) if part]
