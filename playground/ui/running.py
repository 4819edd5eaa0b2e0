"""Run and Stop, and every other button that starts runs (Branch, What if, Replay, Compare, the QA
matrix): one model of what a browser session has going, written once.

A session holds at most one ``Action`` (in ``page.action``): the runs one button started, each a
``LiveRun`` with its state (backends/live.py). Every button is two steps. ``begin`` (outside the
queue) refuses while the session's action is going, then checks, renders and plans the runs: a
refusal is shown with its reason and nothing is stored, so the next Run works; otherwise the
session holds the action before it waits for a free slot. A refusal is returned, never raised:
outside the queue the pinned Gradio shows neither a raised error's message nor a toast (the page gets an
HTTP 500, the terminal a traceback), so its sentence goes to the summary or the button's note, and
the followers Gradio then starts find nothing of theirs to follow (``Action.claim``). The action's
follower (queued) then records it: ``stream`` into the samples area for Run and Branch, one delta
at a time, each sent when the browser has painted the one before (the samples area's
acknowledgements), so n=256 streams without stalling the tab; ``finish`` then shows the end in
every output (an event of its own: a stream's event lists only what a run in flight changes, see
``run_events``). Stop ends the session's action in whatever state it is: queued, waiting for the
first output, or streaming; it aborts by parent id, so what the samples had is kept. Whatever
happens, an action ends in a state from which the next one starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import gradio as gr

from playground.analysis import replayed_from
from playground.backends.live import LiveRun, State
from playground.errors import EngineUnavailable, NoEngine, PlaygroundError
from playground.request import SampleRequest
from playground.run import Run
from playground.ui import views
from playground.ui.form import form_request, form_update
from playground.ui.keeping import MARKER, keep_unshown
from playground.ui.messages import said, shown, warn
from playground.ui.page import Page
from playground.ui.samples_area import QUIET
from playground.ui.showing import SUMMARY_EVERY, at_once, figures_every, live, panels_now, show
from playground.ui.waiting import SAMPLING, AppFull

# Past tense: the note stays under its button after the run it speaks of has ended, and stays true.
BUSY = "Started nothing: a run of this page was going. Press Stop first, or wait for it to finish."
PRESSED_AGAIN = ("Run was pressed while a run was going, and started nothing: the form as it is then runs at the "
                 "next Run (Stop ends the one going).")
NOTHING_TO_STOP = "Nothing to stop: no run of this page was going."
STREAMED = ("Run", "Branch", "Replay")  # the actions whose run streams into the samples area
BEHIND_S = 1.0  # s a browser may leave the samples' last message unpainted before a live figure waits for it
# What the summary calls an action that streams elsewhere, when Run is pressed while it goes.
OTHER_ACTIONS = {"What if": "What if's branches were", "Sweep": "the sweep was",
                 "Compare": "the wrapper-vs-native comparison was", "Sample alone": "the rerun of one sample was",
                 "QA matrix": "the QA matrix was"}

# The states said aloud: a screen reader hears the summary's first line when the run's state
# changes (waiting, running, finished, stopped, refused, error), not every count of a streaming
# run; the notes beside the buttons are heard once each time they say something new. Each has a
# live region of its own that holds the line's text alone: a region on the line's own block would
# read out Gradio's progress timer ("processing | 0.1/1.7s") drawn over it while an event runs.
SAID_ALOUD_JS = """
() => {
  const region = (id) => {
    const said = document.createElement('div');
    said.id = id;
    said.setAttribute('role', 'status');
    said.style.cssText = 'position:absolute;width:1px;height:1px;overflow:hidden;'
      + 'clip-path:inset(50%);white-space:nowrap';
    document.body.appendChild(said);
    return said;
  };
  const words = (block) => (block.querySelector('.prose, .md')?.innerText || '').trim();
  const firstLine = (text) => text.split('\\n')[0].trim();
  // pick: what must change for the block to be heard again (the summary: its state word)
  const echo = (block, said, pick, say) => {
    let last = '';
    new MutationObserver(() => {
      const text = words(block), key = pick(text);
      if (key && key !== last) { last = key; said.textContent = say(text); }
      if (!key) last = '';
    }).observe(block, {childList: true, subtree: true, characterData: true});
  };
  const said = region('page-status');
  const listen = () => {
    const summary = document.querySelector('#run-summary');
    if (!summary) return setTimeout(listen, 200);
    echo(summary, said, (text) => firstLine(text).split(' · ')[0], firstLine);
    for (const id of ['store-note', 'branch-note', 'repro-verdict']) {
      const note = document.getElementById(id);
      if (note) echo(note, region(id + '-said'), (text) => text, (text) => text.replace(/\\s+/g, ' '));
    }
  };
  listen();
}
"""


class Busy(PlaygroundError):
    """The session's action is still going: a button that would start another is refused, and the
    going one is left alone (``page.action`` keeps it, for Stop)."""


@dataclass
class Action:
    """One action of a browser session (Run, Branch, What if, Replay, a sweep, a rerun or comparison
    of the Reproducibility tab, the QA matrix) and the runs it started: what Stop ends, and what
    keeps another action from starting while it goes."""

    name: str
    runs: list[LiveRun]
    about: Any = None  # what the action's follower needs besides the runs (What if: the point's tokens)
    shown: bool = False  # its run's end taken to be drawn whole (by ``finish`` or Stop): the other adds nothing
    streamed: bool = False  # its stream ended by itself, so its last message was sent (not cancelled)
    followers: set[str] = field(default_factory=set)  # the kinds of follower that follow it (``claim``)
    # Work that is no LiveRun's (the QA matrix's cells, run by its follower): set once it has ended.
    # Stop asks it to end (``stop_asked``) and waits for that.
    work: asyncio.Event | None = None
    stop_asked: bool = False
    selected: str | None = None  # the tab on screen, when one was opened while it goes: the live panels follow it

    @property
    def going(self) -> bool:
        return any(r.going for r in self.runs) or (self.work is not None and not self.work.is_set())

    @property
    def streams(self) -> bool:
        """Its run is streaming into the samples area (Run, Branch, Replay, going)."""
        return self.name in STREAMED and self.going

    def streaming_run(self) -> Run | None:
        """The run streaming into the samples area, while one does (its recording has begun)."""
        return self.runs[0].run if self.streams else None

    def claim(self, follower: str, names: tuple[str, ...] = STREAMED) -> bool:
        """Whether ``follower`` (a queued step after a button's ``begin``: the stream, the live
        panels, What if's or Replay's end) is to follow this action: one of the ``names`` it
        follows, and the first of its kind. A button refused while this action goes (``Busy``)
        returns its sentence rather than raising it, which Gradio shows only from a queued event,
        so its followers run too: they find the action another button's, or claimed, and leave it
        alone."""
        if self.name not in names or follower in self.followers:
            return False
        self.followers.add(follower)
        return True

    async def stop_and_wait(self) -> None:
        self.stop_asked = True
        await asyncio.gather(*(r.stop_and_wait() for r in self.runs))
        if self.work is not None:
            if "follow" not in self.followers:  # its follower has not begun (queued, or never to be): none to wait for
                self.work.set()
            await self.work.wait()


async def plan_action(page: Page, action: Action | None, name: str,
                      requests: list[tuple[SampleRequest, dict | None]], backend=None) -> Action:
    """The runs of a new action, checked, rendered and planned; nothing is stored here. Busy
    while the session's action is going; the PlaygroundError of the first request that cannot run
    (a setting, the context, an engine that is down). ``backend``: another than the page's (a
    History replay's, over the run it replays), which needs no engine."""
    if action is not None and action.going:
        raise Busy(BUSY)
    page.waiting.check()  # the app's queue holds --queue-size runs already: refused here, nothing stored
    about = backend  # the follower of a run on another backend streams from it
    if backend is None:
        backend, info = page.backend, page.backend.info()
        if not info.get("up", True):  # down when last seen: asked again, for a server may have come back
            info = await backend.status()
        if not info.get("up", True):
            raise EngineUnavailable(views.engine_down(info))
    action = Action(name, [await LiveRun.plan(backend, request, labels, f"page: {name}")
                           for request, labels in requests], about=about)
    page.waiting.admitted(action.runs or 1)  # counted until its follower is in the queue (or the runs start)
    return action


def streaming_marks(page: Page, current: Run | None) -> dict:
    """What the page says as a run starts streaming into the samples area: the Stop beside the
    summary is enabled, and a line over the tabs says which follow the run as it streams and which
    still show the run before (``current``) until it ends."""
    def listed(tabs: list[str]) -> str:
        return " and ".join([", ".join(tabs[:-1]), tabs[-1]] if len(tabs) > 1 else tabs)

    follow, wait = [p.tab for p in page.panels if p.live], [p.tab for p in page.panels if not p.live]
    before = f" still show `{current.request.get('request_id')}` and" if current is not None else ""
    return _marks(page, True, f"While this run streams, {listed(follow)} follow it; {listed(wait)}{before} are "
                              "drawn when it ends.")


def idle_marks(page: Page) -> dict:
    """The page's marks once no run streams into the samples area."""
    return _marks(page, False, "")


def _marks(page: Page, streaming: bool, line: str) -> dict:
    update = {}
    if page.stop_near is not None:
        update[page.stop_near] = gr.update(interactive=streaming)
    if page.panels_note is not None:
        update[page.panels_note] = line
    return update


def open_refusal(action: Action | None) -> str | None:
    """Why no run can be put on screen now (Open, a file, a QA cell, a sweep's value): a run is
    streaming into the samples area, whose end would take the opened run's place. None: one can."""
    if action is not None and action.streams:
        return (f"A {action.name.lower()} is streaming into the samples area: press Stop, or wait for it to finish, "
                "then open this run.")
    return None


def refused(error: Exception, button: str = "Run") -> str:
    """A refusal as the page says it: the sentence for the summary or note. No toast: the first
    step of every button runs outside Gradio's queue (``queue=False``), where gr.Warning cannot
    reach the page and only prints on the server's terminal."""
    return views.refused_summary(said(error), button,  # no engine, a full app: the reason says what next
                                 None if isinstance(error, (NoEngine, AppFull)) else
                                 isinstance(error, EngineUnavailable))


async def begin(page: Page, action: Action | None, current: Run | None = None, **settings) -> dict:
    """The Run button: the form, checked and planned, becomes this session's action. A press that
    starts nothing says why in the summary, above the line of the run still on screen
    (``current``)."""
    # The run on screen (the one it replays, for a replay): without a run of the form's prompt, a
    # replay page plays its file's next run after it. Never recorded.
    after = {"after": replayed_from(current) or current.request.get("request_id")} if current is not None else None
    ahead = page.waiting.waiting()  # the runs its line says wait before it
    try:
        action = await plan_action(page, action, "Run", [(form_request(**settings), after)])
    except Busy:  # a second press: the summary follows the going run, or says what else goes
        if action.name in STREAMED:  # the line by the form says the press started nothing
            return {page.summary: gr.skip(), **page.saying(PRESSED_AGAIN)}
        going = OTHER_ACTIONS.get(action.name, f"{action.name}'s run was")
        return {page.summary: views.beside_run_on_screen(
            f"⚠️ Run started nothing: {going} going on this page. Press Stop (beside Run) first, or wait for it to "
            "finish.",
            current)}
    except EngineUnavailable as e:  # the engine's line too: it may say "up" from before
        return {page.action: None, page.summary: views.beside_run_on_screen(refused(e), current),
                page.status: views.engine_status(page.backend.info())}
    except PlaygroundError as e:
        return {page.action: None, page.summary: views.beside_run_on_screen(refused(e), current)}
    queued = views.queued_summary(action.runs[0], ahead)
    update = {page.action: action, page.summary: queued, **streaming_marks(page, current),
              **page.saying("")}  # what an earlier press did is over
    if action.runs[0].prepared.labels.get("replay"):  # a replay plays a recorded run: the form shows its settings
        update.update(form_update(page.form, asdict(action.runs[0].request))[0])
    return update


def run_events(started: gr.events.Dependency, page: Page, stream: Callable, finish: Callable,
               ended: tuple[Callable, list, list] | None = None) -> gr.events.Dependency:
    """A run's queued steps after ``started`` (its ``begin``): ``stream`` writes the summary and
    the samples area, ``live_panels`` beside it the live parts of the panel on screen, then
    ``finish`` shows the end in every output, then what the tabs add (``page.after_run``) and
    ``ended`` (a handler, its inputs and outputs), when given, what the button's own note says of
    the end. Returns the stream's event: Stop cancels it, and Gradio then starts ``finish`` too.

    Three events, not one, because the pinned Gradio treats every output a yield leaves out as an update
    of its properties: it builds that component anew, with its configuration, at each yield (the
    samples area's alone takes milliseconds). The stream yields several times a second, so its
    event lists only the two outputs it gives a value at every yield."""
    shows = page.controls()
    # No progress tracker while it streams: the summary says the run's state itself, and the
    # tracker's pulsing border (a CSS animation that never ends) has the browser composite the page
    # at every frame, a third of the CPU the tab spent on a run of n=256: on a CPU machine, CPU the
    # engine shares.
    event = started.success(stream, [page.action, page.samples.session], [page.summary, page.samples.html],
                            concurrency_id=SAMPLING, show_progress="hidden", api_visibility="private")
    started.success(partial(live_panels, page), [page.action, page.selected, page.samples.session],
                    page.live_outputs(), inputs_kwargs=shows, show_progress="hidden", api_visibility="private")
    finished = event.then(finish, [page.action, *page.inputs()], page.outputs(), inputs_kwargs=shows,
                          show_progress_on=[page.summary], api_visibility="private")
    for after in [*page.after_run, *([ended] if ended is not None else [])]:
        finished.then(*after, show_progress="hidden", api_visibility="private")
    return event


async def stream(page: Page, action: Action | None, session):
    """Stream the action's run (Run, Branch) into the samples area, the summary following it;
    ``finish`` shows the end. Every yield gives both outputs a value (see ``run_events``): the
    summary its last line again, the samples area a value the browser ignores. Nothing to do when
    the run is not queued: a Stop came first, or the action was refused."""
    live_run = action.runs[0] if action is not None and action.runs else None
    if live_run is None or live_run.state is not State.QUEUED or not action.claim("stream"):
        yield {page.summary: gr.skip()}
        return
    line, line_at, line_running = views.queued_summary(live_run), time.monotonic(), False
    try:
        # aclosing: a closed tab or a cancelled event stops the LiveRun now, not when collected.
        async with contextlib.aclosing(session.paced(live_run.follow(page.backend))) as snapshots:
            async for snapshot in snapshots:
                run = snapshot or live_run.run  # None: a heartbeat (the waiting line's clock still moves)
                update = {}
                if run is not None and not run.finished:  # a finished run: ``finish`` draws its end
                    now = time.monotonic()  # the line is redrawn once a second, and at the first output
                    due = snapshot is None or now - line_at >= SUMMARY_EVERY or (bool(run.events) and not line_running)
                    update = live(page, run, session, summary=due)
                    if page.summary in update:
                        line, line_at, line_running = update[page.summary], now, bool(run.events)
                    if not update:  # the samples' message went back as the answer to the browser's ack
                        continue
                # a heartbeat always yields: Gradio notices a closed tab (its acks stopped) only then
                yield {page.summary: line, page.samples.html: QUIET, **update}
    except Exception as e:  # the LiveRun's state says what happened; a bug is logged here
        shown(e)
    finally:
        # Saved as the stream ends, however it ends: the browser asks for the end to be shown
        # (``finish``) only if it is still there, and a tab that went away (closed, reloaded: the
        # run stopped as its stream closed) never asks. Showing it later reports this save.
        if live_run.run is not None and live_run.run.finished and MARKER in page.extra:
            keep_unshown(page.extra[MARKER], live_run.run, session)
    action.streamed = True


async def live_panels(page: Page, action: Action | None, selected: str | None, session=None, **settings):
    """The live parts of the panel on screen while the action's run streams (a figure travels whole:
    every ``figures_every(n)`` s), an event of its own beside the stream; a tab opened meanwhile is
    followed from then on. Nothing while the tab on screen has no live part, or while the browser
    has not painted the samples area's last message for ``BEHIND_S`` (``session``): a slow
    browser drawing each figure longer than the pace would fall further behind with every one,
    the run's own tokens and Stop behind them."""
    live_run = action.runs[0] if action is not None and action.runs and action.claim("panels") else None
    yield gr.skip()  # one yield at least: a generator that yields nothing would clear its outputs
    if live_run is None:
        return
    waited = None  # the tab drawn once with no event yet (FINAL_ONLY's wait): it says so, not the run before
    drawn = False  # the first drawing comes at once: until it does, the tab shows the run before
    while action.going:
        # the tab on screen: the one opened last while the action goes, else the one on screen when it began
        run, panel = live_run.run, page.live_panel(action.selected or selected)
        if run is None or panel is None or not drawn:
            await asyncio.sleep(figures_every(1))
        else:  # the panel's own pace (the graph's, by how long it takes to build), else the page's by n
            await asyncio.sleep(panel.every if panel.every is not None else figures_every(run.n))
        run, panel = live_run.run, page.live_panel(action.selected or selected)
        if run is None or panel is None or run.finished or (not run.events and waited == panel.tab):
            continue
        if drawn and session is not None and session.behind() > BEHIND_S:  # the browser catches up first
            continue
        waited = panel.tab if not run.events else None
        update = await asyncio.to_thread(panels_now, page, run, panel.tab, settings, True)
        if update and action.going and not run.finished:  # ended meanwhile: ``finish`` draws it whole
            drawn = True
            yield update
    # Gradio sends a generator's last value again when its event ends, which is after ``finish``
    # drew the panel whole: that must change nothing (it put back the Set tab's last live line).
    yield gr.skip()


async def finish(page: Page, action: Action | None, history: list | None, session, selected: str | None,
                 **settings):
    """A streamed run's end in every output: first what is cheap (its samples' last tokens, the
    summary, the history), then the panel on screen and the store's save (at n=256 the Diff
    tab's heatmap takes seconds). Nothing when the action is still going, or Stop shows it."""
    if action is None or not action.runs or action.going or action.shown or action.name not in STREAMED:
        yield {page.summary: gr.skip()}
        return
    action.shown = True  # claimed before any await: Stop, started at the same moment, leaves it to this
    live_run = action.runs[0]
    if live_run.run is not None and live_run.state not in (State.REFUSED, State.ERROR):
        # cancelled (not streamed): its last message may never have been sent, so a reset
        yield at_once(page, live_run.run, history, session, reset=not action.streamed)
    yield {**await ended(page, live_run, history, session, selected, settings), **idle_marks(page)}


async def ended(page: Page, live_run: LiveRun, history: list | None, session, selected: str | None,
                settings: dict) -> dict:
    """A run that has ended, on screen: the run in every panel when it began, else the reason."""
    if live_run.state in (State.REFUSED, State.ERROR):
        warn(live_run.reason or live_run.state.value)
    if live_run.run is None:
        return {page.summary: views.ended_summary(live_run)}
    return await show(page, live_run.run, history, session, selected, settings)


async def stop(page: Page, action: Action | None, history: list | None, session, selected: str | None,
               **settings) -> dict:
    """End this session's action at any moment and show its run as it stands (every child
    aborted, each sample's tokens so far kept). The followers of What if, Replay and Compare
    see their runs end and say so themselves."""
    if action is None or not action.going and (action.name not in STREAMED or action.shown):
        return page.saying(NOTHING_TO_STOP)  # a press that does nothing says so
    if action.going:
        await action.stop_and_wait()
    if action.name not in STREAMED or action.shown:
        return {}  # not a run of the samples area, or ``finish`` shows its end
    action.shown = True
    live_run = action.runs[0]
    if live_run.run is None:  # stopped before it started: nothing reached the engine
        return {page.summary: views.ended_summary(live_run), **idle_marks(page)}
    # Stop cancelled the stream's event: a message it had made may never have been sent.
    return {**await show(page, live_run.run, history, session, selected, settings, reset=True), **idle_marks(page)}


async def follow_all(action: Action | None, backend, name: str, together: bool = True,
                     each: Callable[[LiveRun], Awaitable[None]] | None = None) -> list[LiveRun] | None:
    """Record the queued runs of an action called ``name`` to their ends, all at once
    (``together``) or one after another, and return them, each in its end state; an empty list
    when there is nothing to follow (a Stop came first); None when the action is not this
    follower's (its button was refused, ``Action.claim``). ``each``: awaited as each run ends."""
    if action is None or not action.claim("follow", (name,)):
        return None
    if not action.runs or action.runs[0].state is not State.QUEUED:
        return []

    async def one(live_run: LiveRun) -> None:
        with contextlib.suppress(Exception):  # its state and reason say what happened
            async with contextlib.aclosing(live_run.follow(backend)) as runs:
                async for _ in runs:
                    pass
        if each is not None:
            await each(live_run)

    if together:
        await asyncio.gather(*(one(r) for r in action.runs))
    else:
        for live_run in action.runs:
            await one(live_run)
    return action.runs
