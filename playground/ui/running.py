"""Run and Stop, for the page's form and for a branch.

Run is two steps. ``begin`` checks the form outside the queue, so a mistake is named at once and
the session holds its LiveRun before the run waits for a free slot; ``stream`` then records it
into the samples area, one delta at a time, each sent when the browser has painted the one
before (the samples area's acknowledgements), so n=256 streams without stalling the tab. Stop
ends the session's LiveRun in whatever state it is: queued, waiting for the first event, or
streaming; it aborts the run by its parent id, so what the samples had is kept.
"""

from __future__ import annotations

import contextlib
import time

import gradio as gr

from playground.run import Run
from playground.ui.form import request_from_form
from playground.ui.live import LiveRun
from playground.ui.messages import shown
from playground.ui.page import Page
from playground.ui.showing import figures_every, live, show

BUSY = "A run of this page is still going: press Stop first, or wait for it to finish."
WAITING = "⏳ waiting for a free slot…"


def begin(page: Page, live_run: LiveRun | None, **settings) -> dict:
    """The form, checked, becomes this session's LiveRun."""
    if live_run is not None and live_run.going:
        raise gr.Error(BUSY)
    return {page.live: LiveRun(request_from_form(**settings)), page.summary: WAITING}


async def stream(page: Page, live_run: LiveRun | None, history: list | None, session, selected: str | None,
                 **settings):
    """Stream the run into the samples area; the summary follows it, the panels' live parts
    refresh about once a second, and every panel draws the finished run at the end
    (``settings``: the panels' own controls)."""
    if live_run is None or live_run.stopped:  # Stop came first; it has shown the run stopped
        yield {page.summary: gr.skip()}
        return
    figures_at = time.monotonic()
    run: Run | None = None
    try:
        # aclosing: a closed tab or a cancelled event stops the LiveRun now, not when collected.
        async with contextlib.aclosing(session.paced(live_run.follow(page.backend))) as snapshots:
            async for snapshot in snapshots:
                run = snapshot or run  # None: a heartbeat, so a closed tab is noticed
                if run is None or run.finished:
                    yield {page.summary: gr.skip()}  # a heartbeat: Gradio notices a closed tab only at a yield
                    continue  # the final render follows the stream's end
                figures = time.monotonic() - figures_at >= figures_every(run.n)
                if figures:
                    figures_at = time.monotonic()
                yield live(page, run, session, selected, figures, settings)
    except Exception as e:
        raise shown(e) from None
    if live_run.run is not None:
        yield await show(page, live_run.run, history, session, selected, settings)


async def stop(page: Page, live_run: LiveRun | None, current: Run | None, history: list | None, session,
               selected: str | None, **settings) -> dict:
    """End this session's run at any moment and show it as it stands (every child aborted, each
    sample's tokens so far kept)."""
    if live_run is None:
        return {}
    if live_run.going:
        await live_run.stop_and_wait()
    run = live_run.run
    if run is None:  # stopped before it started: nothing reached the engine
        return {page.summary: "■ stopped before it started: nothing was sent to the engine"}
    if current is not None and current.request.get("request_id") == run.request.get("request_id"):
        return {}  # it had finished and is on screen already
    return await show(page, run, history, session, selected, settings)
