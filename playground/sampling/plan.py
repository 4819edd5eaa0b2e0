"""The fan-out plan: which child requests a parent becomes, with which ids and seeds.

This is vLLM's own rule for n > 1 (its parallel-sampling parent request), written once and decided once per
run: the async sampler over AsyncLLM, the sync sampler over LLMEngine, the remote backend over
HTTP and the run record all take the same ``Plan``. A parent with n samples becomes n children
with n = 1; child i is called ``f"{i}_{parent_id}"`` and gets ``seed + i``. In "same-seed" mode
every child gets the parent's seed, on purpose: the bug the seed + i rule fixed (all n samples
came out identical), shown as it was.

No vLLM here: the remote backend plans its HTTP requests with it on a machine without vLLM.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from playground.request import check_mode, check_seed

RANDOM_SEED_BELOW = 2**31  # a blank seed is drawn from [0, 2**31): short enough to read and type


@dataclass(frozen=True)
class Child:
    """One child request of a parent: its index among the samples, its engine id and its seed."""

    index: int
    request_id: str
    seed: int | None


@dataclass(frozen=True)
class Plan:
    """One parent request's fan-out. In native mode vLLM fans out itself, by the same rule: the
    plan then says what its children are called and seeded, for the record."""

    parent_id: str
    mode: str
    seed: int | None  # the base seed
    children: tuple[Child, ...]

    @property
    def n(self) -> int:
        return len(self.children)

    @property
    def seeds(self) -> list[int | None]:
        return [child.seed for child in self.children]


def child_request_id(index: int, parent_id: str) -> str:
    """The id vLLM gives child i of a parent, so engine logs read the same in every mode."""
    return f"{index}_{parent_id}"


def child_seeds(seed: int | None, n: int, mode: str) -> list[int | None]:
    """Sample i's seed: seed + i, or ``seed`` for all in same-seed mode (None stays None)."""
    if seed is None:
        return [None] * n
    return [seed] * n if mode == "same-seed" else [seed + i for i in range(n)]


def draw_seed(source: Callable[[int], int] | None = None) -> int:
    """A fresh base seed for a request that left it blank, so every sample can be replayed.
    ``source`` (tests) stands in for ``secrets.randbelow``; None means the real one, so callers
    can pass theirs through as it is."""
    return (source or secrets.randbelow)(RANDOM_SEED_BELOW)


def make_plan(parent_id: str, n: int, seed: int | None, mode: str, *, seed_native: bool = False) -> Plan:
    """The children a parent becomes. A blank seed is drawn here, once: the wrapper's samples can
    then each be run again alone with seed + i. In native mode a blank seed stays blank, as vLLM
    leaves it, unless ``seed_native``: a caller that records its runs (the backends) draws one in
    every mode, so every recorded run can be replayed."""
    check_mode(mode)
    check_seed(seed, n)
    if seed is None and (mode != "native" or seed_native):
        seed = draw_seed()
    seeds = child_seeds(seed, n, mode)
    return Plan(parent_id, mode, seed, tuple(Child(i, child_request_id(i, parent_id), s) for i, s in enumerate(seeds)))
