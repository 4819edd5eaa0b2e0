"""History's Replay: a run of the session's history (or of an opened file) streams again as it
streamed, at its recorded pace or faster, into the samples area and every live panel.

The replay is a run of its own (its record says ``replay: {of, pace}``, so the summary, History,
Compare and exports name it), recorded through the same seam as an engine's run: a
``ReplayBackend`` over the one run, followed by the page's own run handler (``running.stream``) as
a branch is. Stop ends it as it ends any run: aborted, each sample's tokens so far kept. The
engine is not touched.

A refusal (no run picked, a speed that is not one, a run with nothing to replay, a run still going)
is written beside the button rather than raised: the pinned Gradio shows no toast for an error of an
event outside the queue (the browser gets an HTTP 500 and the page only says "Error").
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground.analysis.replays import at_pace
from playground.backends.live import State
from playground.backends.pace import Pace
from playground.backends.replay import ReplayBackend
from playground.backends.replay_library import check_replayable, source_request
from playground.errors import InvalidBundle, PlaygroundError
from playground.run import Run
from playground.ui import running
from playground.ui.markdown import plain
from playground.ui.messages import said
from playground.ui.page import Page
from playground.ui.saved_runs import stored_run

SPEEDS = ["recorded", "x2", "x4", "x10", "x100", "1000 tok/s", "10000 tok/s"]


@dataclass
class ReplayControls:
    pace: gr.Dropdown
    button: gr.Button
    note: gr.Markdown  # what Replay did, or why it did not


def declare() -> ReplayControls:
    """The controls, declared in the current layout (the History tab)."""
    with gr.Row():
        pace = gr.Dropdown(SPEEDS, value="recorded", allow_custom_value=True, label="Replay speed",
                           info="recorded, a speed-up like x4, or a rate like 10000 tok/s", elem_id="replay-pace")
        button = gr.Button("Replay the picked run", elem_id="replay")
    note = gr.Markdown(elem_id="replay-note")
    return ReplayControls(pace, button, note)


def connect(controls: ReplayControls, page: Page, pick: gr.Dropdown, saved=None) -> gr.events.Dependency:
    """Replay's two steps, as Run's: checked outside the queue, then streamed. Returns the stream's
    event (Stop cancels it). ``saved``: the History tab's saved runs (``saved_runs.SavedRuns``), whose
    picked run is replayed when the session's list has none picked (after a reload it is empty)."""
    store = saved.keeper.store if saved is not None and saved.keeper is not None and saved.pick is not None else None
    started = controls.button.click(partial(begin, page, controls, store=store),
                                    [page.action, page.history, pick, controls.pace,
                                     *([saved.pick] if store is not None else [])],
                                    [page.action, page.summary, controls.note, *page.streaming_outputs(),
                                     *page.said_outputs()], queue=False,
                                    show_progress="hidden",
                                    api_visibility="private")
    return running.run_events(started, page, partial(stream, page), partial(finish, page),
                              ended=(ended_note, [page.action], [controls.note]))


async def begin(page: Page, controls: ReplayControls, action: running.Action | None, history: list | None, index,
                pace_text: str | None, saved_key: str | None = None, store=None) -> dict:
    """The picked run (of the session's list, else the saved run picked) and the speed, checked and
    planned on a ReplayBackend over that run, become this session's action; a refusal is the
    note's, and nothing else changes."""
    if action is not None and action.going:  # said before a run is looked for
        return {controls.note: f"⚠️ {running.BUSY}"}
    if history and index is not None and 0 <= int(index) < len(history):
        source: Run | None = history[int(index)]
    elif saved_key and store is not None:
        try:
            source = await asyncio.to_thread(stored_run, store, saved_key)
        except gr.Error as e:
            return {controls.note: f"⚠️ {plain(said(e))}"}
        if source is None:
            return {controls.note: "⚠️ That saved run is no longer in the store: the oldest are removed when it is "
                                   "full."}
    else:
        return {controls.note: "⚠️ Pick a run first, in this session's list or among the saved runs: Replay streams "
                               "it again."}
    rid = source.request.get("request_id")
    try:
        pace = Pace.parse(pace_text)
        check_replayable(source)
        backend = ReplayBackend.of([source], name=f"run {rid}", max_n=page.backend.limits.max_n)
        request, _ = source_request(source)
        labels = {"replay": {"of": rid, "pace": pace.label}}
        action = await running.plan_action(page, action, "Replay", [(request, labels)], backend=backend)
    except InvalidBundle as e:
        return {controls.note: f"⚠️ Run `{rid}` cannot be replayed: {plain(e)}."}
    except PlaygroundError as e:
        return {controls.note: f"⚠️ {plain(e)}"}
    return {page.action: action,
            page.summary: f"⏳ replaying `{rid}` {at_pace(pace.label)}…", **running.streaming_marks(page, source),
            controls.note: f"Replay of `{rid}` {at_pace(pace.label)}: it streams in the samples area above, whose "
                           "summary says how it goes (Stop ends it), and joins History as a run of its own.",
            **page.saying("")}  # what an earlier press did is over, as at Run


def ended_note(action: running.Action | None):
    """The note once the replay has ended, in the past tense: how it ended, and the run it made."""
    if action is None or action.name != "Replay" or not action.runs or action.runs[0].going:
        return gr.skip()
    live = action.runs[0]
    of = live.prepared.labels.get("replay") or {}
    how = {"finished": "played to its end", "stopped": "was stopped"}.get(
        live.state.value, f"ended: {live.state.value}{f' ({live.reason})' if live.reason else ''}")
    if live.state is State.STOPPED and not live.stop_asked:  # nobody pressed Stop: the run it plays was stopped
        how = f"played to its end, where `{of.get('of', '?')}` was stopped"
    made = f"; `{live.request_id}` joined History as a run of its own" if live.run is not None else ""
    return f"Replay of `{of.get('of', '?')}` {at_pace(of.get('pace'))} {how}{made}."


async def stream(page: Page, action: running.Action | None, session):
    """The page's run handler, on the action's ReplayBackend (nothing to do when Replay refused,
    or a Stop came first)."""
    async for update in _on_replay(running.stream, page, action, session):
        yield update


async def finish(page: Page, action: running.Action | None, history: list | None, session, selected: str | None,
                 **settings):
    """The page's end of a run, on the action's ReplayBackend."""
    async for update in _on_replay(running.finish, page, action, history, session, selected, **settings):
        yield update


async def _on_replay(handler, page: Page, action: running.Action | None, *args, **kwargs):
    """``handler``'s updates with the page's backend the action's ReplayBackend; nothing to do
    when the session's action is not a Replay."""
    if action is None or action.name != "Replay":
        yield {page.summary: gr.skip()}
        return
    async for update in handler(dataclasses.replace(page, backend=action.about), action, *args, **kwargs):
        if isinstance(update, dict):  # the status line is the app's engine's, which a replay leaves as it was
            update.pop(page.status, None)
        yield update
