"""The samples area alone, without an engine, for its harness (``scripts/samples_harness.py``) and
its browser test: a minimal page with the component, fed a replay of any Run at the pace its
tokens arrived. A bench tool, not the product's replay (``backends/replay.py``): it paces the
component alone, with no backend, recorder or page around it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import gradio as gr

from playground.backends.synthetic import synthetic_run
from playground.run import Run, Sample
from playground.ui.samples_area import VIEWS, SamplesArea, SamplesSession


async def replay(full: Run, speed: float = 1.0) -> AsyncIterator[Run]:
    """Yield a growing copy of ``full`` as record() yields a live run: once empty, then each time
    tokens arrive (every token at its recorded time, divided by ``speed``), then finished."""
    live = Run(request=dict(full.request), samples=[
        Sample(index=s.index, seed=s.seed, logprobs=[] if s.logprobs is not None else None) for s in full.samples])
    arrivals = sorted({t for s in full.samples for t in s.token_times})
    started = time.monotonic()
    next_pos = [0] * full.n
    yield live
    for t in arrivals:
        await asyncio.sleep(max(0.0, started + t / speed - time.monotonic()))
        now = time.monotonic() - started
        for s, dst in zip(full.samples, live.samples):
            pos = next_pos[s.index]
            while pos < len(s.token_ids) and s.token_times[pos] <= t:
                dst.token_ids.append(s.token_ids[pos])
                dst.token_texts.append(s.token_texts[pos])
                dst.token_times.append(round(now, 4))
                if dst.logprobs is not None and s.logprobs:
                    dst.logprobs.append(s.logprobs[pos])
                pos += 1
            next_pos[s.index] = pos
            if pos == len(s.token_ids) and dst.finish_reason is None and pos:
                dst.finish_reason, dst.stop_reason = s.finish_reason, s.stop_reason
        yield live
    live.status, live.wall_time = "finished", time.monotonic() - started
    yield live


def demo_app(config: dict[str, Any], make_run: Callable[[dict], Run] | None = None) -> tuple[gr.Blocks, dict]:
    """A page with only the samples area, a Run button (streams a replay), a Show button (the whole
    run at once), and the selected sample as the Python listener heard it.

    ``config`` is read at each click: ``n``, ``tokens``, ``logprobs``, ``speed``, ``view``,
    ``interval`` (fixed pacing; None: paced by acks), ``window``. Returns the Blocks and a dict the
    handlers fill for measurement: ``sessions`` (each run's SamplesSession) and ``picked``.
    """
    make = make_run or (lambda c: synthetic_run(c.get("n", 32), c.get("tokens", 64), logprobs=c.get("logprobs", 5)))
    record: dict[str, Any] = {"sessions": [], "picked": [], "tokens": [], "runs": []}
    with gr.Blocks(title="samples area") as demo:
        with gr.Row():
            run_btn = gr.Button("Run", elem_id="run")
            show_btn = gr.Button("Show finished", elem_id="show")
            picked = gr.Textbox(label="selected sample (heard by Python)", elem_id="picked")
        area = SamplesArea(view=config.get("view", "auto"), window=config.get("window", 1))

        async def stream(session: SamplesSession):
            full = make(config)
            record["sessions"].append(session)
            record["runs"].append(full)
            if config.get("view") in VIEWS:
                yield area.switch(session, config["view"])
            async for run in session.paced(replay(full, config.get("speed", 1.0)), window=config.get("window"),
                                           interval=config.get("interval")):
                update = area.update(session, run)
                if update or run is None:  # a heartbeat yields; a message the ack carried back does not
                    yield update

        def show(session: SamplesSession):
            full = make(config)
            record["sessions"].append(session)
            return area.show(session, full, config.get("view") if config.get("view") in VIEWS else None)

        def heard(evt: gr.SelectData):
            record["picked"].append(evt.index)
            record["tokens"].append(evt.value.get("token"))
            return str(evt.index)

        run_btn.click(stream, [area.session], [area.html], show_progress="hidden")
        show_btn.click(show, [area.session], [area.html], show_progress="hidden")
        area.html.select(heard, None, picked, show_progress="hidden")
    return demo, record
