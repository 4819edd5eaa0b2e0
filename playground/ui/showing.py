"""Showing a run: every path that puts a run on screen (its end, Stop, History, the QA tab, an
opened file, a branch) shows it by ``show``, in the samples area and the panel of the tab on
screen, from the one record; and the session remembers it.

Only the tab on screen is drawn, and another when it is opened (``opened``): at n=256 the six
analysis tabs together are megabytes of figures, and a browser that takes them all at once stops
painting for half a second. They are built off the event loop, so other sessions keep streaming.
"""

from __future__ import annotations

import asyncio

import gradio as gr

from playground import analysis
from playground.run import Run
from playground.ui import views
from playground.ui.form import run_in_form
from playground.ui.keeping import MARKER, keep
from playground.ui.page import HISTORY_SIZE, Page

FIGURES_EVERY = 1.0  # seconds between figure refreshes while streaming, per 32 samples
# Seconds between the summary's redraws while streaming: a line of n=256 samples' counts is worth
# drawing once a second, and the yields between carry its last line again (running.stream).
SUMMARY_EVERY = 1.0


def figures_every(n: int) -> float:
    """Seconds between the live figures of a run of n. A figure travels and is drawn whole, and
    at n=128 drawing one keeps the browser from painting for 150-300 ms: once a second, that would
    be the stall the samples area avoids."""
    return FIGURES_EVERY * max(1.0, n / 32)


async def show(page: Page, run: Run, history: list | None, session, selected: str | None,
               settings: dict | None = None, reset: bool = False) -> dict:
    """Everything for a finished run, and the run remembered in the session's history.
    ``selected``: the tab on screen; ``settings``: the panels' controls as the handler received them;
    ``reset``: send the samples area the whole run, not what it lacks (after a cancelled stream,
    whose last message may never have reached the browser)."""
    return await asyncio.to_thread(_show, page, run, history, session, selected, settings or {}, reset)


async def show_opened(page: Page, run: Run, history: list | None, session, selected: str | None,
                      settings: dict | None = None) -> tuple[dict, str]:
    """A run opened (History's Open, a saved run, its link, a sweep's value, a QA cell): ``show``,
    and its settings in the form, so that Run asks for it again; ``said``: what the form now holds,
    for the sentence the caller writes where its button is."""
    update = await show(page, run, history, session, selected, settings)
    form, said = run_in_form(page.form, run, replaying=page.backend.info().get("backend") == "replay")
    return {**update, **form}, said


async def opened(page: Page, run: Run | None, evt: gr.SelectData, action=None, **settings) -> dict:
    """A tab opened: it becomes the one on screen, and its panel draws the run on screen; while a
    run streams into the samples area (``action``'s), a tab that follows it draws that run's live
    parts, and the live panels follow the tab from then on."""
    update = {page.selected: evt.value}
    streaming = action.streaming_run() if action is not None else None
    if streaming is not None:
        action.selected = evt.value
        if page.live_panel(evt.value) is not None:
            update.update(await asyncio.to_thread(panels_now, page, streaming, evt.value, settings, True))
            return update
    if run is not None:
        update.update(await asyncio.to_thread(panels_now, page, run, evt.value, settings))
    return update


def panels_now(page: Page, run: Run, selected: str | None, settings: dict, live: bool = False) -> dict:
    """The panel of the tab on screen for ``run`` (``live``: its live parts only)."""
    update = {}
    for p in page.panels:
        if p.tab == selected:
            update.update(p.show_live(run, settings) if live else p.show(run, settings))
    return update


def _show(page: Page, run: Run, history: list | None, session, selected: str | None, settings: dict,
          reset: bool = False) -> dict:
    update = {**page.samples.show(session, run, force=reset), **_lines(page, run, history)}
    update.update(panels_now(page, run, selected, settings))
    if MARKER in page.extra:  # the run store keeps it (ui/keeping.py)
        update[page.extra[MARKER]] = keep(page.extra[MARKER], [run], session)
    return update


def _lines(page: Page, run: Run, history: list | None) -> dict:
    """What a run shown says besides its samples and panels: the summary, the status line, the
    run the tabs open with and the history (each cheap)."""
    history = remember(history or [], run)
    reuse = analysis.seed_reuse_sentence(run, history[:-1])  # said where the eyes are, not only in History
    return {
        page.summary: views.run_summary(run) + (f"\n\n{reuse}" if reuse else ""),
        page.status: views.engine_status(page.backend.info(), run),
        page.current: run,
        **_history_lines(page, history, len(history) - 1),
    }


def _history_lines(page: Page, history: list, picked: int | None = None) -> dict:
    """The session's History as its tab lists it: the runs, their labels (``picked``: the one to
    pick; None leaves the pick as it is) and the note on runs that share child seeds."""
    choices = [(views.history_label(r), i) for i, r in enumerate(history)]
    return {page.history: history,
            page.history_pick: gr.update(choices=choices) if picked is None else gr.update(choices=choices,
                                                                                             value=picked),
            page.history_note: overlap_note(history)}


def at_once(page: Page, run: Run, history: list | None, session, reset: bool = False) -> dict:
    """A streamed run's end, what is cheap of it: its samples' last tokens and every line but the
    panel on screen and the store's save (``show`` follows with them: at n=256 the Diff tab's
    heatmap takes seconds to compute and draw). ``reset``: as ``show``'s."""
    return {**page.samples.show(session, run, force=reset), **_lines(page, run, history)}


def live(page: Page, run: Run, session, summary: bool = True) -> dict:
    """A run in flight: what changed in the samples area (nothing here when it went back as the
    answer to the browser's ack) and the summary line (``summary``). An empty dict: nothing to
    yield."""
    update = page.samples.update(session, run)
    if summary:
        update[page.summary] = views.run_summary(run) if run.events else views.waiting_summary(run)
    return update


def join_history(page: Page, history: list | None, runs: list[Run], session) -> dict:
    """Runs that join the session's History without being shown (What if's branches, a sweep's
    runs): listed there, and kept in the run store so that a reload finds them too."""
    history = history or []
    for run in runs:
        history = remember(history, run)
    update = _history_lines(page, history)
    if MARKER in page.extra and runs:
        update[page.extra[MARKER]] = keep(page.extra[MARKER], runs, session)
    return update


def remember(history: list, run: Run) -> list:
    rid = run.request.get("request_id")
    history = [r for r in history if r.request.get("request_id") != rid] + [run]
    return history[-HISTORY_SIZE:]


def overlap_note(runs: list[Run]) -> str:
    """A note on the runs of a list that share child seeds: sample i uses seed + i, so runs whose
    base seeds are closer than n share samples' seeds, and comparing them compares samples that
    are not independent. Runs that drew with the very same seeds (a sweep's values, a request run
    again) are said once together: their samples are paired. Then a warning for the other pairs,
    those that share the most first (a one-sample rerun's single shared seed after two runs of one
    base seed), the newest first among equals."""
    names = [f"`{r.request.get('request_id')}`" for r in runs]
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, run in enumerate(runs):
        if seeds := tuple(sorted(s.seed for s in run.samples if s.seed is not None)):
            groups.setdefault(seeds, []).append(k)
    alike = [(seeds, ks) for seeds, ks in groups.items() if len(ks) > 1]
    together = {frozenset((a, b)) for _, ks in alike for a in ks for b in ks if a != b}
    lines = [f"ℹ️ {_listed([names[k] for k in ks])} drew with the same child seeds "
             f"({seeds[0]}{f'–{seeds[-1]}' if len(seeds) > 1 else ''}), sample for sample: their samples are "
             "paired, not independent." for seeds, ks in alike]
    overlaps = sorted((o for o in analysis.seed_overlaps(runs) if frozenset((o["a"], o["b"])) not in together),
                      key=lambda o: (-o["shared"], -o["b"], -o["a"]))
    sentences = [analysis.seed_overlap_sentence(o, names) for o in overlaps]
    if sentences:
        more = len(sentences) - 3
        lines.append("⚠️ " + "; ".join(sentences[:3]) +
                     (f"; and {analysis.counted(more, 'more pair')}" if more > 0 else "") + ".")
    return "\n\n".join(lines)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
