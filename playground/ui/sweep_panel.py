"""The "Sweep" tab: the page's request run once per value of one setting, same seeds, one run after
another, with the grid (rows: values, columns: sample indices) and the chart of the measures against
the value filling in as each run finishes. Stop ends the sweep and keeps the runs that finished.

Declared with ``build(h)`` inside the page's ``gr.Tabs``, hooked up with ``.wire(form)`` once
the page's handlers are bound (as the QA tab is). ``show(runs)`` draws any list of runs of one
sweep, e.g. a sweep JSONL someone opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import gradio as gr

from playground import analysis
from playground.backends.base import record
from playground.errors import InvalidRequest
from playground.run import Run
from playground.sampling.sweep_request import MAX_SWEEP_VALUES, SWEEP_SETTINGS, SweepRequest
from playground.ui.answers import once_per_run, optional_controls, with_chosen_answers
from playground.ui.form import request_from_form
from playground.ui.handlers import Handlers
from playground.ui.messages import shown
from playground.ui.streaming import paced

INTRO = ("Runs the request above once per value of one setting (or once per base seed), **one run after "
         "another, with the same seeds**: sample i keeps seed + i in every row, so what changes down a column "
         f"comes from the setting. At most {MAX_SWEEP_VALUES} values; n and max_tokens come from above. Other "
         "runs on the engine at the same time change the batch, and with it seeded tokens.")
HIDDEN_COLUMNS = ["position", "param", "request_id"]  # the row's label says them


def build(h: Handlers, measures: analysis.Measures | None = None, chart: list[str] | None = None) -> SweepTab:
    """Declare the tab in the current ``gr.Tabs``; call ``.wire(form)`` once ``h`` is bound.
    ``measures``: extra per-run measures for the table and chart (the set measures); ``chart``: the
    measures to draw (default: every numeric one)."""
    return SweepTab(h, measures, chart)


async def stream_sweep(backend, sweep: SweepRequest,
                       interval: float = 0.5) -> AsyncIterator[tuple[list[Run], Run | None]]:
    """Run the sweep's values one after another through ``record``; yield ``(finished runs, the
    run in progress or None)`` at most every ``interval`` s while a run streams (None between
    events too: a heartbeat, so a closed tab is noticed) and once as each run finishes.

    Closing this generator (Stop, a closed tab) aborts the run in progress; the finished ones are
    whatever was last yielded.
    """
    sweep.fix_seed()
    finished: list[Run] = []
    for position, request in enumerate(sweep.requests()):
        run = None
        # aclosing: a stopped sweep aborts the run in progress now, not when it is collected.
        async with contextlib.aclosing(paced(record(backend, request), interval=interval)) as snapshots:
            async for snapshot in snapshots:
                if snapshot is not None:
                    run = sweep.mark(snapshot, position)
                if run is not None and not run.finished:
                    yield finished, run
        if run is not None:
            finished = [*finished, run]  # a new list: the caller may hold the previous one
            yield finished, None


class SweepTab:
    def __init__(self, h: Handlers, measures: analysis.Measures | None = None, chart: list[str] | None = None):
        self.h, self.measures, self.chart_names = h, measures, chart
        with gr.Tab("Sweep", id="sweep", elem_id="tab-sweep"):
            gr.Markdown(INTRO)
            with gr.Row():
                self.param = gr.Dropdown(list(SWEEP_SETTINGS), value="temperature", label="Setting to sweep",
                                         elem_id="sweep-param")
                self.values = gr.Textbox(value="0.3 0.7 1.0 1.3", label="Values (spaces or commas)",
                                         elem_id="sweep-values")
                self.run_btn = gr.Button("Run the sweep", variant="primary", elem_id="sweep-run")
                self.stop_btn = gr.Button("Stop", variant="stop", elem_id="sweep-stop")
            with gr.Row():
                # How answers are read for the majority's vote share (self-consistency) per value.
                self.answer, self.pattern = optional_controls("Chart the majority answer, read as", "sweep")
            self.status = gr.Markdown(elem_id="sweep-status")
            self.grid = gr.HTML(elem_id="sweep-grid")
            self.chart = gr.Plot(label="Figures against the value", elem_id="sweep-chart")
            # Hidden until the first run: an empty Dataframe shows a grid headed "1 2 3".
            self.table = gr.Dataframe(label="Per value", interactive=False, visible=False, elem_id="sweep-table")
            with gr.Row():
                self.report = gr.DownloadButton("Sweep report (HTML)", value=None, elem_id="sweep-report")
                self.bundles = gr.DownloadButton("Sweep bundles (JSONL)", value=None, elem_id="sweep-bundles")
            self.runs = gr.State([])  # the finished runs, in value order: what Stop keeps

    def outputs(self) -> list:
        return [self.status, self.grid, self.chart, self.table, self.report, self.bundles, self.runs]

    def answer_controls(self) -> list:
        return [self.answer, self.pattern]

    def wire(self, form: dict) -> None:
        """Hook up the events; ``form`` is the run form's components by SampleRequest field name."""
        # One sweep at a time on the engine: the runs should share the engine with as little as possible.
        event = self.run_btn.click(self.run, [self.param, self.values, *self.answer_controls()], self.outputs(),
                                   inputs_kwargs=form, concurrency_limit=1, concurrency_id="sweep",
                                   api_visibility="private")
        self.stop_btn.click(None, None, None, cancels=[event], api_visibility="private").then(
            self.stopped, [self.runs, *self.answer_controls()], self.outputs(), api_visibility="private")
        # Another way of reading answers redraws the runs at hand; nothing runs again.
        for trigger in (self.answer.change, self.pattern.submit):
            trigger(self.redraw, [self.runs, *self.answer_controls()], [self.chart, self.table, self.report],
                    api_visibility="private")

    # --- handlers -------------------------------------------------------------------------------

    async def run(self, param, values, answer=None, pattern=None, **settings):
        """Run the sweep (the page's form as ``settings``); each value's row fills as its run finishes."""
        sweep = sweep_from_ui(settings, param, values, self.h.backend.limits)
        measures = self.measures_for(answer, pattern)  # a bad pattern is refused before anything runs
        started = time.monotonic()
        yield {self.status: f"⏳ starting a sweep of {len(sweep.values)} {sweep.param} values…",
               self.grid: "", self.chart: None, self.runs: [], self.table: gr.update(visible=False)}
        try:
            async with contextlib.aclosing(stream_sweep(self.h.backend, sweep)) as stream:
                async for finished, live in stream:
                    if live is not None:
                        tokens = sum(len(s.token_ids) for s in live.samples)
                        yield {self.status: f"● {sweep.param}={live.request['sweep']['value']} (value "
                                            f"{len(finished) + 1} of {len(sweep.values)}): {tokens} tokens · "
                                            f"{time.monotonic() - started:.0f} s",
                               self.grid: analysis.grid_html([*finished, live])}
                    else:
                        final = len(finished) == len(sweep.values)
                        yield {**await self.draw(finished, final=final, measures=measures), self.runs: finished}
        except Exception as e:
            raise shown(e) from None

    async def stopped(self, runs: list[Run] | None, answer=None, pattern=None) -> dict:
        """After Stop: the runs that finished, as they are (the one in progress was aborted)."""
        return await self.draw(runs or [], stopped=True, measures=self.measures_for(answer, pattern))

    async def redraw(self, runs: list[Run] | None, answer=None, pattern=None) -> dict:
        """The chart, table and report of the runs at hand, with answers read the new way."""
        if not runs:
            return {}
        update = await self.draw(runs, measures=self.measures_for(answer, pattern))
        return {c: update[c] for c in (self.chart, self.table, self.report)}

    def measures_for(self, answer: str | None, pattern: str | None) -> analysis.Measures | None:
        """The tab's measures, plus the majority answer's vote share when an extractor is chosen."""
        return with_chosen_answers(self.measures, answer, pattern)

    # --- drawing --------------------------------------------------------------------------------

    async def draw(self, runs: list[Run], **kwargs) -> dict:
        """``show`` off the event loop: the set measures of every run cost, and other sessions stream."""
        return await asyncio.to_thread(self.show, runs, **kwargs)

    def show(self, runs: list[Run], final: bool = True, stopped: bool = False,
             measures: analysis.Measures | None = None) -> dict:
        """The tab's components for ``runs`` (of one sweep); ``final`` also writes the downloads.
        ``measures``: default the tab's own (no answers read)."""
        update = {self.status: status(runs, stopped), self.grid: analysis.grid_html(runs), self.chart: None}
        if not runs:
            return update
        table = analysis.sweep_table(runs, measures or once_per_run(self.measures))  # one table: chart, rows, report
        names = [*self.chart_names, "vote_share"] if self.chart_names is not None else None
        update[self.chart] = analysis.sweep_chart(runs, names=names, table=table)
        shown = table.drop(columns=[c for c in HIDDEN_COLUMNS if c in table]).round(3)
        update[self.table] = gr.update(value=shown, visible=True)
        if final:
            update[self.report], update[self.bundles] = self.export(runs, table)
        return update

    def export(self, runs: list[Run], table) -> tuple[str, str]:
        stem = self.h.export_dir / f"sweep-{runs[0].request.get('request_id', 'run')}"
        report, bundles = stem.with_suffix(".html"), stem.with_suffix(".jsonl")
        report.write_text(analysis.sweep_report(runs, table=table), encoding="utf-8")
        bundles.write_text("".join(run.to_json() + "\n" for run in runs), encoding="utf-8")
        return str(report), str(bundles)


def sweep_from_ui(settings: dict, param, values, limits) -> SweepRequest:
    """The page's form (by field name) and the sweep's two boxes -> a checked SweepRequest, or
    gr.Error (a sentence)."""
    base = request_from_form(**settings)
    try:
        sweep = SweepRequest.of(base, param or "", values or "")
        sweep.check(limits)
    except InvalidRequest as e:
        raise gr.Error(str(e)) from None
    return sweep


def status(runs: list[Run], stopped: bool = False) -> str:
    if not runs:
        return "■ stopped before the first value finished" if stopped else ""
    info = analysis.sweep_info(runs[0])
    total = len(info.get("values") or runs)
    done = f"{len(runs)} of {total} {info.get('param', 'setting')} values" if info else f"{len(runs)} runs"
    seed = runs[0].request.get("seed")
    head = "✔ finished" if len(runs) >= total else "■ stopped" if stopped else "●"
    return f"{head} · {done} · base seed {seed} · n={runs[0].n}"
