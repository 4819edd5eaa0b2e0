"""The analysis panels: each tab is a Panel, its components and a pure function from a Run to
their values, all computed by playground.analysis.

A new view of a run is one more Panel: declare its components in the layout (app.py), write a
function ``Run -> {name: value}`` here, and list the Panel where the page is wired. The run
handlers, Stop, History, the QA tab and an opened file then show it for every run without knowing
it exists. A tab with settings of its own (the Set tab's answer extractor) names them as the
Panel's ``controls``: every path that shows a run passes their current values to ``values``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
import pandas as pd

from playground import analysis
from playground.run import Run

MAX_EVENT_ROWS = 1000  # the table stays responsive; the JSON bundle has every event

KIND_NOTES = {
    "CUMULATIVE": "each event carries the **full text so far** of the samples that advanced, so the last "
                  "event does not hold all n: a consumer keeps the latest value per index.",
    "DELTA": "each event carries only the **new tokens** of the samples that advanced; when the consumer "
             "falls behind, queued pieces of the same index are concatenated into one event.",
    "FINAL_ONLY": "the engine yields **nothing until every sample has finished**, then one event with all n "
                  "samples in index order. That is why the columns filled only at the end.",
}

Values = dict[str, Any]


@dataclass
class Panel:
    """A tab's components by name, and ``values(run)``: the same names mapped to what they show.

    ``live(run)``, when given, is the part worth redrawing while samples stream (figures travel
    whole, so the page sends them about once a second, not per token). ``controls``: the tab's
    own settings by name; ``values(run, **settings)`` receives those of them it is given.
    """

    values: Callable[..., Values]
    components: dict[str, gr.components.Component] = field(default_factory=dict)
    live: Callable[[Run], Values] | None = None
    controls: dict[str, gr.components.Component] = field(default_factory=dict)

    def show(self, run: Run, settings: dict | None = None) -> dict:
        settings = settings or {}
        return self._keyed(self.values(run, **{k: settings[k] for k in self.controls if k in settings}))

    def show_live(self, run: Run) -> dict:
        return self._keyed(self.live(run)) if self.live else {}

    def _keyed(self, values: Values) -> dict:
        return {self.components[name]: value for name, value in values.items()}


def panel(values: Callable[[Run], Values], live: Callable[[Run], Values] | None = None, **components) -> Panel:
    """``panel(panels.timing, itl=gr.Plot(...), ...)``: the form the layout declares panels in."""
    return Panel(values, components, live)


# --- one function per tab: Run -> {component name: value} ----------------------------------------

def diff(run: Run, reference: int = 0) -> Values:
    reference = min(reference, run.n - 1)
    return {"reference": gr.update(choices=list(range(run.n)), value=reference),
            "diff_view": diff_view(run, reference), "pairwise": analysis.pairwise_heatmap(run)}


def tree(run: Run) -> Values:
    return {"tree": analysis.tree_figure(run)}


def timing(run: Run) -> Values:
    return {"tokens_over_time": analysis.tokens_over_time_figure(run), "itl": analysis.itl_figure(run),
            "ttft": analysis.ttft_figure(run), "child_timeline": analysis.child_timeline_figure(run),
            "table": analysis.timing_frame(run).round(3)}


def timing_live(run: Run) -> Values:
    return {"tokens_over_time": analysis.tokens_over_time_figure(run)}


def logprobs(run: Run) -> Values:
    return {"uncertainty": analysis.uncertainty_figure(run), "agreement": analysis.agreement_figure(run)}


def inspector(run: Run) -> Values:
    return {"note": inspector_note(run), "timeline": analysis.events_figure(run), "events": events_table(run)}


def inspector_live(run: Run) -> Values:
    return {"timeline": analysis.events_figure(run)}


# --- the pieces ----------------------------------------------------------------------------------

def diff_view(run: Run, reference: int) -> str:
    """Every sample against the reference, token by token, with where it first diverges."""
    if not run.samples:
        return ""
    ref = run.samples[reference]
    shared = analysis.common_prefix(run)
    parts = [f"<p><b>All {run.n} samples share their first {shared} tokens.</b> Compared with sample "
             f"{reference} (seed {ref.seed}): <span class='tok tok-insert'>inserted</span> and "
             f"<span class='tok tok-replace'>replaced</span> tokens are highlighted; each box is one "
             f"token, · a space, ↵ a newline.</p>"]
    return "\n".join(parts + analysis.diff_rows(run, reference, anchored=True, with_similarity=True))


def inspector_note(run: Run) -> str:
    kind = run.output_kind
    finishes = sum(1 for e in run.events for o in e.outputs if o.finish_reason is not None)
    first = f"{run.events[0].t:.2f} s" if run.events else "never"
    note = (f"**{len(run.events)} raw events** for n={run.n} in {kind} mode (first at {first}, "
            f"{finishes} finish marks). In {kind} mode {KIND_NOTES.get(kind, '')}")
    source = run.engine.get("output_kind_source")
    if source:
        note += f"\n\nOn this backend the {kind} view is built {source}."
    return note


def events_table(run: Run) -> pd.DataFrame:
    """One row per raw event: number, time, indices carried, finished flags, text as yielded."""
    frame = run.events_frame().head(MAX_EVENT_ROWS)
    frame["indices"] = frame["indices"].map(lambda xs: ", ".join(map(str, xs)))
    frame["finished_indices"] = frame["finished_indices"].map(lambda xs: ", ".join(map(str, xs)))
    frame["texts"] = frame["texts"].map(lambda d: " | ".join(f"{i}: {t!r}" for i, t in d.items()))
    return frame.rename(columns={"finished": "parent finished", "texts": "text as yielded"})
