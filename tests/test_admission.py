"""A run's children enter the engine in one step (playground.sampling.admission): on the real
engine through both front ends, and the gate's ordering under cancellation and concurrency."""

from __future__ import annotations

import asyncio
import threading
import time
import types

import pytest
from vllm.v1.engine.exceptions import EngineDeadError

from playground.analysis import admission
from playground.backends.sync import SyncRunner
from playground.request import SampleRequest
from playground.sampling.admission import Gate
from tests.helpers import record_to_end

PROMPT = "Name a colour and a fruit:"


def test_every_child_of_a_run_is_admitted_in_the_first_step(backend, sync_engine):
    """Before the gate, the engine core often stepped on the first child alone and took the
    others at the next step ([0] then [1, ..., 7]), which changed seeded tokens."""
    request = SampleRequest(PROMPT, n=8, seed=3, max_tokens=3, output_kind="DELTA", mode="wrapper")
    runs = [record_to_end(backend, request) for _ in range(3)]
    runs += [SyncRunner(sync_engine).record(request) for _ in range(2)]
    assert [admission(run) for run in runs] == [[list(range(8))]] * 5
    assert all([s.token_ids for s in run.samples] == [s.token_ids for s in runs[0].samples] for run in runs[1:3])


class Core:
    """A stand-in for the engine core client that only logs the gate's calls: the ordering under
    a cancellation, under two runs at once and at an engine's death mid-call cannot be made to
    happen on demand on a real engine."""

    def __init__(self, answers: bool = True):
        self.log: list[str] = []
        self.answers = answers
        self.slow_pause: asyncio.Event | None = None  # set: the pause is answered once it is set
        self.resources = types.SimpleNamespace(engine_dead=False)

    async def call_utility_async(self, method, *args):
        self.log.append(" ".join(map(str, (method.split("_")[0], *args))))
        if not self.answers:  # a dead core answers nothing; the client only sets its flag
            await asyncio.Event().wait()
        if method == "pause_scheduler" and self.slow_pause is not None:
            await self.slow_pause.wait()
        await asyncio.sleep(0)


class Engine:
    def __init__(self, answers: bool = True):
        self.engine_core = Core(answers)


def test_the_scheduler_resumes_whatever_ends_the_adds_and_one_run_passes_at_a_time():
    async def main() -> list[str]:
        engine = Engine()
        core, gate = engine.engine_core, Gate(engine)

        async def run(name: str, fail: BaseException | None = None, adding: asyncio.Event | None = None) -> None:
            async with gate.together():
                core.log.append(f"add {name}")
                if adding is not None:  # a tab closed while its children are being added
                    adding.set()
                    await asyncio.Event().wait()
                await asyncio.sleep(0)  # another run would get in here without the gate's lock
                core.log.append(f"add {name} again")
                if fail is not None:
                    raise fail

        with pytest.raises(ValueError):
            await run("bad", ValueError("refused by the engine"))
        adding = asyncio.Event()
        closed = asyncio.ensure_future(run("closed tab", adding=adding))
        await adding.wait()
        closed.cancel()
        await asyncio.gather(closed, return_exceptions=True)
        core.slow_pause = asyncio.Event()  # a tab closed while the pause is on its way
        early = asyncio.ensure_future(run("never added"))
        await asyncio.sleep(0.05)
        early.cancel()
        await asyncio.gather(early, return_exceptions=True)
        core.slow_pause.set()
        core.slow_pause = None
        await asyncio.gather(run("a"), run("b"))
        return core.log

    log = asyncio.run(main())
    assert log == ["pause keep False", "add bad", "add bad again", "resume",
                   "pause keep False", "add closed tab", "resume",
                   "pause keep False", "resume",
                   "pause keep False", "add a", "add a again", "resume",
                   "pause keep False", "add b", "add b again", "resume"]


def test_an_engine_without_the_pause_gets_the_children_as_before():
    async def main() -> bool:
        async with Gate(object()).together():
            return True

    assert asyncio.run(main())
    with Gate(object()).together_sync():
        pass


def test_a_run_in_the_gate_when_the_engine_dies_is_told_so_and_no_run_waits_behind_it():
    async def main() -> tuple[list[str], float]:
        engine = Engine(answers=False)
        gate = Gate(engine)

        async def run() -> None:
            async with gate.together():
                pass

        first, second = asyncio.ensure_future(run()), asyncio.ensure_future(run())
        await asyncio.sleep(0.3)
        assert not first.done() and not second.done()  # the pause is not answered yet
        engine.engine_core.resources.engine_dead = True
        started = time.monotonic()
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert all(isinstance(r, EngineDeadError) for r in results), results
        return engine.engine_core.log, time.monotonic() - started

    log, waited = asyncio.run(main())
    assert log == ["pause keep False"] and waited < 5  # the second never sent a thing to a dead core


def test_the_synchronous_gate_is_told_of_a_death_too_and_leaves_no_thread_that_holds_up_the_exit():
    answered = threading.Event()  # never set: a dead core answers nothing
    core = types.SimpleNamespace(resources=types.SimpleNamespace(engine_dead=False),
                                 call_utility=lambda method, *args: answered.wait())
    gate = Gate(types.SimpleNamespace(engine_core=core))
    threading.Timer(0.3, lambda: setattr(core.resources, "engine_dead", True)).start()
    started = time.monotonic()
    with pytest.raises(EngineDeadError), gate.together_sync():
        pass
    assert time.monotonic() - started < 5
    assert all(t.daemon for t in threading.enumerate() if t.name == "admission")
