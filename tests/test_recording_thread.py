"""The embedded backend records a run on its engine's own thread (``EmbeddedBackend.recorded``):
what the caller's loop is told of it, and what a reader on another thread sees of it."""

from __future__ import annotations

import asyncio
import threading

from playground.backends.base import record_to_end
from playground.backends.engine import LATEST_EVERY_S, EngineHost
from playground.backends.live import LiveRun
from playground.request import SampleRequest


class Counter:
    value = 0


def test_a_caller_following_one_changing_object_hears_of_a_burst_once_and_of_its_last_change():
    """A burst of changes reaches the caller as a few items, each the object as it is by then; the
    last change of the burst is told though nothing follows it; the end always comes. (No engine:
    the hand-off between the engine's thread and any caller's loop.)"""
    host = EngineHost(lambda: None)
    counter, seen_last = Counter(), threading.Event()
    changes = 2000

    async def changing():
        yield counter
        for _ in range(changes):
            counter.value += 1
            yield counter
        # Nothing changes until the caller has been told of the last change, or 10 s have passed.
        await asyncio.get_running_loop().run_in_executor(None, seen_last.wait, 10)
        counter.value = -1
        yield counter

    async def follow() -> list[int]:
        told = []
        async for item in host.stream(changing, latest=True):
            assert item is counter
            told.append(item.value)
            if item.value == changes:
                seen_last.set()
        return told

    try:
        told = asyncio.run(follow())
    finally:
        host.shutdown()
    assert seen_last.is_set(), f"the burst's last change was never told: {told[-5:]}"
    assert told[-1] == -1 and changes in told
    assert told[:-1] == sorted(told[:-1])  # each item is the object as it is when read: never older
    assert len(told) < changes / 10, f"{len(told)} items for {changes} changes"
    assert LATEST_EVERY_S < 0.1  # a reader following the Run is never more than a moment behind


def test_a_reader_on_another_thread_sees_every_output_whole(backend):
    """While the engine's thread records a run, a reader holding ``Run.changing`` finds each
    sample's ids, texts and times of one length: no output half recorded."""
    request = SampleRequest(prompt="Once upon a time", n=8, seed=11, max_tokens=48, ignore_eos=True,
                            output_kind="DELTA", use_chat_template=False)
    checks, torn, done = [0], [], threading.Event()

    def read(live: LiveRun) -> None:
        while not done.is_set():
            run = live.run
            if run is None:
                continue
            with run.changing:
                for s in run.samples:
                    sizes = (len(s.token_ids), len(s.token_texts), len(s.token_times))
                    if len(set(sizes)) > 1:
                        torn.append((s.index, sizes))
            checks[0] += 1

    async def main():
        live = await LiveRun.plan(backend, request)
        reader = threading.Thread(target=read, args=(live,), daemon=True)
        reader.start()
        try:
            async for _ in live.follow(backend):
                pass
        finally:
            done.set()
            reader.join(10)
        return live.run

    run = asyncio.run(main())
    assert run.status == "finished" and all(len(s.token_ids) == 48 for s in run.samples)
    assert checks[0] > 0 and not torn, torn[:5]
    again = asyncio.run(record_to_end(backend, request))  # the same seed, recorded the same way
    assert [s.token_ids for s in again.samples] == [s.token_ids for s in run.samples]
