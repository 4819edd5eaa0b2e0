"""Open a saved run: a bundle the page exported, or the JSONL that ``batch`` or ``sweep`` wrote,
shown by every panel without the engine.

All or nothing: the file is read whole first (``playground.bundles.read_runs``), and a file that
is not bundles, or holds one from a newer playground, is refused with the reader's sentence (it
names the line) before anything on the page changes. Then one run is shown like a finished run;
several go to History (the last one shown); a sweep is drawn by the Sweep tab too; and all of them
join the Compare tab's lists.
"""

from __future__ import annotations

import asyncio

import gradio as gr

from playground import analysis
from playground.bundles import DEFAULT_LIMITS, ReadLimits, read_runs
from playground.errors import InvalidBundle
from playground.run import Run
from playground.ui.compare_panel import CompareTab
from playground.ui.handlers import HISTORY_SIZE, Handlers, remember
from playground.ui.sweep_panel import SweepTab

LABEL = "Open a saved run: a bundle (.json) or the JSONL that batch or sweep wrote"


def read_upload(path: str | None, limits: ReadLimits = DEFAULT_LIMITS) -> list[Run]:
    """An uploaded file -> its runs; gr.Error with the reader's sentence (naming the line) for a file
    that is not bundles, or is over ``limits``, so the handler changes nothing."""
    if not path:
        raise gr.Error("Choose a file first: a run bundle (.json) or the JSONL that batch or sweep wrote.")
    try:
        runs = read_runs(path, limits)
    except InvalidBundle as e:
        raise gr.Error(str(e)) from None
    if not runs:
        raise gr.Error("The file holds no run bundle.")
    return runs


def is_sweep(runs: list[Run]) -> bool:
    """Several runs that each carry the same sweep's mark."""
    params = {analysis.sweep_info(r).get("param") for r in runs}
    return len(runs) > 1 and len(params) == 1 and None not in params


class Opener:
    def __init__(self, h: Handlers, sweep: SweepTab, compare: CompareTab, tabs: gr.Tabs,
                 limits: ReadLimits = DEFAULT_LIMITS):
        self.h, self.sweep, self.compare, self.tabs, self.limits = h, sweep, compare, tabs, limits
        self.upload = gr.File(label=LABEL, file_types=[".json", ".jsonl"], type="filepath", elem_id="upload-runs")
        self.note = gr.Markdown(elem_id="upload-note")

    def wire(self) -> None:
        c = self.h.c
        outputs = [*self.h.outputs(), *self.sweep.outputs(), self.compare.uploads, self.compare.a, self.compare.b,
                   self.note, self.tabs]
        # A refused file is a toast; nothing else changes (no progress badge over the panels either). Either
        # way the box is emptied for the next file: the note (or the toast) names the one just read.
        # (Gradio 6.31 runs a .then() only after a success, so the emptying follows both outcomes.)
        opened = self.upload.upload(self.open, [self.upload, c.history, self.compare.uploads, self.sweep.runs],
                                    outputs, inputs_kwargs={**self.h.controls(), "sweep_answer": self.sweep.answer,
                                                            "sweep_pattern": self.sweep.pattern},
                                    show_progress="hidden",
                                    api_visibility="private")
        for after in (opened.success, opened.failure):
            after(lambda: None, None, self.upload, show_progress="hidden", api_visibility="private")

    async def open(self, path, history, uploads, sweep_runs, sweep_answer=None, sweep_pattern=None,
                   **settings) -> dict:
        runs = await asyncio.to_thread(read_upload, path, self.limits)  # gr.Error: nothing changes
        most = len(self.h.c.texts)
        if any(run.n > most for run in runs):
            widest = max(run.n for run in runs)
            raise gr.Error(f"The file holds a run of n={widest}, and this page shows at most {most} samples: "
                           f"start it with --max-n {widest} to open it.")
        sweep = is_sweep(runs)
        if sweep:
            runs = analysis.sweep_order(runs)
            measures = self.sweep.measures_for(sweep_answer, sweep_pattern)  # gr.Error: nothing changes
        for run in runs[:-1]:
            history = remember(history or [], run)
        update = await self.h.show(runs[-1], history, set_n=True, settings=settings)
        if sweep:
            update.update({**await self.sweep.draw(runs, measures=measures), self.sweep.runs: runs,
                           self.tabs: gr.update(selected="sweep")})
        update.update(self.compare.add(runs, update[self.h.c.history], uploads,
                                       runs if sweep else sweep_runs))
        update[self.note] = note(runs, sweep, path)
        return update


def note(runs: list[Run], sweep: bool, path: str) -> str:
    name = str(path).replace("\\", "/").rsplit("/", 1)[-1]
    if len(runs) == 1:
        return f"Opened **{name}**: run `{runs[0].request.get('request_id')}` is on screen, in every panel."
    kept = (f" History keeps the last {HISTORY_SIZE}; every run is in the Compare tab's lists."
            if len(runs) > HISTORY_SIZE else " They are in History and in the Compare tab's lists.")
    if sweep:
        info = analysis.sweep_info(runs[0])
        return (f"Opened **{name}**: a sweep of {len(runs)} {info.get('param')} values, drawn in the Sweep tab; "
                f"the last is on screen.{kept}")
    return f"Opened **{name}**: {len(runs)} runs; the last is on screen.{kept}"
