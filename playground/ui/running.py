"""Run and Stop.

Run is two steps. ``begin`` checks the form outside the queue, so a mistake is named at once and
the session holds its LiveRun before the run waits for a free slot; ``run`` then records it into
the columns. Stop ends the session's LiveRun in whatever state it is: queued, waiting for the
first event, or streaming. Either way the page ends up showing the run "stopped", with what it had.
"""

from __future__ import annotations

import contextlib
import time

import gradio as gr

from playground.run import Run
from playground.ui import views
from playground.ui.form import request_from_form
from playground.ui.handlers import Handlers
from playground.ui.live import LiveRun
from playground.ui.messages import shown
from playground.ui.streaming import pace_for, paced

FIGURE_EVERY = 1.0  # seconds between figure refreshes while streaming (figures travel whole)
BUSY = "A run of this page is still going: press Stop first, or wait for it to finish."


class Running:
    def __init__(self, h: Handlers):
        self.h = h

    def begin(self, live: LiveRun | None, **settings) -> dict:
        """The form, checked, becomes this session's LiveRun; the columns wait for it."""
        if live is not None and live.going:
            raise gr.Error(BUSY)
        request = request_from_form(**settings)
        c = self.h.c
        return {c.live: LiveRun(request), c.summary: "⏳ waiting for a free slot…", **self.h.highlight(()),
                **{header: f"**#{i}** · waiting" for i, header in enumerate(c.headers[:request.n])},
                **{text: "" for text in c.texts[:request.n]}}

    async def run(self, live: LiveRun | None, history: list | None, **settings):
        """Stream the run into the columns; panels refresh about once a second and at the end
        (``settings``: the panels' own controls, for the end)."""
        if live is None or live.stopped:  # Stop came first; it has shown the run stopped
            yield {}
            return
        c = self.h.c
        sent: list = [None] * live.request.n
        started = figures_at = time.monotonic()
        run: Run | None = None
        try:
            # aclosing: a closed tab or a cancelled event stops the LiveRun now, not when collected.
            stream = paced(live.follow(self.h.backend), interval=pace_for(live.request.n))
            async with contextlib.aclosing(stream) as snapshots:
                async for snapshot in snapshots:
                    run = snapshot or run  # None: a heartbeat, so a closed tab is noticed
                    if run is None or run.finished:
                        continue  # the final render follows the stream's end
                    update = self.h.columns(run, sent)
                    update[c.summary] = (views.run_summary(run) if run.events else
                                         views.waiting_summary(run, time.monotonic() - started))
                    if run.events and time.monotonic() - figures_at >= FIGURE_EVERY:
                        update.update(self.h.live_panels(run))
                        figures_at = time.monotonic()
                    yield update
        except Exception as e:
            raise shown(e) from None
        if live.run is not None:
            yield await self.h.show(live.run, history, settings=settings)

    async def stop(self, live: LiveRun | None, current: Run | None, history: list | None, **settings) -> dict:
        """End this session's run at any moment and show it as it stands (every child aborted)."""
        if live is None:
            return {}
        if live.going:
            await live.stop_and_wait()
        run = live.run
        if run is None:  # stopped before it started: nothing reached the engine
            c = self.h.c
            return {c.summary: "■ stopped before it started: nothing was sent to the engine",
                    **{header: f"**#{i}** · ■ stopped" for i, header in enumerate(c.headers[:live.request.n])}}
        if current is not None and current.request.get("request_id") == run.request.get("request_id"):
            return {}  # it had finished and is on screen already
        return await self.h.show(run, history, settings=settings)
