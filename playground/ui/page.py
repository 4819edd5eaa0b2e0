"""The page as its handlers see it: every component they write, collected once the layout has
declared them all, and the per-session states they read.

``build_app`` declares the layout top to bottom, then makes one ``Page`` of what it declared and
only then connects the events, each handler given the page whole: no component is looked up or
filled in later. A browser session's own runs live in ``gr.State`` values (``action``, ``current``,
``history`` and the samples area's session), which handlers take and return; nothing here grows
with the sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from playground.ui.panels import Panel
from playground.ui.samples_area import SamplesArea
from playground.ui.waiting import WaitingRoom

HISTORY_SIZE = 10  # runs a session keeps


@dataclass
class Page:
    backend: Any
    export_dir: Path  # downloads are written here only: a folder of the app's own
    status: gr.Markdown
    form: dict[str, gr.components.Component]  # the run's settings by request field
    summary: gr.Markdown
    samples: SamplesArea
    tabs: gr.Tabs
    panels: list[Panel]  # the tabs that show any run: Diff, Tree, Set, Timing, Logprobs, Inspector
    history_pick: gr.Dropdown
    history_note: gr.Markdown
    action: gr.State  # the session's action: the runs one button started (running.Action), or None
    current: gr.State  # the run on screen
    history: gr.State  # the session's last runs
    selected: gr.State  # the label of the tab on screen: only its panel is drawn
    extra: dict[str, gr.components.Component] = field(default_factory=dict)  # what other tabs add to a shown run
    said: gr.Markdown | None = None  # the line by the form, for what a press did that the summary does not say
    stop_near: gr.Button | None = None  # the Stop beside the summary: enabled while a run streams there
    panels_note: gr.Markdown | None = None  # over the tabs, while a run streams: which follow it, which wait
    # What a tab adds once a streamed run has ended: (handler, inputs, outputs), chained after ``finish``
    # by ``running.run_events`` (the Compare tab's lists, when it is on screen).
    after_run: list[tuple[Any, list, list]] = field(default_factory=list)
    waiting: WaitingRoom = field(default_factory=WaitingRoom)  # the app's runs waiting for a slot (--queue-size)

    def controls(self) -> dict[str, gr.components.Component]:
        """The panels' own settings by name: every handler that shows a run takes them
        (``inputs_kwargs=page.controls()``) and hands them to ``show``."""
        controls: dict[str, gr.components.Component] = {}
        for p in self.panels:
            for name, component in p.controls.items():
                # Two tabs may share a control (the Graph reads the Set tab's answers), never a name for two:
                # the Diff's reference sample once took the Set tab's reference answer as its value.
                if controls.setdefault(name, component) is not component:
                    raise ValueError(f"two panels name different controls {name!r}")
        return controls

    def opening(self) -> dict[str, gr.components.Component]:
        """What a button that puts a run on screen (Open, a file, a QA cell, a sweep's value) takes
        by name: the panels' controls, and the session's action (``action``), which it must not
        paint over while that action streams into the samples area."""
        return {**self.controls(), "action": self.action}

    def outputs(self) -> list[gr.components.Component]:
        """Every component that showing a run updates."""
        return [self.status, self.summary, self.samples.html, *self.form.values(),
                *[c for p in self.panels for c in p.components.values()],
                self.current, *self.history_outputs(), *self.streaming_outputs()]

    def streaming_outputs(self) -> list[gr.components.Component]:
        """What says a run streams into the samples area (``running.streaming_marks``)."""
        return [c for c in (self.stop_near, self.panels_note) if c is not None]

    def said_outputs(self) -> list[gr.components.Component]:
        """The line by the form, as an output, where the page has one."""
        return [self.said] if self.said is not None else []

    def saying(self, line: str) -> dict:
        """An update of the line by the form to ``line``, where the page has one (else nothing)."""
        return {self.said: line} if self.said is not None else {}

    def history_outputs(self) -> list[gr.components.Component]:
        """What runs that join History without being shown update (``showing.join_history``)."""
        return [self.history, self.history_pick, self.history_note, *self.extra.values()]

    def live_panel(self, tab: str | None):
        """The panel of the tab ``tab`` when it follows a streaming run (has a live part), else None."""
        return next((p for p in self.panels if p.tab == tab and p.live), None)

    def live_outputs(self) -> list[gr.components.Component]:
        """What the panels' live parts write while a run streams (``running.live_panels``)."""
        return [c for p in self.panels for c in p.live_components()]

    def inputs(self) -> list[gr.components.Component]:
        """What showing a run reads: the session's history, its samples area, the tab on screen."""
        return [self.history, self.samples.session, self.selected]
