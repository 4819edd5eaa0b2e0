"""The analysis tabs: each is a Panel, its components and a pure function from a Run to their
values, all computed by playground.analysis.

A new view of a run is one more Panel: declare its components in the layout (app.py), write a
function ``Run -> {name: value}`` here, and list the Panel where the page is made. Every path that
shows a run (the end of a run, Stop, History, the QA tab, an opened file, a branch) then shows it
without knowing it exists. A tab with settings of its own (the Set tab's answer extractor, the
Diff tab's samples) names them as the Panel's ``controls``: every path that shows a run passes
their current values to ``values``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
import pandas as pd

from playground import analysis
from playground.run import Run

# The timing table's columns with their units: the charts beside it are in ms, these in seconds.
TIMING_UNITS = {"ttft": "ttft (s)", "total_time": "total time (s)", "itl_mean": "itl mean (s)",
                "itl_median": "itl median (s)", "itl_max": "itl max (s)", "engine_ttft": "engine ttft (s)",
                "tokens_per_s": "tok/s (from the request)", "decode_tokens_per_s": "tok/s (after the first)"}
MAX_EVENT_ROWS = 1000  # the table stays responsive; the JSON bundle has every event
DIFF_ROWS = 16  # samples the Diff tab shows against the reference unless a person picks others

KIND_NOTES = {
    "CUMULATIVE": "each event carries the **full text so far** of the samples that advanced, so the last "
                  "event does not hold all n: a consumer keeps the latest value per index.",
    "DELTA": "each event carries only the **new tokens** of the samples that advanced; when the consumer "
             "falls behind, queued pieces of the same index are concatenated into one event.",
    "FINAL_ONLY": "the engine yields **nothing until every sample has finished**, then one event with all n "
                  "samples in index order.",
}
# What FINAL_ONLY's one event was, by how the run went (a Stop ends every sample at once).
FINAL_ONLY_ENDS = {
    "finished": " That is why the samples filled only at the end.",
    "aborted": " This run was stopped: its one event is the stop's, every sample's tokens so far (finish reason "
               "abort for those still going, their own for those that had ended), and its time is when the stop "
               "came, not a first token's.",
    "running": " No event yet: the samples stay empty until every one has finished.",
}

Values = dict[str, Any]


@dataclass
class Panel:
    """A tab's components by name, and ``values(run)``: the same names mapped to what they show.

    ``live(run)``, when given, is the part worth redrawing while samples stream (figures travel
    whole, so the page sends them about once a second, not per token); the components it leaves
    out say they are drawn when the run ends (``WAITING``), never show the run before; ``every``:
    the seconds between two live drawings (None: the page's pace for figures, by the run's n).
    ``controls``: the tab's own settings by name; ``values(run, **settings)`` receives those of
    them it is given.
    """

    values: Callable[..., Values]
    components: dict[str, gr.components.Component] = field(default_factory=dict)
    live: Callable[[Run], Values] | None = None
    controls: dict[str, gr.components.Component] = field(default_factory=dict)
    tab: str = ""  # the label of the tab it fills: only the tab on screen is drawn
    every: float | None = None

    def live_components(self) -> list[gr.components.Component]:
        return list(self.components.values()) if self.live else []

    def show(self, run: Run, settings: dict | None = None) -> dict:
        settings = settings or {}
        return self._keyed(run, self.values(run, **{k: settings[k] for k in self.controls if k in settings}))

    def show_live(self, run: Run, settings: dict | None = None) -> dict:
        if not self.live:
            return {}
        settings = settings or {}
        values = self.live(run, **{k: settings[k] for k in self.controls if k in settings})
        waiting = {name: _waiting(c) for name, c in self.components.items() if name not in values}
        return self._keyed(run, {**waiting, **values})

    def _keyed(self, run: Run, values: Values) -> dict:
        """Values by component; every figure of a replayed or hand-made run says so under its title."""
        return {self.components[name]: _shown(self.components[name], analysis.marked(value, run))
                for name, value in values.items() if name in self.components}


WAITING = "Drawn when the run ends."


def _waiting(component: gr.components.Component):
    """What a part of a panel that is drawn only at the run's end shows while it streams: a chart
    says so, a table is hidden, a line is empty."""
    if isinstance(component, gr.Plot):
        return analysis.message_figure("", WAITING, height=240)
    if isinstance(component, gr.Dataframe):
        return gr.update(value=None, visible=False)
    return "" if isinstance(component, (gr.Markdown, gr.HTML)) else gr.skip()


def _shown(component: gr.components.Component, value):
    """A table is declared hidden (empty, Gradio heads it "1 2 3") and shown with its first rows."""
    if isinstance(component, gr.Dataframe) and not isinstance(value, dict):
        return gr.update(value=value, visible=value is not None)
    return value


def panel(tab: str, values: Callable[..., Values], live: Callable[[Run], Values] | None = None,
          controls: dict | None = None, **components) -> Panel:
    """``panel("Timing", panels.timing, itl=gr.Plot(...), ...)``: the form the layout declares
    panels in, inside the tab of that label."""
    return Panel(values, components, live, controls or {}, tab)


# --- one function per tab: Run -> {component name: value} ----------------------------------------

def diff(run: Run, diff_reference: int | None = 0, diff_samples: str | None = None) -> Values:
    """The samples against a reference sample (``diff_reference``), token by token: those a person
    picked (``diff_samples``, e.g. "0-15, 40"), else the first DIFF_ROWS in the divergence tree's
    order (so the ones that part late sit together); and the pairwise heatmap of every sample."""
    reference = reference_sample(diff_reference, run.n)
    return {"reference": gr.update(choices=list(range(run.n)), value=reference),
            "diff_view": diff_view(run, reference, diff_samples), "pairwise": analysis.pairwise_heatmap(run)}


def reference_sample(value: int | str | None, n: int) -> int:
    """The Diff's reference as a sample of a run of ``n``: a value past the run's last sample (the
    one picked in a bigger run) is its last; anything that is no sample number, the first."""
    try:
        return min(max(int(value or 0), 0), n - 1) if n else 0
    except (TypeError, ValueError):
        return 0


def tree(run: Run) -> Values:
    return {"tree": analysis.tree_figure(run)}


def timing(run: Run) -> Values:
    return {"tokens_over_time": analysis.tokens_over_time_figure(run), "itl": analysis.itl_figure(run),
            "ttft": analysis.ttft_figure(run), "child_timeline": analysis.child_timeline_figure(run),
            "table": analysis.timing_frame(run).round(3).rename(columns=TIMING_UNITS)}


def timing_live(run: Run) -> Values:
    """Tokens over time follows the run; the latencies and each child's timeline wait for its end."""
    return {"tokens_over_time": analysis.tokens_over_time_figure(run)}


def logprobs(run: Run) -> Values:
    return {"uncertainty": analysis.uncertainty_figure(run), "agreement": analysis.agreement_figure(run)}


def inspector(run: Run) -> Values:
    return {"note": inspector_note(run), "timeline": analysis.events_figure(run), "events": events_table(run)}


def inspector_live(run: Run) -> Values:
    """The chart and the note follow the run; the table of every event waits for its end (it would
    be rebuilt with every event)."""
    return {"note": inspector_note(run), "timeline": analysis.events_figure(run)}


# --- the pieces ----------------------------------------------------------------------------------

def picked(text: str | None, n: int) -> tuple[list[int] | None, list[str]]:
    """Sample indices a person typed ("0-15, 40"), in range and once each (None for none), and a
    sentence for each item not taken as typed, for the view to say: one that names no sample of
    the n (past it, or not a number), a range read up to the last sample, one written backwards."""
    chosen: list[int] = []
    said: list[str] = []
    for part in re.split(r"[\s,;]+", text or ""):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        typed = (int(match[1]), int(match[2] or match[1])) if match else None
        if typed is None or min(typed) >= n:
            said += [f"{part} left out (past sample {n - 1}, or not a number)"] if part else []
            continue
        first, last = sorted(typed)
        if last >= n or typed[0] > typed[1]:
            said.append(f"{part} read as {first}-{min(last, n - 1)}")
        chosen += [i for i in range(first, min(last, n - 1) + 1) if i not in chosen]
    return chosen or None, said


def diff_view(run: Run, reference: int, diff_samples: str | None = None) -> str:
    """The chosen samples against the reference, token by token, with where each first diverges.
    A click on a token offers to branch from it (the page listens for it)."""
    if not run.samples:
        return ""
    ref = run.samples[reference]
    shown, beyond = picked(diff_samples, run.n)
    if shown is None:
        order, _ = analysis.prefix_order([s.token_ids for s in run.samples])
        # the reference, its identical copies, then the others in the tree's order (a stable sort)
        others = sorted((i for i in order if i != reference),
                        key=lambda i: run.samples[i].token_ids != ref.token_ids)
        shown = [reference, *others[:DIFF_ROWS - 1]]
        more = (f" Showing {len(shown)} of the {run.n} samples (those that share the longest beginnings side by "
                "side): list others above." if len(shown) < run.n else "")
    else:
        more = f" Showing the {len(shown)} of the {run.n} samples listed above." if len(shown) < run.n else ""
    if beyond:
        more += f" Of the samples listed: {'; '.join(beyond)}."
    origin = f"<p>{html.escape(note)}</p>" if (note := analysis.origin_note(run)) else ""
    parts = [f"{origin}<p><b>{analysis.shared_prefix_sentence(run)}</b> Compared with "
             f"sample {reference} (seed {ref.seed}): {analysis.diff_legend()} are marked; each box is one token, · a "
             f"space, ↵ a newline. Click a token to branch from it.{more}</p>"]
    return "\n".join(parts + analysis.diff_rows(run, reference, anchored=True, with_similarity=True, only=shown))


def inspector_note(run: Run) -> str:
    kind = run.output_kind
    finishes = sum(1 for e in run.events for o in e.outputs if o.finish_reason is not None)
    first = (f"{'at' if len(run.events) == 1 and run.finished else 'the first at'} {run.events[0].t:.2f} s"
             if run.events else "none yet" if not run.finished else "none")
    so_far = " so far" if not run.finished else ""
    note = (f"**{analysis.counted(len(run.events), 'raw event')}{so_far}** for n={run.n} in {kind} mode ({first}, "
            f"{analysis.counted(finishes, 'finish mark')}). In {kind} mode {KIND_NOTES.get(kind, '')}")
    if kind == "FINAL_ONLY":
        note += FINAL_ONLY_ENDS.get(run.status, "")
    if run.mutated_events:
        shown = ", ".join(f"#{k}" for k in run.mutated_events[:10]) + (" …" if len(run.mutated_events) > 10 else "")
        note = (f"⚠️ **{analysis.counted(len(run.mutated_events), 'event')} changed after being yielded** ({shown}): "
                "an output object vLLM handed over was written to again, which breaks the no-mutation rule of the "
                "QA matrix. The table shows each event as it was when yielded.\n\n" + note)
    if origin := analysis.origin_note(run):
        note = f"{origin} The events below are as the replay yielded them.\n\n{note}" if analysis.replayed_from(run) \
            else f"{origin}\n\n{note}"
    if run.request.get("stop") and kind != "FINAL_ONLY":
        note += (" With stop strings, vLLM holds a sample's text back while the end of it could still begin a "
                 "stop string: an event may carry tokens with empty texts, and a later one their text.")
    if run.finished and not analysis.replayed_from(run) and (others := analysis.other_requests(run)):
        # read once the run has ended: the live note stays cheap at n=256
        note += (f"\n\nThe engine held up to {analysis.counted(others, 'other request')} beside this run's own while "
                 "it ran (another tab's or another user's; `engine_requests` counts every request in the engine): "
                 "they share its steps, so events may carry fewer tokens each, and a shared batch can change a "
                 "seeded sample.")
    source = run.engine.get("output_kind_source")
    if source:
        note += f"\n\nOn this backend the {kind} view is built {source}."
    return note


def events_table(run: Run) -> pd.DataFrame:
    """One row per raw event: number, time, indices carried, the parent's finished flag, the
    samples that finished in it with their finish reasons (a stop ends only those still going
    with abort), the tokens it carried (under CUMULATIVE each sample's whole length so far, under
    DELTA the new ones), text as yielded."""
    frame = run.events_frame().head(MAX_EVENT_ROWS)
    frame["indices"] = frame["indices"].map(lambda xs: ", ".join(map(str, xs)))
    frame["finish_reasons"] = frame["finish_reasons"].map(lambda d: ", ".join(f"{i}: {r}" for i, r in d.items()))
    frame["texts"] = frame["texts"].map(lambda d: " | ".join(f"{i}: {t!r}" for i, t in d.items()))
    return frame.rename(columns={
        "finished": "parent finished", "finish_reasons": "samples that finished (reason)",
        "tokens": "tokens carried", "texts": "text as yielded"})
