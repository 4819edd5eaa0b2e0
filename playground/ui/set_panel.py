"""The "Set" tab: what the n samples say together. The answer groups as a bar chart (the majority
first) and a table, the majority's vote share and the answer entropy, and the diversity of the set
(distinct-n, pairwise similarity, Vendi score), whole and after the first divergence point. All of
it is computed by playground.analysis from the finished run, so it is drawn when a run finishes
(and when the person picks another extractor), not per token.

Gradio's Plot has no click event, so a click on a bar reaches the server through the page:
``CLICK_JS`` (run once with ``demo.load(js=CLICK_JS)``) listens for Plotly's ``plotly_click`` on the
chart and writes the bar's sample indices (each bar's ``customdata``, "0,2,5") and the time into
the hidden ``picked`` textbox, whose ``.change`` event then fires (its ``.input`` does not, for a
value set by a script); ``picked_indices`` reads the indices back.

The embedding model for grouping by meaning is chosen where the app starts, not in the page (like
the sampling model: a page must not make the server load models), and the tab offers it only then.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from playground import analysis
from playground.analysis import InvalidExtractor, SetMeasures, message_figure
from playground.backends.embeddings import EmbeddingModelError, load_embedder
from playground.run import Run
from playground.ui.answers import CHOICES, PATTERN_EXAMPLE, PATTERN_LABEL, extractor_spec
from playground.ui.panels import Panel

INTRO = ("What the n samples say **together**: which answer most of them give (self-consistency: the majority "
         "answer and its vote share), how spread the answers are (entropy in bits: 0 when all agree), and how "
         "diverse the texts are. Pick how an answer is read from a sample; click a bar to see its samples.")

CLICK_JS = """
() => {
  const handler = (data) => {
    const point = data && data.points && data.points[0];
    const box = document.querySelector('#set-picked textarea, #set-picked input');
    if (!point || !box) return;
    box.value = String(point.customdata) + '@' + Date.now();  // a second click on a bar is a change too
    box.dispatchEvent(new Event('input', {bubbles: true}));
  };
  const attach = () => {
    document.querySelectorAll('#set-groups-chart .js-plotly-plot').forEach((gd) => {
      // a redrawn figure may come with a fresh emitter: attach to each one once
      if (gd._ev && !gd._ev.listeners('plotly_click').includes(handler)) gd.on('plotly_click', handler);
    });
  };
  new MutationObserver(attach).observe(document.body, {childList: true, subtree: true});
  attach();
}
"""


def picked_indices(text: str | None) -> list[int]:
    """The sample indices a bar click wrote ("0,2,5@1718000000000"); none for anything else."""
    try:
        return [int(part) for part in (text or "").split("@")[0].split(",") if part.strip()]
    except ValueError:
        return []


@dataclass
class SetValues:
    """What the tab shows for one run, and the per-sample table for the CSV export."""

    headline: str
    diversity: pd.DataFrame  # whole and after the first divergence
    chart: go.Figure
    groups: pd.DataFrame
    samples: pd.DataFrame  # one row per sample: answer, group (and meaning cluster)
    set_measures: SetMeasures | None  # None when the extractor cannot work


def set_values(run: Run, extractor: str | None = None, embedding_model: str | None = None,
               threshold: float = analysis.DEFAULT_SIMILARITY) -> SetValues:
    """The tab's values for ``run`` read with ``extractor`` (a spec such as ``last-number`` or
    ``regex:(\\d+)``). A pattern that cannot work, or an embedding model that fails, is said in the
    headline; the rest is still shown."""
    embeddings, problem = None, ""
    if embedding_model:
        try:
            embeddings = load_embedder(embedding_model).embed([s.text for s in run.samples])
        except EmbeddingModelError as e:
            problem = f"\n\n⚠️ Grouping by meaning is off: {_sentence(str(e))}"
    try:
        measures = analysis.set_measures(run, analysis.parse_extractor(extractor), embeddings, embedding_model or "",
                                         threshold)
    except InvalidExtractor as e:  # a pattern that does not compile, lacks its group, or takes too long
        empty = pd.DataFrame(columns=analysis.GROUP_COLUMNS)
        diversity = analysis.measures_table(analysis.set_diversity(run))
        return SetValues(f"⚠️ {_sentence(str(e))} The diversity figures below do not depend on it.", diversity,
                         message_figure("Answer groups", "No answers: the extractor cannot work."), empty,
                         pd.DataFrame(columns=analysis.SAMPLE_COLUMNS), None)
    return SetValues(headline(measures) + problem, analysis.measures_table(measures.diversity),
                     analysis.answer_groups_figure(measures.answers),
                     analysis.groups_frame(measures.answers), analysis.samples_frame(run, measures), measures)


def headline(measures: SetMeasures) -> str:
    """The answers in two sentences, and the set's diversity in one."""
    a, d = measures.answers, measures.diversity
    if not a.n:
        return "No samples."
    if a.majority is None:
        said = f"**No sample has an answer** that the {a.extractor} extractor can read."
    else:
        tie = " (a tie, broken by sample order)" if a.tied else ""
        said = (f"**Majority answer: `{_code(a.majority.answer)}`** given by {a.majority.size} of {a.n} samples: "
                f"vote share **{a.vote_share:.0%}**{tie}. {len(a.groups)} distinct answer(s), answer entropy "
                f"**{a.entropy:.2f} bits** (0: all agree; {math.log2(a.answered):.2f}: no two agree).")
        if a.unanswered:
            said += f" No answer could be read from sample(s) {', '.join(map(str, a.unanswered))}."
    shared = (f"The samples share their first {d.common_prefix} token(s)" if d.common_prefix
              else "The samples differ from their first token")
    if d.whole.vendi is not None:
        said += (f"\n\n{shared}; by the Vendi score they are worth **{d.whole.vendi:.2f}** distinct samples of "
                 f"{d.whole.samples}.")
    if measures.meaning:
        m = measures.meaning
        said += (f"\n\nBy meaning ({m.model}, cosine ≥ {m.threshold}): {len(m.clusters)} cluster(s), semantic "
                 f"entropy **{m.entropy:.2f} bits**.")
    return said


class SetTab:
    """The tab's components, declared in the current ``gr.Tabs``. ``embedding_model``: the model
    the app was started with for grouping by meaning, or None (the tab then does not offer it).

    On the page the tab is a Panel (``panel()``): every path that shows a run draws it, with the
    tab's controls as they stand; ``wire`` redraws it when a control changes."""

    def __init__(self, embedding_model: str | None = None):
        self.embedding_model = embedding_model
        self.csv, self.export_dir = None, None  # the Export tab's "Set figures (CSV)", once attached
        with gr.Tab("Set", id="set", elem_id="tab-set"):
            gr.Markdown(INTRO)
            with gr.Row():
                self.extractor = gr.Radio(CHOICES, value=analysis.DEFAULT_EXTRACTOR, label="Answer",
                                          elem_id="set-extractor")
                self.pattern = gr.Textbox(label=PATTERN_LABEL, elem_id="set-pattern", placeholder=PATTERN_EXAMPLE)
            with gr.Row(visible=embedding_model is not None):
                self.by_meaning = gr.Checkbox(value=False, label=f"Also group by meaning ({embedding_model})",
                                              elem_id="set-by-meaning")
                self.similarity = gr.Slider(0.5, 1.0, value=analysis.DEFAULT_SIMILARITY, step=0.01,
                                            label="Same meaning at cosine similarity ≥", elem_id="set-similarity")
            self.headline = gr.Markdown(elem_id="set-headline")
            with gr.Row():
                self.chart = gr.Plot(label="Answer groups", elem_id="set-groups-chart")
                self.diversity = gr.Dataframe(label="Diversity of the set", interactive=False, elem_id="set-figures")
            self.picked_note = gr.Markdown(elem_id="set-picked-note")
            self.groups = gr.Dataframe(label="Answer groups", interactive=False, wrap=True, elem_id="set-groups")
            self.picked = gr.Textbox(visible="hidden", elem_id="set-picked")  # written by CLICK_JS

    def export_to(self, button, export_dir) -> None:
        """Write the per-sample answers and groups as CSV for ``button`` (a DownloadButton) with
        every drawing, so the file follows the extractor on screen."""
        self.csv, self.export_dir = button, Path(export_dir)

    def controls(self) -> dict:
        """The controls by the name ``named_values`` takes them under."""
        return {"answer": self.extractor, "pattern": self.pattern, "by_meaning": self.by_meaning,
                "meaning_similarity": self.similarity}

    def inputs(self) -> list:
        """The controls, in ``values``' argument order after the run."""
        return list(self.controls().values())

    def components(self) -> dict:
        shown = {"headline": self.headline, "chart": self.chart, "diversity": self.diversity, "groups": self.groups,
                 "picked_note": self.picked_note}
        return {**shown, "csv": self.csv} if self.csv is not None else shown

    def outputs(self) -> list:
        return list(self.components().values())

    def panel(self) -> Panel:
        return Panel(self.named_values, self.components(), controls=self.controls())

    def named_values(self, run: Run, answer=None, pattern=None, by_meaning=False, meaning_similarity=None) -> dict:
        """{component name: value} for ``run`` read with the controls' values."""
        model = self.embedding_model if by_meaning else None
        shown = set_values(run, extractor_spec(answer, pattern), model,
                           float(meaning_similarity) if meaning_similarity is not None else analysis.DEFAULT_SIMILARITY)
        named = {"headline": shown.headline, "chart": shown.chart, "diversity": shown.diversity, "groups": shown.groups,
                 "picked_note": ""}
        if self.csv is not None:
            path = self.export_dir / f"{run.request.get('request_id', 'run')}-set.csv"
            shown.samples.to_csv(path, index=False)
            named["csv"] = str(path)
        return named

    def values(self, run: Run | None, *controls) -> dict:
        """{component: value} for ``run`` with the controls' values in ``inputs()`` order (nothing
        when there is no run yet)."""
        return self.panel().show(run, dict(zip(self.controls(), controls))) if run is not None else {}

    def pick(self, run: Run | None, text: str | None) -> str:
        """What a bar click says: the samples of the clicked group."""
        indices = picked_indices(text)
        if run is None or not indices:
            return ""
        seeds = {s.index: s.seed for s in run.samples}
        return (f"**{len(indices)} sample(s) in this group:** "
                + ", ".join(f"#{i} (seed {seeds.get(i)})" for i in indices))

    def wire(self, current, columns: list | None = None,
             highlight: Callable[[list[int]], dict] | None = None) -> None:
        """Redraw on a change of the controls and say which samples a clicked bar holds; ``current``
        is the page's State holding the shown Run. With ``columns`` and ``highlight`` (indices ->
        {column: update}), a click also marks the group's sample columns. (Drawing after a run is
        the page's: the tab is one of its panels.)"""
        for trigger in (self.extractor.change, self.pattern.submit, self.by_meaning.change, self.similarity.release):
            trigger(self.values, [current, *self.inputs()], self.outputs(), api_visibility="private")
        if highlight is None:
            self.picked.change(self.pick, [current, self.picked], self.picked_note, api_visibility="private")
            return

        def pick_and_highlight(run: Run | None, text: str | None) -> dict:
            return {self.picked_note: self.pick(run, text), **highlight(picked_indices(text) if run else [])}

        self.picked.change(pick_and_highlight, [current, self.picked], [self.picked_note, *columns],
                           api_visibility="private")


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."


def _code(text: str) -> str:
    return " ".join(text.split()).replace("`", "'")[:120]
