"""The History tab: this browser's saved runs (ui/saved_runs.py: kept in the run store across
reloads and restarts), the session's last runs (to reopen; branches named with the run they came
from; a warning when two of them share child seeds), and **Open a saved run**: a bundle the page
exported, or the JSONL that ``batch`` or ``sweep`` wrote, shown by every panel without the engine.

All or nothing: the file is read whole first (``playground.bundles.read_runs``), and a file that
is not bundles, or holds one from a newer playground, is refused with the reader's sentence (it
names the line) before anything on the page changes. Then one run is shown like a finished run;
several go to History (the last one shown); a sweep is drawn by the Sweep tab too; and all of them
join the Compare tab's lists.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground import analysis
from playground.bundles import DEFAULT_LIMITS, ReadLimits, read_runs
from playground.errors import InvalidBundle
from playground.run import Run
from playground.store import RunStore
from playground.ui import compare_tab, replay_action, saved_runs, sweep_tab
from playground.ui.compare_tab import CompareTab
from playground.ui.markdown import plain
from playground.ui.messages import refusal, said, warn, warned
from playground.ui.page import HISTORY_SIZE
from playground.ui.running import open_refusal
from playground.ui.saved_runs import SavedRuns
from playground.ui.showing import remember, show_opened
from playground.ui.sweep_tab import SweepTab

LABEL = "Open a saved run: a bundle (.json) or the JSONL that batch or sweep wrote"


def read_upload(path: str | None, limits: ReadLimits = DEFAULT_LIMITS) -> list[Run]:
    """An uploaded file -> its runs; gr.Error with the reader's sentence (naming the line) for a file
    that is not bundles, or is over ``limits``, so the handler changes nothing."""
    if not path:
        raise refusal("Choose a file first: a run bundle (.json) or the JSONL that batch or sweep wrote.")
    try:
        runs = read_runs(path, limits)
    except InvalidBundle as e:
        raise refusal(str(e)) from None
    if not runs:
        raise refusal("The file holds no run bundle.")
    return runs


def is_sweep(runs: list[Run]) -> bool:
    """Several runs that each carry the same sweep's mark."""
    params = {analysis.sweep_info(r).get("param") for r in runs}
    return len(runs) > 1 and len(params) == 1 and None not in params


@dataclass
class HistoryTab:
    pick: gr.Dropdown
    reopen_btn: gr.Button
    note: gr.Markdown  # seed overlaps among the runs listed
    upload: gr.File
    opened: gr.Markdown
    saved: SavedRuns
    limits: ReadLimits = DEFAULT_LIMITS
    replay: replay_action.ReplayControls | None = None  # Replay the run picked (connected by app.py: Stop cancels it)


def declare(limits: ReadLimits = DEFAULT_LIMITS, store: RunStore | None = None) -> HistoryTab:
    """The tab, declared in the current ``gr.Tabs``; ``store``: where runs are kept (None: in memory)."""
    with gr.Tab("History", id="history"):
        saved = saved_runs.declare(store)
        pick = gr.Dropdown(choices=[], label=f"Runs of this browser session (its last {HISTORY_SIZE}, newest last)",
                           type="index", elem_id="history-pick")
        reopen_btn = gr.Button("Open", elem_id="reopen")
        replay = replay_action.declare()
        note_ = gr.Markdown(elem_id="history-note")
        upload = gr.File(label=LABEL, file_types=[".json", ".jsonl"], type="filepath", elem_id="upload-runs")
        opened = gr.Markdown(elem_id="upload-note")
    return HistoryTab(pick, reopen_btn, note_, upload, opened, saved, limits, replay)


def connect(tab: HistoryTab, page, sweep: SweepTab, compare: CompareTab) -> None:
    tab.reopen_btn.click(partial(reopen, page), [tab.pick, *page.inputs()],
                         [*page.outputs(), *page.said_outputs()],
                         inputs_kwargs=page.opening(), api_visibility="private")
    outputs = [*page.outputs(), *sweep.outputs(), compare.uploads, compare.a, compare.b, tab.opened, page.tabs,
               page.selected]
    # A refused file is a warning and the note under the box; nothing else changes. Either way the box
    # is emptied for the next file: the note names the one just read. (the pinned Gradio runs a .then()
    # only after a success, so the emptying follows both outcomes.)
    opened = tab.upload.upload(partial(open_file, tab, page, sweep, compare),
                               [tab.upload, *page.inputs(), compare.uploads, sweep.runs], outputs,
                               inputs_kwargs={**page.opening(), "sweep_answer": sweep.answer,
                                              "sweep_pattern": sweep.pattern},
                               show_progress="hidden", api_visibility="private")
    for after in (opened.success, opened.failure):
        after(lambda: None, None, tab.upload, show_progress="hidden", api_visibility="private")


async def reopen(page, index, history: list, session, selected, action=None, **settings) -> dict:
    if not history or index is None or not 0 <= int(index) < len(history):
        return warned("Pick a run from the list first.")
    if why := open_refusal(action):
        return warned(why)
    run = history[int(index)]
    update, told = await show_opened(page, run, history, session, selected, settings)
    return {**update, **page.saying(f"Opened `{run.request.get('request_id')}`: {told}")}


async def open_file(tab: HistoryTab, page, sweep: SweepTab, compare: CompareTab, path, history, session, selected,
                    uploads, sweep_runs, sweep_answer=None, sweep_pattern=None, action=None, **settings) -> dict:
    """A file of runs opened: its last run on screen, every run in History and Compare, a sweep in
    the Sweep tab. A file refused is a warning and a line under the box, and nothing else changes:
    raised, the refusal would mark every output of the event "Error", the run on screen included."""
    try:
        if why := open_refusal(action):
            raise refusal(why)
        runs = await asyncio.to_thread(read_upload, path, tab.limits)
        most = page.backend.limits.max_n
        if any(run.n > most for run in runs):
            widest = max(run.n for run in runs)
            raise refusal(f"The file holds a run of n={widest}, and this page shows at most {most} samples: "
                          f"start it with --max-n {widest} to open it.")
        is_a_sweep = is_sweep(runs)
        if is_a_sweep:
            runs = analysis.sweep_order(runs)
            measures = sweep.measures_for(sweep_answer, sweep_pattern, runs[0].request.get("reference"))
    except gr.Error as e:
        reason = said(e)
        warn(reason)
        return {tab.opened: f"✖ Not opened: {plain(reason)}"}
    for run in runs[:-1]:
        history = remember(history or [], run)
    update, told = await show_opened(page, runs[-1], history, session, selected, settings)
    if is_a_sweep:
        update.update({**await sweep_tab.draw(sweep, page, runs, measures=measures), sweep.runs: runs,
                       page.tabs: gr.update(selected="sweep"), page.selected: "Sweep"})
    update.update(compare_tab.add(compare, runs, update[page.history], uploads, runs if is_a_sweep else sweep_runs))
    update[tab.opened] = f"{note(runs, is_a_sweep, path)} The run on screen: {told}"
    return update


def note(runs: list[Run], sweep: bool, path: str) -> str:
    name = plain(str(path).replace("\\", "/").rsplit("/", 1)[-1])  # a file's name is its sender's words
    if len(runs) == 1:
        return f"Opened **{name}**: run `{runs[0].request.get('request_id')}` is on screen, in every panel."
    kept = (f" History keeps the last {HISTORY_SIZE}; every run is in the Compare tab's lists."
            if len(runs) > HISTORY_SIZE else " They are in History and in the Compare tab's lists.")
    if sweep:
        info = analysis.sweep_info(runs[0])
        return (f"Opened **{name}**: a sweep of {len(runs)} {plain(info.get('param'))} values, drawn in the Sweep tab; "
                f"the last is on screen.{kept}")
    return f"Opened **{name}**: {len(runs)} runs; the last is on screen.{kept}"
