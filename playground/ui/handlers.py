"""What the page's handlers share, and how a run is shown.

``Handlers`` holds what is the same for every browser session: the backend, the export folder
and the components that show a run (bound once the layout has declared them). A session's own
runs (the one in flight, the one on screen, its history) are ``gr.State`` values that handlers
take and return; nothing here grows with the sessions.

Every view reads the same record: the columns through views.py, the tabs through their Panels,
the downloads (bundle, tokens CSV, HTML report) from the run bundle.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from playground import analysis
from playground.run import Run
from playground.ui import views
from playground.ui.panels import Panel, diff_view

HISTORY_SIZE = 10
COLUMNS_PER_ROW = 4
COLUMN_CLASS, PICKED_CLASS = "sample", "sample-picked"  # a sample's column; one the Set tab points at


class Handlers:
    def __init__(self, backend):
        self.backend = backend
        # Exports are written here only: a folder of the app's own under the system temp dir.
        self.export_dir = Path(tempfile.mkdtemp(prefix="vllm-playground-exports-"))
        self.c = SimpleNamespace()
        self.panels: list[Panel] = []

    def bind(self, *, panels: list[Panel], **components) -> None:
        self.c = SimpleNamespace(**components)
        self.panels = list(panels)
        names = [name for p in self.panels for name in p.controls]
        if len(names) != len(set(names)):
            raise ValueError(f"two panels name a control alike: {sorted(names)}")

    def outputs(self) -> list:
        """Every component that showing a run updates."""
        c = self.c
        return [c.status, c.summary, c.n, *c.headers, *c.texts, *c.groups,
                *[component for p in self.panels for component in p.components.values()],
                c.current, c.history, c.history_pick, c.bundle_file, c.tokens_file]

    def controls(self) -> dict:
        """The panels' own settings by name: every handler that shows a run takes them
        (``inputs_kwargs=h.controls()``) and hands them to ``show``."""
        return {name: component for p in self.panels for name, component in p.controls.items()}

    def highlight(self, indices) -> dict:
        """Mark the columns of these samples (a group the Set tab points at), and only those."""
        picked = set(indices)
        return {g: gr.update(elem_classes=[COLUMN_CLASS, PICKED_CLASS] if i in picked else [COLUMN_CLASS])
                for i, g in enumerate(self.c.groups)}

    # --- a run in flight --------------------------------------------------------------------------

    def columns(self, run: Run, sent: list) -> dict:
        """Only the columns whose text or state changed since they were last sent."""
        c, update = self.c, {}
        for s in run.samples:
            state = (len(s.token_ids), s.finish_reason)
            if state != sent[s.index]:
                sent[s.index] = state
                update[c.headers[s.index]] = views.column_header(s, run)
                update[c.texts[s.index]] = s.text
        return update

    def live_panels(self, run: Run) -> dict:
        update = {}
        for p in self.panels:
            update.update(p.show_live(run))
        return update

    # --- a finished run -------------------------------------------------------------------------

    async def show(self, run: Run, history: list | None, *, set_n: bool = False,
                   settings: dict | None = None) -> dict:
        """Everything for a finished run, and the run remembered in the session's history.

        Panels for a long run at n=32 take a moment: they are built off the event loop, so other
        sessions keep streaming meanwhile. ``set_n`` (History, QA, an opened file) moves the n
        slider to the run's n, so the columns shown follow it. ``settings``: the panels' controls
        as the handler received them.
        """
        return await asyncio.to_thread(self._show, run, history, set_n, settings or {})

    def _show(self, run: Run, history: list | None, set_n: bool, settings: dict) -> dict:
        c = self.c
        history = remember(history or [], run)
        bundle, tokens = self._export(run)
        update = {
            **self.highlight(()),
            **{c.headers[s.index]: views.column_header(s, run) for s in run.samples},
            **{c.texts[s.index]: s.text for s in run.samples},
            c.summary: views.run_summary(run),
            c.status: views.engine_status(self.backend.info(), run),
            c.current: run,
            c.history: history,
            c.history_pick: gr.update(choices=[(views.history_label(r), i) for i, r in enumerate(history)],
                                      value=len(history) - 1),
            c.bundle_file: bundle,
            c.tokens_file: tokens,
        }
        if set_n:
            update[c.n] = run.n
        for p in self.panels:
            update.update(p.show(run, settings))
        return update

    def _export(self, run: Run) -> tuple[str, str]:
        stem = self.export_dir / run.request.get("request_id", "run")
        bundle, tokens = stem.with_suffix(".json"), stem.with_suffix(".csv")
        bundle.write_text(run.to_json(indent=1))
        run.tokens_frame().to_csv(tokens, index=False)
        return str(bundle), str(tokens)

    async def report(self, run: Run | None) -> str:
        """The HTML report of the run on screen, written when asked for: it inlines plotly.js
        (about 5 MB, so it opens offline), too much to write for every run shown."""
        if run is None:
            raise gr.Error("Run something first, or open a saved run: the report is of the run on screen.")
        path = (self.export_dir / run.request.get("request_id", "run")).with_suffix(".html")
        if not path.exists():  # a run's record does not change once shown
            text = await asyncio.to_thread(analysis.report_for, [run], analysis.set_measures_hook())
            path.write_text(text, encoding="utf-8")
        return str(path)

    # --- History and the diff's reference -------------------------------------------------------

    async def reopen(self, history: list, index, **settings):
        if not history or index is None or not 0 <= int(index) < len(history):
            raise gr.Error("Pick a run from the list first.")
        return await self.show(history[int(index)], history, set_n=True, settings=settings)

    def rediff(self, run: Run | None, reference) -> str:
        if run is None:
            return gr.skip()
        return diff_view(run, min(int(reference or 0), run.n - 1))


def remember(history: list, run: Run) -> list:
    rid = run.request.get("request_id")
    history = [r for r in history if r.request.get("request_id") != rid] + [run]
    return history[-HISTORY_SIZE:]
