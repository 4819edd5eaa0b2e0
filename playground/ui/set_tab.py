"""The "Set" tab: what the n samples say together, and how many of them the prompt needs. The
answer groups as a bar chart (the majority first) and a table, the majority's vote share and the
answer entropy, the diversity of the set (distinct-n, pairwise similarity, Vendi score), whole and
after the first divergence point; with a reference answer, pass@k and maj@k beside agreement@k
against k, where the majority settled (Adaptive-Consistency's stopping rule, live while samples
finish), and the uncertainty of the set (EigV, DegMat, sequence log-probabilities). All of it is
computed by playground.analysis from the run, so it is drawn when a run finishes (and when the
person picks another extractor or reference), not per token.

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
from dataclasses import dataclass
from functools import partial

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from playground import analysis
from playground.analysis import InvalidExtractor, SetMeasures, message_figure
from playground.backends.embeddings import EmbeddingModelError, load_embedder
from playground.run import Run
from playground.ui.answer_controls import CHOICES, PATTERN_EXAMPLE, PATTERN_LABEL, extractor_spec
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
    // the samples area marks the group's samples (assets/samples_controls.js)
    document.dispatchEvent(new CustomEvent('sa-mark', {detail: String(point.customdata).split(',').map(Number)}));
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
    diversity: pd.DataFrame  # diversity, whole and after the first divergence
    chart: go.Figure
    groups: pd.DataFrame
    samples: pd.DataFrame  # one row per sample: answer, group (and meaning cluster)
    set_measures: SetMeasures | None  # None when the extractor cannot work
    convergence: go.Figure | None = None
    uncertainty: pd.DataFrame | None = None


def set_values(run: Run, extractor: str | None = None, embedding_model: str | None = None,
               threshold: float = analysis.DEFAULT_SIMILARITY, reference: str | None = None) -> SetValues:
    """The tab's values for ``run`` read with ``extractor`` (a spec such as ``last-number`` or
    ``regex:(\\d+)``) against ``reference`` (the right answer, if a person gave one). A pattern that
    cannot work, or an embedding model that fails, is said in the headline; the rest is still shown."""
    embeddings, problem = None, ""
    if embedding_model:
        try:
            embeddings = load_embedder(embedding_model).embed(analysis.answer_texts(run))
        except EmbeddingModelError as e:
            problem = f"\n\n⚠️ Grouping by meaning is off: {_sentence(str(e))}"
    try:
        parsed = analysis.parse_extractor(extractor)
        measures = analysis.set_measures(run, parsed, embeddings, embedding_model or "", threshold)
        how_many = analysis.how_many_samples(run, parsed, reference or None)
    except InvalidExtractor as e:  # a pattern that does not compile, lacks its group, or takes too long
        empty = pd.DataFrame(columns=analysis.GROUP_COLUMNS)
        diversity = analysis.measures_table(analysis.set_diversity(run))
        return SetValues(f"⚠️ {_sentence(str(e))} The diversity figures below do not depend on it.", diversity,
                         message_figure("Answer groups", "No answers: the extractor cannot work."), empty,
                         pd.DataFrame(columns=[c for c in analysis.SAMPLE_COLUMNS if c != "extractor"]), None)
    said = headline(measures) + problem
    if note := analysis.cut_short_note(run):  # a stopped run's answers are those of cut-short texts
        said = f"⚠️ {note}\n\n{said}"
    if measures.answers.n:
        c = how_many.convergence
        said += f"\n\n{_sentence(analysis.settled_sentence(c.settled, run.n, c.reference))}"
        if c.reference is not None and c.pass_at_k is not None:
            said += (f" Against the reference `{_code(c.reference)}`: pass@1 **{c.pass_at_k.at(1):.3f}**, "
                     f"pass@{run.n} **{c.pass_at_k.at(run.n):.3f}**.")
    return SetValues(said, analysis.measures_table(measures.diversity),
                     analysis.answer_groups_figure(measures.answers), analysis.groups_frame(measures.answers),
                     # the headline says the extractor; with a reference, each sample says if it is right
                     analysis.samples_frame(run, measures, reference).drop(columns=["extractor"]), measures,
                     analysis.convergence_figure(how_many.convergence),
                     analysis.confidence_table(how_many.confidence, run.engine))


def settled_live(run: Run, extractor: str | None = None) -> str:
    """While a run streams: where the majority settled among the samples finished so far, read in
    index order (the rule reads samples in order, so only an unbroken finished prefix counts)."""
    finished = 0
    while finished < run.n and run.samples[finished].finish_reason is not None:
        finished += 1
    if not finished:
        return f"*The stopping rule reads the samples in index order: waiting for sample 0 of {run.n} to finish.*"
    try:
        extract = analysis.parse_extractor(extractor)
        answers = analysis.read_answers(analysis.answer_texts(run)[:finished], extract)
    except InvalidExtractor as e:
        return f"⚠️ {_sentence(str(e))}"
    return f"● {_sentence(analysis.settled_sentence(analysis.settled_at(answers), run.n))}"


def headline(measures: SetMeasures) -> str:
    """The answers in two sentences, and the set's diversity in one."""
    a, d = measures.answers, measures.diversity
    if not a.n:
        return "No samples."
    if a.majority is None:
        said = f"**No sample has an answer** that the {a.extractor} extractor can read."
    else:
        said = (f"**Majority answer: `{_code(a.winner.answer)}`** given by {a.winner.size} of {a.n} samples: "
                f"vote share **{analysis.percent(a.vote_share)}**." if a.winner else
                f"**{a.majority_text()[:1].upper()}{a.majority_text()[1:]}** (each "
                f"{analysis.percent(a.vote_share)} of the samples).")
        over = f" over the {a.answered} samples that gave one" if a.unanswered else ""
        said += (f" {analysis.counted(len(a.groups), 'distinct answer')}, answer entropy **{a.entropy:.2f} bits**"
                 f"{over} (0: all agree; {math.log2(a.answered):.2f}: no two agree).")
        if a.unanswered:
            said += (f" No answer could be read from sample{'s' if len(a.unanswered) != 1 else ''} "
                     f"{', '.join(map(str, a.unanswered))}: they count against the vote share, which is out of all "
                     f"{a.n}.")
    shared = (f"The samples share their {analysis.first_tokens(d.common_prefix)}" if d.common_prefix
              else "The samples share no beginning (not all of them start with the same token)")
    if d.whole.vendi is not None:
        said += (f"\n\n{shared}; by the Vendi score they are worth **{d.whole.vendi:.2f}** distinct samples of "
                 f"{d.whole.samples}.")
    if measures.meaning:
        m = measures.meaning
        said += (f"\n\nBy meaning ({m.model}, cosine ≥ {m.threshold}): {len(m.clusters)} cluster(s), semantic "
                 f"entropy **{m.entropy:.2f} bits**.")
    return said


@dataclass
class SetTab:
    """The tab's components and ``embedding_model``: the model the app was started with for
    grouping by meaning, or None (the tab then does not offer it)."""

    embedding_model: str | None
    extractor: gr.Radio
    pattern: gr.Textbox
    reference: gr.Textbox
    by_meaning: gr.Checkbox
    similarity: gr.Slider
    headline: gr.Markdown
    settled: gr.Markdown
    chart: gr.Plot
    diversity: gr.Dataframe
    convergence: gr.Plot
    uncertainty: gr.Dataframe
    picked_note: gr.Markdown
    groups: gr.Dataframe
    picked: gr.Textbox

    def controls(self) -> dict:
        """The controls by the name ``named_values`` takes them under."""
        return {"answer": self.extractor, "pattern": self.pattern, "reference": self.reference,
                "by_meaning": self.by_meaning, "meaning_similarity": self.similarity}

    def components(self) -> dict:
        return {"headline": self.headline, "settled": self.settled, "chart": self.chart, "diversity": self.diversity,
                "convergence": self.convergence, "uncertainty": self.uncertainty, "groups": self.groups,
                "picked_note": self.picked_note}

    def panel(self) -> Panel:
        return Panel(self.named_values, self.components(), live=self.live, controls=self.controls(), tab="Set")

    def named_values(self, run: Run, answer=None, pattern=None, reference=None, by_meaning=False,
                     meaning_similarity=None) -> dict:
        """{component name: value} for ``run`` read with the controls' values."""
        model = self.embedding_model if by_meaning else None
        similarity = float(meaning_similarity) if meaning_similarity is not None else analysis.DEFAULT_SIMILARITY
        shown = set_values(run, extractor_spec(answer, pattern), model, similarity, reference)
        return {"headline": shown.headline, "settled": "", "chart": shown.chart, "diversity": shown.diversity,
                "convergence": shown.convergence, "uncertainty": shown.uncertainty, "groups": shown.groups,
                "picked_note": ""}

    def live(self, run: Run, answer=None, pattern=None, **_) -> dict:
        return {"settled": settled_live(run, extractor_spec(answer, pattern))}


def declare(embedding_model: str | None = None) -> SetTab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("Set", id="set", elem_id="tab-set"):
        gr.Markdown(INTRO)
        with gr.Row():
            extractor = gr.Radio(CHOICES, value=analysis.DEFAULT_EXTRACTOR, label="Answer", elem_id="set-extractor")
            pattern = gr.Textbox(label=PATTERN_LABEL, elem_id="set-pattern", placeholder=PATTERN_EXAMPLE)
            reference = gr.Textbox(label="Reference answer (the right one, read the same way): adds pass@k and "
                                         "maj@k", elem_id="set-reference", placeholder="e.g. 391")
        with gr.Row(visible=embedding_model is not None):
            by_meaning = gr.Checkbox(value=False, label=f"Also group by meaning ({embedding_model})",
                                     elem_id="set-by-meaning")
            similarity = gr.Slider(0.5, 1.0, value=analysis.DEFAULT_SIMILARITY, step=0.01,
                                   label="Same meaning at cosine similarity ≥", elem_id="set-similarity")
        settled = gr.Markdown(elem_id="set-settled")
        headline_ = gr.Markdown(elem_id="set-headline")
        with gr.Row():
            chart = gr.Plot(label="Answer groups", elem_id="set-groups-chart")
            diversity = gr.Dataframe(label="Diversity of the set", interactive=False, wrap=True, visible=False,
                                     elem_id="set-figures")
        picked_note = gr.Markdown(elem_id="set-picked-note")
        convergence = gr.Plot(label="How many samples: what k of the n would have given", elem_id="set-convergence")
        uncertainty = gr.Dataframe(label="Uncertainty of the set", interactive=False, wrap=True, visible=False,
                                   column_widths=["20%", "10%", "70%"], elem_id="set-uncertainty")
        groups = gr.Dataframe(label="Answer groups", interactive=False, wrap=True, visible=False, elem_id="set-groups",
                              column_widths=["7%", "30%", "6%", "7%", "12%", "13%", "25%"])  # analysis.GROUP_COLUMNS
        picked = gr.Textbox(visible="hidden", elem_id="set-picked")  # written by CLICK_JS
    return SetTab(embedding_model, extractor, pattern, reference, by_meaning, similarity, headline_, settled, chart,
                  diversity, convergence, uncertainty, picked_note, groups, picked)


def redraw(tab: SetTab, run: Run | None, *controls) -> dict:
    """The tab for ``run`` with the controls' values in ``controls()`` order (nothing without a run)."""
    return tab.panel().show(run, dict(zip(tab.controls(), controls))) if run is not None else {}


def pick(run: Run | None, text: str | None) -> str:
    """What a bar click says: the samples of the clicked group."""
    indices = picked_indices(text)
    if run is None or not indices:
        return ""
    seeds = {s.index: s.seed for s in run.samples}
    return (f"**{len(indices)} sample(s) in this group:** "
            + ", ".join(f"#{i} (seed {seeds.get(i)})" for i in indices[:64]) + (" …" if len(indices) > 64 else ""))


def connect(tab: SetTab, current: gr.State) -> None:
    """Redraw on a change of the controls, and say which samples a clicked bar holds (``current``:
    the page's State holding the shown Run). Drawing after a run is the page's: the tab is one of
    its panels."""
    inputs = [current, *tab.controls().values()]
    outputs = list(tab.components().values())
    for trigger in (tab.extractor.change, tab.pattern.submit, tab.reference.submit, tab.by_meaning.change,
                    tab.similarity.release):
        trigger(partial(redraw, tab), inputs, outputs, api_visibility="private")
    tab.picked.change(pick, [current, tab.picked], tab.picked_note, api_visibility="private")


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."


def _code(text: str) -> str:
    return " ".join(text.split()).replace("`", "'")[:120]
