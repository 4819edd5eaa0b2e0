"""The "Sweep" tab: the page's request run once per value of one setting, same seeds, one run after
another, with the grid (rows: values, columns: sample indices) and the chart of the measures against
the value filling in as each run finishes. Stop ends the sweep and keeps the runs that finished.

Declared with ``declare()`` inside the page's ``gr.Tabs``; ``connect(tab, page)`` hooks its
events up once the page is whole. ``show(tab, runs)`` draws any list of runs of one sweep, e.g. a
sweep JSONL someone opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground import analysis
from playground.analysis import with_reference
from playground.backends.live import LiveRun, State
from playground.errors import InvalidRequest, PlaygroundError
from playground.run import Run
from playground.sampling.sweep_request import MAX_SWEEP_VALUES, SWEEP_SETTINGS, SweepRequest, seed_overlap_note
from playground.ui.answer_controls import (
    NO_ANSWER,
    once_per_run,
    optional_controls,
    waiting_for_pattern,
    with_chosen_answers,
)
from playground.ui.downloads import download_path
from playground.ui.form import request_from_form
from playground.ui.markdown import plain
from playground.ui.messages import refusal, said, warn, warned
from playground.ui.running import BUSY, Action, Busy, open_refusal, plan_action, refused
from playground.ui.showing import join_history, show_opened
from playground.ui.streaming import paced
from playground.ui.waiting import SWEEP

INTRO = ("Runs the request above once per value of one setting (or once per base seed), **one run after "
         "another, with the same seeds**: sample i keeps seed + i in every row, so what changes down a column "
         f"comes from the setting. At most {MAX_SWEEP_VALUES} values; n and max_tokens come from above. Other "
         "runs on the engine at the same time change the batch, and with it seeded tokens.")
HIDDEN_COLUMNS = ["position", "param", "request_id"]  # the row's label says them
# The values box as a setting is picked: base seeds 4 of them n apart, so no two runs share a child seed.
DEFAULT_VALUES = {"temperature": "0.3 0.7 1.0 1.3", "top_p": "0.5 0.8 0.95 1.0", "top_k": "5 20 50 0",
                  "min_p": "0 0.05 0.1 0.2", "presence_penalty": "-1 0 1", "frequency_penalty": "-1 0 1",
                  "repetition_penalty": "0.8 1.0 1.2", "seed": "1:4"}


async def stream_sweep(backend, runs: list[LiveRun],
                       interval: float = 0.5) -> AsyncIterator[tuple[list[Run], Run | None]]:
    """Follow a sweep's planned runs (one per value, in order) one after another; yield
    ``(finished runs, the run in progress or None)`` at most every ``interval`` s while a run
    streams (None between events too: a heartbeat, so a closed tab is noticed) and once as each
    run finishes.

    A Stop (the session's action stopped) aborts the run in progress, and the runs after it never
    start: the stream ends with the runs that finished. Closing this generator (a closed tab) aborts
    the run in progress too; a run that fails raises what failed it.
    """
    finished: list[Run] = []
    for live_run in runs:
        # aclosing: a closed tab aborts the run in progress now, not when it is collected.
        async with contextlib.aclosing(paced(live_run.follow(backend), interval=interval)) as snapshots:
            async for snapshot in snapshots:
                run = snapshot or live_run.run
                if run is not None and not run.finished:
                    yield finished, run
        if live_run.state is not State.FINISHED:
            return
        finished = [*finished, live_run.run]  # a new list: the caller may hold the previous one
        yield finished, None


@dataclass
class SweepTab:
    """The tab's components; ``measures``: extra per-run measures for its table and chart (the set
    measures); ``chart_names``: the measures to draw (default: every numeric one)."""

    param: gr.Dropdown
    values: gr.Textbox
    run_btn: gr.Button
    stop_btn: gr.Button
    answer: gr.Dropdown
    pattern: gr.Textbox
    reference: gr.Textbox
    status: gr.Markdown
    grid: gr.HTML
    chart: gr.Plot
    table: gr.Dataframe
    report: gr.DownloadButton
    bundles: gr.DownloadButton
    pick: gr.Dropdown  # a value's run, opened in every tab (the grid shows only its first words)
    runs: gr.State  # the finished runs, in value order: what Stop keeps
    measures: analysis.Measures | None = None
    chart_names: list[str] | None = None

    def outputs(self) -> list:
        return [self.status, self.grid, self.chart, self.table, self.report, self.bundles, self.pick, self.runs]

    def answer_controls(self) -> list:
        return [self.answer, self.pattern]

    def measures_for(self, answer: str | None, pattern: str | None,
                     reference: str | None = None) -> analysis.Measures | None:
        """The tab's measures, plus the majority answer's vote share when an extractor is chosen, or
        a reference answer is given (read as the whole text, unless another way is chosen)."""
        if reads_whole_text(answer, reference):
            answer = analysis.DEFAULT_EXTRACTOR
        return with_chosen_answers(self.measures, answer, pattern)


def reads_whole_text(answer: str | None, reference: str | None) -> bool:
    """A reference answer given with no way of reading answers picked: each sample's whole text is
    its answer (``measures_for``), which the status then says."""
    return bool((reference or "").strip()) and answer in (None, NO_ANSWER)


def declare(measures: analysis.Measures | None = None, chart: list[str] | None = None) -> SweepTab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("Sweep", id="sweep", elem_id="tab-sweep"):
        gr.Markdown(INTRO)
        with gr.Row():
            param = gr.Dropdown(list(SWEEP_SETTINGS), value="temperature", label="Setting to sweep",
                                elem_id="sweep-param")
            values = gr.Textbox(value=DEFAULT_VALUES["temperature"], label="Values (spaces or commas; base seeds "
                                "also FROM:COUNT, n apart)", elem_id="sweep-values")
            run_btn = gr.Button("Run the sweep", variant="primary", elem_id="sweep-run")
            stop_btn = gr.Button("Stop", variant="stop", elem_id="sweep-stop")
        with gr.Row():
            # How answers are read for the majority's vote share (self-consistency) per value.
            answer, pattern = optional_controls("Chart the majority answer, read as", "sweep")
            reference = gr.Textbox(label="Reference answer (adds pass@1 and pass@n)", elem_id="sweep-reference")
        status_ = gr.Markdown(elem_id="sweep-status")
        grid = gr.HTML(elem_id="sweep-grid")
        chart_ = gr.Plot(label="Figures against the value", elem_id="sweep-chart")
        # Hidden until the first run: an empty Dataframe shows a grid headed "1 2 3".
        table = gr.Dataframe(label="Per value", interactive=False, visible=False, elem_id="sweep-table")
        with gr.Row():
            report = gr.DownloadButton("Sweep report (HTML)", value=None, interactive=False, elem_id="sweep-report")
            bundles = gr.DownloadButton("Sweep bundles (JSONL)", value=None, interactive=False, elem_id="sweep-bundles")
            pick = gr.Dropdown([], value=None, label="Open a value's run in every tab", interactive=False,
                               elem_id="sweep-open")
        runs = gr.State([])
    return SweepTab(param, values, run_btn, stop_btn, answer, pattern, reference, status_, grid, chart_, table,
                    report, bundles, pick, runs, measures, chart)


def connect(tab: SweepTab, page) -> None:
    """Hook up the events; the run form's components come from ``page``. The sweep is the
    session's action while it goes, as a run is (``running``): Run is refused meanwhile, and every
    Stop on the page (this tab's too, connected with the page's) ends it."""
    started = tab.run_btn.click(partial(begin, tab, page), [page.action, tab.param, tab.values,
                                                             *tab.answer_controls(), tab.reference],
                                [page.action, *tab.outputs()], inputs_kwargs=page.form, queue=False,
                                show_progress="hidden", api_visibility="private")
    # One sweep at a time on the engine: the runs should share the engine with as little as possible.
    ran = started.success(partial(run, tab, page), [page.action, *tab.answer_controls()], tab.outputs(),
                          concurrency_limit=1, concurrency_id=SWEEP, api_visibility="private")
    # Then its runs join History (and the run store), each openable in every tab: the sweep's grid
    # shows the texts, the tabs show one value's run whole. A Stop ends the run's event too, with
    # the runs that finished in ``tab.runs``.
    ran.then(partial(join_history, page), [page.history, tab.runs, page.samples.session], page.history_outputs(),
             show_progress="hidden", api_visibility="private")
    # Another way of reading answers redraws the runs at hand; nothing runs again.
    gr.on([tab.answer.change, tab.pattern.submit, tab.reference.submit, tab.reference.blur], partial(redraw, tab, page),
          [tab.runs, *tab.answer_controls(), tab.reference], [tab.chart, tab.table, tab.report, tab.bundles],
          trigger_mode="always_last", api_visibility="private")
    # A value's run on the page, whole: the summary, the samples area and every tab show it.
    tab.pick.input(partial(open_value, page), [tab.pick, tab.runs, *page.inputs()],
                   [*page.outputs(), *page.said_outputs()],
                   inputs_kwargs=page.opening(), api_visibility="private")
    # A seed sweep offers base seeds n apart: runs that share no child seed are independent.
    tab.param.change(lambda param: DEFAULT_VALUES.get(param, ""), tab.param, tab.values, api_visibility="private")


# --- handlers -----------------------------------------------------------------------------------

async def begin(tab: SweepTab, page, action: Action | None, param, values, answer=None, pattern=None,
                reference=None, **settings) -> dict:
    """Run the sweep, outside the queue: the form (``settings``) and the sweep's boxes checked and
    every value's run planned, or the refusal in the tab's status line with the last sweep left
    as it was; then the sweep is the session's action, and its follower (``run``) runs it."""
    try:
        sweep = sweep_from_ui(settings, param, values, page.backend.limits)
        tab.measures_for(answer, pattern, reference)  # a bad pattern too, before anything runs
        sweep.reference = (reference or "").strip() or None
        sweep.fix_seed()
        action = await plan_action(page, action, "Sweep",
                                   [(request, sweep.labels(k)) for k, request in enumerate(sweep.requests())])
    except Busy:  # the going action stays as it is
        return {tab.status: f"⚠️ {BUSY}"}
    except (gr.Error, PlaygroundError) as e:
        return {page.action: None, tab.status: refused(e, "Run the sweep")}
    action.about = sweep
    note = seed_overlap_note(sweep)
    return {page.action: action,
            tab.status: f"⏳ starting a sweep of {len(sweep.values)} {sweep.param} values…"
                        + (f"\n\n⚠️ {note}" if note else ""),
            tab.grid: "", tab.chart: None, tab.runs: [], tab.table: gr.update(visible=False),
            tab.pick: gr.update(choices=[], value=None, interactive=False)}


async def run(tab: SweepTab, page, action: Action | None, answer=None, pattern=None):
    """Follow the session's sweep: each value's row fills as its run finishes, and its end (every
    value, or what finished before a Stop) is drawn with the figures. Nothing when the action is
    not a sweep's (its button was refused)."""
    if action is None or not action.claim("follow", ("Sweep",)):
        yield {tab.status: gr.skip()}
        return
    sweep, started, finished, failed = action.about, time.monotonic(), [], None
    try:
        measures = tab.measures_for(answer, pattern, sweep.reference)
        async with contextlib.aclosing(stream_sweep(page.backend, action.runs)) as stream:
            async for finished, live in stream:
                if live is not None:
                    tokens = sum(len(s.token_ids) for s in live.samples)
                    yield {tab.status: f"● {sweep.param}={live.request['sweep']['value']} (value "
                                       f"{len(finished) + 1} of {len(sweep.values)}): {tokens} tokens so far · "
                                       f"the sweep {time.monotonic() - started:.0f} s",
                           tab.grid: analysis.grid_html([*finished, live])}
                elif len(finished) < len(sweep.values):
                    yield {**await draw(tab, page, finished, final=False, measures=measures), tab.runs: finished}
    except Exception as e:  # a value's run failed (a dead engine, a refusal only the engine makes)
        failed = said(e)
    finally:  # failed or closed: the values not begun never will, and the next Run works
        await asyncio.shield(action.stop_and_wait())
    stopped = len(finished) < len(sweep.values)
    update = (await draw(tab, page, finished, stopped=stopped, measures=measures) if finished
              else {tab.status: status([], stopped=True)})
    if finished and reads_whole_text(answer, sweep.reference):  # as measures_for read them
        whole = analysis.whole_text_reference(sweep.reference)
        update[tab.status] += (f"\n\nℹ️ With no way of reading answers picked, {whole}: pick one above (last number, "
                               "boxed, a pattern) to read an answer out of the text.")
    if failed is not None:
        warn(failed)
        update[tab.status] = (f"✖ {sweep.param}={sweep.values[len(finished)]} (value {len(finished) + 1} of "
                              f"{len(sweep.values)}) failed: {failed.rstrip('.')}. The values before it are kept.")
    yield {**update, tab.runs: finished}


async def redraw(tab: SweepTab, page, runs: list[Run] | None, answer=None, pattern=None, reference=None) -> dict:
    """The chart, table and downloads of the runs at hand, with answers read the new way, or a
    reference answer typed after the sweep ran (pass@1 and pass@n: the runs' records take it)."""
    if not runs or waiting_for_pattern(answer, pattern):
        return {}
    runs = [with_reference(run, reference) for run in runs]
    try:
        measures = tab.measures_for(answer, pattern, runs[0].request.get("reference"))
    except gr.Error as e:  # a pattern that cannot work: said, and the chart stays as it was
        return warned(said(e))
    update = await draw(tab, page, runs, measures=measures)
    return {c: update[c] for c in (tab.chart, tab.table, tab.report, tab.bundles)}


async def open_value(page, index, runs: list[Run] | None, history: list, session, selected, action=None,
                     **settings) -> dict:
    """The value's run picked, shown as History's Open shows a run, its settings in the form."""
    if not runs or index is None or not 0 <= int(index) < len(runs):
        return {}
    if why := open_refusal(action):
        return warned(why)
    run = runs[int(index)]
    update, told = await show_opened(page, run, history, session, selected, settings)
    return {**update, **page.saying(f"Opened the sweep's {plain(value_label(run))}, "  # a file's words: text
                                    f"`{run.request.get('request_id')}`: {told}")}


# --- drawing ------------------------------------------------------------------------------------

async def draw(tab: SweepTab, page, runs: list[Run], **kwargs) -> dict:
    """``show`` off the event loop: the set measures of every run cost, and other sessions stream."""
    return await asyncio.to_thread(show, tab, page.export_dir, runs, **kwargs)


def show(tab: SweepTab, export_dir, runs: list[Run], final: bool = True, stopped: bool = False,
         measures: analysis.Measures | None = None) -> dict:
    """The tab's components for ``runs`` (of one sweep); ``final`` also writes the downloads.
    ``measures``: default the tab's own (no answers read)."""
    update = {tab.status: status(runs, stopped), tab.grid: analysis.grid_html(runs), tab.chart: None,
              tab.pick: gr.update(choices=[(value_label(run), k) for k, run in enumerate(runs)], value=None,
                                  interactive=bool(runs))}
    if not runs:
        return update
    table = analysis.sweep_table(runs, measures or once_per_run(tab.measures))  # one table: chart, rows, report
    names = [*tab.chart_names, "vote_share"] if tab.chart_names is not None else None
    update[tab.chart] = analysis.sweep_chart(runs, names=names, table=table)
    if note := analysis.probabilities_note(*runs):  # the chart's "mean p": which distribution's
        update[tab.status] += f"\n\nℹ️ {note}"
    shown = analysis.sweep_table_for_people(table)  # "not within n", where the chart needs a number
    shown_table = shown.drop(columns=[c for c in HIDDEN_COLUMNS if c in shown]).round(3)
    update[tab.table] = gr.update(value=analysis.frame_in_words(shown_table), visible=True)
    if final:
        update[tab.report], update[tab.bundles] = (gr.update(value=path, interactive=True)
                                                   for path in export(export_dir, runs, table))
    return update


def export(export_dir, runs: list[Run], table) -> tuple[str, str]:
    stem = download_path(export_dir, f"sweep-{runs[0].request.get('request_id', 'run')}")
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
        raise refusal(str(e)) from None
    return sweep


def value_label(run: Run) -> str:
    """"temperature=0.7 · run-1a2b3c4d": a sweep's run as the picker lists it."""
    info = analysis.sweep_info(run)
    value = f"{info.get('param')}={info.get('value')} · " if info else ""
    return f"{value}{run.request.get('request_id')}"


def status(runs: list[Run], stopped: bool = False) -> str:
    if not runs:
        return "■ stopped before the first value finished" if stopped else ""
    info = analysis.sweep_info(runs[0])
    total = len(info.get("values") or runs)
    done = f"{len(runs)} of {total} {plain(info.get('param', 'setting'))} values" if info else f"{len(runs)} runs"
    seed = runs[0].request.get("seed")
    head = "✔ finished" if len(runs) >= total else "■ stopped" if stopped else "● running"
    return f"{head} · {done} · base seed {seed} · n={runs[0].n}"
