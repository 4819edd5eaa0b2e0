"""Showing a run: every path that puts a run on screen (its end, Stop, History, the QA tab, an
opened file, a branch) shows it by ``show``, in the samples area and every panel, from the one
record; and the session remembers it.

Panels for a long run at n=256 take a moment: they are built off the event loop, so other
sessions keep streaming meanwhile.
"""

from __future__ import annotations

import asyncio

import gradio as gr

from playground import analysis
from playground.run import Run
from playground.ui import views
from playground.ui.page import HISTORY_SIZE, Page

FIGURES_EVERY = 1.0  # seconds between figure refreshes while streaming (figures travel whole)


async def show(page: Page, run: Run, history: list | None, session, settings: dict | None = None) -> dict:
    """Everything for a finished run, and the run remembered in the session's history.
    ``settings``: the panels' controls as the handler received them."""
    return await asyncio.to_thread(_show, page, run, history, session, settings or {})


def _show(page: Page, run: Run, history: list | None, session, settings: dict) -> dict:
    history = remember(history or [], run)
    update = {
        **page.samples.show(session, run),
        page.summary: views.run_summary(run),
        page.status: views.engine_status(page.backend.info(), run),
        page.current: run,
        page.history: history,
        page.history_pick: gr.update(choices=[(views.history_label(r), i) for i, r in enumerate(history)],
                                     value=len(history) - 1),
        page.history_note: overlap_note(history),
    }
    for p in page.panels:
        update.update(p.show(run, settings))
    return update


def live(page: Page, run: Run, session, figures: bool, settings: dict | None = None) -> dict:
    """A run in flight: what changed in the samples area, the summary line, and (``figures``)
    the panels' live parts (``settings``: the panels' controls)."""
    update = {**page.samples.update(session, run), page.summary: views.run_summary(run) if run.events
              else views.waiting_summary(run)}  # never empty: Gradio reads an empty dict as one value
    if figures and run.events:
        for p in page.panels:
            update.update(p.show_live(run, settings))
    return update


def remember(history: list, run: Run) -> list:
    rid = run.request.get("request_id")
    history = [r for r in history if r.request.get("request_id") != rid] + [run]
    return history[-HISTORY_SIZE:]


def overlap_note(runs: list[Run]) -> str:
    """A warning for the runs of a list that share child seeds: sample i uses seed + i, so runs
    whose base seeds are closer than n share samples' seeds, and comparing them compares
    samples that are not independent."""
    names = [f"`{r.request.get('request_id')}`" for r in runs]
    sentences = [analysis.seed_overlap_sentence(o, names) for o in analysis.seed_overlaps(runs)]
    if not sentences:
        return ""
    return "⚠️ " + "; ".join(sentences[:3]) + ("; and more" if len(sentences) > 3 else "") + "."
