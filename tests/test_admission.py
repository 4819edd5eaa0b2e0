"""A run's children enter the engine in one step (playground.sampling.admission): on the real
engine through both front ends, and the gate's ordering under cancellation and concurrency."""

from __future__ import annotations

import asyncio

import pytest

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
    a cancellation and under two runs at once cannot be made to happen on demand on a real engine."""

    def __init__(self):
        self.log: list[str] = []

    async def pause_scheduler_async(self, mode, clear_cache):
        self.log.append(f"pause {mode} {clear_cache}")
        await asyncio.sleep(0)

    async def resume_scheduler_async(self):
        self.log.append("resume")
        await asyncio.sleep(0)


class Engine:
    def __init__(self):
        self.engine_core = Core()


def test_the_scheduler_resumes_whatever_ends_the_adds_and_one_run_passes_at_a_time():
    async def main() -> list[str]:
        engine = Engine()
        gate = Gate(engine)

        async def run(name: str, fail: BaseException | None = None) -> None:
            async with gate.together():
                engine.engine_core.log.append(f"add {name}")
                await asyncio.sleep(0)  # another run would get in here without the gate's lock
                engine.engine_core.log.append(f"add {name} again")
                if fail is not None:
                    raise fail

        with pytest.raises(ValueError):
            await run("bad", ValueError("refused by the engine"))
        cancelled = asyncio.ensure_future(run("closed tab"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        await asyncio.gather(run("a"), run("b"))
        return engine.engine_core.log

    log = asyncio.run(main())
    assert log == ["pause keep False", "add bad", "add bad again", "resume",
                   "pause keep False", "add closed tab", "resume",
                   "pause keep False", "add a", "add a again", "resume",
                   "pause keep False", "add b", "add b again", "resume"]


def test_an_engine_without_the_pause_gets_the_children_as_before():
    async def main() -> bool:
        async with Gate(object()).together():
            return True

    assert asyncio.run(main())
    with Gate(object()).together_sync():
        pass
