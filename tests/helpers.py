"""Small helpers for tests that drive the real engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from playground.backends import base
from playground.backends.outputs import observation_from_output
from playground.bench.probes import free_port  # noqa: F401 (the tests' own port, from here)
from playground.request import SampleRequest
from playground.run import Event, Run


def wait_until(condition: Callable[[], bool], timeout: float, every: float = 0.02) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


async def await_until(condition: Callable[[], bool], timeout: float, every: float = 0.01) -> bool:
    """``wait_until`` for code running on an event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(every)
    return True


def assert_refused_clearly(error: BaseException | str, message: str) -> None:
    """The refusal names the problem, and is one of ours rather than a failure we did not expect."""
    text = str(error)
    assert message in text, text
    assert "unexpected error" not in text, text


def unfinished_after(backend, host, timeout: float = 2.0) -> int:
    """Requests still unfinished in the backend's engine once it went idle or ``timeout`` passed."""
    wait_until(lambda: host.run(backend.num_unfinished()) == 0, timeout)
    return host.run(backend.num_unfinished())


def ctrl_c_after_the_first_run(monkeypatch, runner, steps: int = 3) -> None:
    """Make ``runner.step`` raise KeyboardInterrupt inside an engine step, ``steps`` steps after
    the first run finished: Ctrl-C as a command meets it, in the middle of the engine's work."""
    step, seen = runner.step, {"finished": 0, "after": 0}

    def step_then_ctrl_c():
        if seen["finished"]:
            seen["after"] += 1
            if seen["after"] > steps:
                raise KeyboardInterrupt
        finished = step()
        seen["finished"] += len(finished)
        return finished

    monkeypatch.setattr(runner, "step", step_then_ctrl_c)


def record_to_end(backend, request: SampleRequest, **options) -> Run:
    """Record one request through a backend to its end and return the finished Run (``options``:
    ``record``'s, e.g. ``watch``, ``labels``). Any caller's loop will do: EngineHost.stream hands
    the engine's items to whichever loop asks."""

    return asyncio.run(base.record_to_end(backend, request, **options))


def taken_alike(record_pair: Callable[[], tuple[Run, Run]], tries: int = 3) -> tuple[Run, Run]:
    """Two runs of one seeded request (``record_pair`` records them) whose children the engine
    took in the same steps, so that their tokens must agree. The engine's gate admits a run's
    children in one step (sampling/admission.py), so the first pair should do; were a step to
    start before the last child arrived, the batches would differ, the seeded tokens might too,
    and the records must say so (``why_different``), which is checked here. At most ``tries``
    pairs; fails naming the steps."""
    from playground.analysis import admission, why_different

    for _ in range(tries):
        a, b = record_pair()
        if admission(a) == admission(b):
            return a, b
        assert any("different steps" in reason for reason in why_different(a, b)), why_different(a, b)
    raise AssertionError(f"the engine took the children in different steps in {tries} pairs of runs: "
                         f"{admission(a)} vs {admission(b)}")


async def collect(generator) -> list[Event]:
    """Every output of a generate() call, copied as it arrives (CUMULATIVE lists are live)."""
    events = []
    async for output in generator:
        events.append(observation_from_output(output, 0.0).event)
    return events


def final_token_ids(events: list[Event], output_kind: str) -> dict[int, list[int]]:
    """Each index's final token ids, assembled the way a consumer of that output_kind must."""
    final: dict[int, list[int]] = {}
    for event in events:
        for out in event.outputs:
            if output_kind == "DELTA":
                final.setdefault(out.index, []).extend(out.token_ids)
            else:
                final[out.index] = list(out.token_ids)
    return final


def assert_finishes_once_at_the_end(events: list[Event], n: int) -> None:
    """Only the last output is finished; every index finishes, and never appears after that."""
    assert [e.finished for e in events] == [False] * (len(events) - 1) + [True]
    finished_at: dict[int, int] = {}
    for number, event in enumerate(events):
        for out in event.outputs:
            assert out.index not in finished_at, f"index {out.index} appeared after its finish"
            if out.finish_reason is not None:
                finished_at[out.index] = number
    assert sorted(finished_at) == list(range(n))
