"""The Graph tab: the n samples as paths through shared word spans, where they part and where they
meet again (playground.analysis.graph), with the raw texts a click away.

The graph answers "how diverse is this, and where?" at a glance; the texts answer the details, so
a click on a node marks its samples in the samples area (columns and token wall, as a Set tab bar
does) and lists them here, each sample's text with the node's words marked and a button to branch
from that point (sample i at the token the node starts in, through the Branch tab's hidden box).

Gradio's Plot has no click event: ``CLICK_JS`` (run once with ``demo.load(js=CLICK_JS)``) listens
for Plotly's ``plotly_click`` on the chart, dispatches the samples area's ``sa-mark`` with the
node's samples, rings the node in the chart and writes it into the hidden ``#graph-picked`` box,
whose ``.change`` then fills the note (scrolled into view when it opens off screen); a click on a
note's branch button writes "i,k" into ``#branch-pick``. A note belongs to its run (the chart's
``layout.meta["run"]``, the note's ``data-run``; a replay's chart keeps its origin in the same
``meta``): the chart's redraws leave it as it is, and the page hides it beside another run's graph.

While a run streams with the tab on screen the graph grows about once a second (``LIVE_EVERY``
after the last drawing, which at n=256 x 128 tokens takes a few tenths of a second to build): the
page's live panels draw it at the panel's own pace (``Panel.every``), not the n/32 s of its other
figures. As the graph grows its fold only rises (``live_fold``): no node is folded away and drawn
again by turns.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import partial

import gradio as gr

from playground import analysis
from playground.analysis import InvalidExtractor, SampleGraph
from playground.analysis.graph_figure import WIDE, fold_for
from playground.analysis.replays import with_meta
from playground.backends.embeddings import EmbeddingModelError, load_embedder
from playground.run import Run
from playground.ui.answer_controls import extractor_spec
from playground.ui.page import Page
from playground.ui.panels import Panel

INTRO = ("The samples as **paths through shared words**: they share a node while they say the same words, part "
         "where they differ, and **meet again** where they later say the same words (compared lower-cased, without "
         "punctuation at the edges of words). A node is as large as the samples through it, an edge as wide as "
         "the samples along it; at a branch, each branch's share of the samples and the model's probability of its "
         "first token. Drag to pan; zoom with the buttons above the graph. **Click a node** (or Tab to the graph "
         "and step through its nodes with the arrow keys) to mark its samples above and to read them here, with "
         "a button to branch from that point.")
COLOURS = [("token probability", "probability"), ("answer group (the Set tab's extractor)", "answer")]
SHOWN_SAMPLES = 64  # samples a clicked node lists with their texts
CONTEXT_CHARS = 40  # characters either side of the node's words in a folded sample
KEPT = 4  # graphs kept for the next ask
# Seconds from a streaming run's graph drawn to the next one's build: with builds of up to about a
# second (n=256 x 128 tokens), the graph takes at most half of the core it shares with the engine.
LIVE_EVERY = 1.0

CLICK_JS = """
() => {
  let picked = null, shown = null;  // the node clicked last ({run, node}); the note last brought into view
  const handler = (data) => {
    const point = data && data.points && data.points[0];
    if (!point || typeof point.customdata !== 'string' || !point.customdata.includes('|')) return;
    const samples = point.customdata.split('|')[1];
    picked = {run: runOf(document.querySelector('#graph-chart .js-plotly-plot')), node: point.customdata.split('|')[0]};
    ring();
    // the samples area marks the node's samples (assets/samples_controls.js)
    document.dispatchEvent(new CustomEvent('sa-mark', {detail: samples ? samples.split(',').map(Number) : []}));
    const box = document.querySelector('#graph-picked textarea, #graph-picked input');
    if (!box) return;
    box.value = point.customdata + '@' + Date.now();  // a second click on a node is a change too
    box.dispatchEvent(new Event('input', {bubbles: true}));
  };
  const attach = () => document.querySelectorAll('#graph-chart .js-plotly-plot').forEach((gd) => {
    if (gd._ev && !gd._ev.listeners('plotly_click').includes(handler)) gd.on('plotly_click', handler);
    if (!gd.hasAttribute('tabindex')) {  // the keyboard's way in: Tab to the chart, arrows pick its nodes
      gd.tabIndex = 0;
      gd.setAttribute('role', 'application');
      gd.setAttribute('aria-label', 'Sample graph: the arrow keys step through its nodes, left to right, and mark '
                      + "each one's samples as a click does; the list of them follows the chart.");
    }
  });
  let step = -1;  // the node the arrow keys are at, in reading order (column, then top to bottom)
  document.addEventListener('keydown', (e) => {
    const gd = e.target && e.target.closest && e.target.closest('#graph-chart .js-plotly-plot');
    const back = e.key === 'ArrowLeft' || e.key === 'ArrowUp';
    if (!gd || !gd._fullData || !(back || e.key === 'ArrowRight' || e.key === 'ArrowDown')) return;
    const nodes = [];
    gd._fullData.forEach((trace) => (trace.customdata || []).forEach((cd, k) => {
      if (typeof cd === 'string' && cd.includes('|')) nodes.push({customdata: cd, x: trace.x[k], y: trace.y[k]});
    }));
    if (!nodes.length) return;
    e.preventDefault();
    nodes.sort((a, b) => a.x - b.x || b.y - a.y);
    const mine = picked && picked.run === runOf(gd);  // from the node clicked last, else where the keys were
    const at = mine ? nodes.findIndex((p) => p.customdata.startsWith(picked.node + '|')) : step;
    step = at < 0 ? (back ? nodes.length - 1 : 0) : (at + (back ? nodes.length - 1 : 1)) % nodes.length;
    handler({points: [nodes[step]]});
  });
  const runOf = (gd) => {  // whose run the chart draws (layout.meta.run; a replay's origin is beside it)
    const meta = gd && gd.layout && gd.layout.meta;
    return meta && typeof meta === 'object' ? meta.run : meta;
  };
  // The node clicked last, ringed in the chart while it draws that node's run (its redraws too).
  const ring = () => {
    const gd = document.querySelector('#graph-chart .js-plotly-plot');
    if (!gd || !gd._fullData) return;
    const lit = gd.querySelectorAll('.graph-picked-node');
    const wanted = picked && picked.run === runOf(gd) ? picked.node + '|' : null;
    if (wanted === null && !lit.length) return;
    let target = null;
    if (wanted !== null) {
      const groups = new Map();  // trace index -> its group of points (plotly binds each its trace)
      gd.querySelectorAll('.scatterlayer .trace').forEach((g) => {
        const cd = g.__data__;
        if (cd && cd[0] && cd[0].trace) groups.set(cd[0].trace.index, g);
      });
      gd._fullData.forEach((trace, i) => (trace.customdata || []).forEach((cd, k) => {
        if (typeof cd === 'string' && cd.startsWith(wanted) && groups.has(i)) {
          target = groups.get(i).querySelectorAll('.points path.point')[k] || target;
        }
      }));
    }
    lit.forEach((point) => {
      if (point === target) return;
      point.classList.remove('graph-picked-node');
      point.style.stroke = point.style.strokeWidth = '';
    });
    if (target && !target.classList.contains('graph-picked-node')) {
      target.classList.add('graph-picked-node');
      target.style.stroke = '#f59e0b';
      target.style.strokeWidth = '4px';
    }
  };
  // A note belongs to the run whose graph was clicked: shown while the chart draws that run (its
  // redraws as it grows and ends keep the note), hidden once the chart draws another. A note that
  // opens off screen is brought into view.
  const sync = () => {
    const gd = document.querySelector('#graph-chart .js-plotly-plot');
    const run = runOf(gd);
    document.querySelectorAll('#graph-note .graph-note-body').forEach((body) => {
      body.hidden = !run || body.dataset.run !== String(run);
      if (!body.hidden && body.dataset.pick && body.dataset.pick !== shown) {
        shown = body.dataset.pick;  // once per click: its first sample on screen, else the note scrolled to
        const first = (body.querySelector('.graph-sample') || body).getBoundingClientRect();
        if (body.getBoundingClientRect().top < 0 || first.bottom > window.innerHeight) {
          body.scrollIntoView({block: 'nearest'});
        }
      }
    });
    ring();
  };
  new MutationObserver(() => { attach(); sync(); }).observe(document.body, {childList: true, subtree: true});
  attach();
  document.addEventListener('click', (e) => {
    const button = e.target.closest && e.target.closest('#graph-note [data-branch]');
    const pick = document.querySelector('#branch-pick textarea, #branch-pick input');
    if (!button || !pick) return;
    pick.value = button.dataset.branch + '@' + Date.now();
    pick.dispatchEvent(new Event('input', {bubbles: true}));
  });
}
"""


@dataclass
class GraphTab:
    """The tab's components; ``embedding_model``: the app's model for matching words by meaning
    (None: not offered)."""

    embedding_model: str | None
    colour: gr.Radio
    fold: gr.Number
    by_meaning: gr.Checkbox
    summary: gr.Markdown
    chart: gr.Plot
    note: gr.HTML
    picked: gr.Textbox
    _kept: dict = field(default_factory=dict)  # the last graphs built, by run and state
    _folds: dict = field(default_factory=dict)  # a streaming run's fold so far, by run (``live_fold``)

    def controls(self, set_tab) -> dict:
        """Its own settings, and the Set tab's extractor (colour by answer group reads it)."""
        return {"graph_colour": self.colour, "graph_fold": self.fold, "graph_meaning": self.by_meaning,
                "answer": set_tab.extractor, "pattern": set_tab.pattern}

    def components(self) -> dict:
        return {"graph_summary": self.summary, "graph_chart": self.chart, "graph_note": self.note}

    def panel(self, set_tab) -> Panel:
        return Panel(self.values, self.components(), live=self.values, controls=self.controls(set_tab), tab="Graph",
                     every=LIVE_EVERY)

    def graph(self, run: Run, graph_meaning=False) -> tuple[SampleGraph, str]:
        """The run's graph, words matched by meaning too when asked and offered; a problem said.
        The last few are kept: a click on a node, or another colour or fold, asks for the same
        graph again (at n=256 it is a few tenths of a second to build)."""
        key = (run.request.get("request_id"), run.status, len(run.events), tuple(len(s.text) for s in run.samples),
               bool(graph_meaning and self.embedding_model))
        if key not in self._kept:
            self._kept[key] = self._graph(run, graph_meaning)
            while len(self._kept) > KEPT:
                self._kept.pop(next(iter(self._kept)))
        return self._kept[key]

    def _graph(self, run: Run, graph_meaning=False) -> tuple[SampleGraph, str]:
        if not (graph_meaning and self.embedding_model):
            return analysis.sample_graph(run), ""
        keys = analysis.word_keys(run)
        try:
            vectors = load_embedder(self.embedding_model).embed(keys)
        except EmbeddingModelError as e:
            return analysis.sample_graph(run), f" ⚠️ Matching by meaning is off: {e}."
        how = (f"{analysis.NORMALISATION}, and words of cosine similarity ≥ {analysis.WORD_SIMILARITY} by "
               f"{self.embedding_model}")
        synonyms = analysis.synonyms_by_meaning(keys, vectors, analysis.WORD_SIMILARITY)
        return analysis.sample_graph(run, synonyms, how), ""

    def values(self, run: Run, graph_colour=None, graph_fold=None, graph_meaning=False, answer=None,
               pattern=None) -> dict:
        graph, problem = self.graph(run, graph_meaning)
        answers = None
        if graph_colour == "answer":
            try:
                answers = analysis.group_answers(run, extractor_spec(answer, pattern))
            except InvalidExtractor as e:
                problem += f" ⚠️ Coloured by probability: the Set tab's extractor cannot work ({e})."
        fold = max(int(graph_fold or 0), 0) or None  # 0, or a typed -3: as many as fit
        if graph_fold is not None and graph_fold != (fold or 0):  # 2.5, -3: said as read, not silently
            problem += (f" The fold {graph_fold:g} was read as {fold}." if fold else
                        f" The fold {graph_fold:g} was read as 0: as many words as fit.")
        if fold is None and not run.finished:
            fold = self.live_fold(run, graph)
        figure = analysis.graph_figure(graph, "answer" if answers else "probability", answers, fold, width=WIDE)
        with_meta(figure, run=run_of_note(run))  # whose graph it is: the page shows that run's note only
        # The note is left as it is: a click may come between a run's last drawings (its end is
        # drawn twice), and the page hides a note of another run (CLICK_JS).
        return {"graph_summary": analysis.graph_sentence(graph) + problem, "graph_chart": figure,
                "graph_note": gr.skip()}

    def live_fold(self, run: Run, graph: SampleGraph) -> int:
        """The fold of a streaming run's graph: as many nodes as fit, as at its end (``fold_for``),
        but never less than its last drawing's, so that no node is folded away and drawn again by
        turns as the run grows; at its end the fold is that of the whole run."""
        key = run_of_note(run)
        fold = self._folds[key] = max(fold_for(graph), self._folds.get(key, 1))
        while len(self._folds) > KEPT:
            self._folds.pop(next(iter(self._folds)))
        return fold


def declare(embedding_model: str | None = None) -> GraphTab:
    """The tab, declared in the current ``gr.Tabs``."""
    with gr.Tab("Graph", id="graph", elem_id="tab-graph"):
        gr.Markdown(INTRO)
        with gr.Row():
            colour = gr.Radio(COLOURS, value="probability", label="Colour nodes by", elem_id="graph-colour")
            # No minimum: Gradio refuses a number below it in every event that reads the box, Run's
            # among them (the panels' controls go with each); a negative one is read as 0.
            fold = gr.Number(value=0, precision=0, label="Fold words fewer samples said than (0: as "
                             "many as fit)", elem_id="graph-fold")
            by_meaning = gr.Checkbox(value=False, label=f"Match words by meaning too ({embedding_model})",
                                     visible=embedding_model is not None, elem_id="graph-meaning")
        summary = gr.Markdown(elem_id="graph-summary")
        chart = gr.Plot(label="Sample graph (click a node)", elem_id="graph-chart")
        note = gr.HTML(elem_id="graph-note")
        picked = gr.Textbox(visible="hidden", elem_id="graph-picked")  # written by CLICK_JS
    return GraphTab(embedding_model, colour, fold, by_meaning, summary, chart, note, picked)


def connect(tab: GraphTab, page: Page, set_tab) -> None:
    """Redraw on a change of the tab's controls; a clicked node's samples in the note."""
    controls = tab.controls(set_tab)
    outputs = list(tab.components().values())

    def redraw(run: Run | None, *values) -> dict:
        return tab.panel(set_tab).show(run, dict(zip(controls, values))) if run is not None else {}

    for trigger in (tab.colour.change, tab.fold.submit, tab.by_meaning.change):
        trigger(redraw, [page.current, *controls.values()], outputs, api_visibility="private")
    tab.picked.change(partial(picked, tab), [page.current, tab.picked, tab.by_meaning], tab.note,
                      api_visibility="private")


def picked(tab: GraphTab, run: Run | None, text: str | None, graph_meaning=False) -> str:
    """The note for a clicked node (its ``customdata`` and the time: "12,13|0,4@..."): its
    samples with their texts, each with a branch button."""
    node = (text or "").split("@")[0]
    if run is None or "|" not in node:
        return ""
    graph, _ = tab.graph(run, graph_meaning)
    try:
        places = analysis.node_places(graph, node)
        words = node_words(graph, node.split("|")[0])
    except (ValueError, IndexError, KeyError, AttributeError):  # a click on a graph no longer on screen
        return ""
    return note_html(run, node.split("|")[0], places, words, pick=text)


def node_words(graph: SampleGraph, node: str) -> str:
    """The words of a drawn node ("12,13": graph nodes 12 and 13, joined in the drawing) as its
    first sample wrote them; for "more:12" those of the node after which the rare words go on
    (empty after the prompt), and for the prompt nothing."""
    if node == "start":
        return ""
    members = node[5:] if node.startswith("more:") else node
    if members == "start":
        return ""
    return " ".join(graph.nodes[int(m)].text for m in members.split(","))


def run_of_note(run: Run) -> str:
    """The run a graph and its note belong to, as the page compares them."""
    return str(run.request.get("request_id"))


def note_html(run: Run, node: str, places: list[analysis.Place], words: str = "", pick: str | None = None) -> str:
    """The samples at a clicked node (``words``: its words, ``node_words``): where it is in each
    sample's text, and a branch button there. ``pick``: the click it answers (the page brings a
    note into view once per click)."""
    samples = {s.index: s for s in run.samples}
    quoted = f"“{analysis.truncate(' '.join(words.split()), 80)}”"
    what = ("the prompt: every sample's start" if node == "start" else
            ("rare words after " + (quoted if words else "the prompt") + ", folded: the samples that go on "
             "along words fewer samples said than the fold") if node.startswith("more:") else
            quoted if words else "this node")
    head = (f"<p><b>{analysis.counted(len(places), 'sample')} at {html.escape(what)}.</b> Each "
            "sample's text, the node's words marked")
    head += ("; ⎇ branches from the node's first token in that sample (the Branch tab opens there).</p>"
             if any(p.token is not None for p in places) else " (no token ids were recorded: no point to branch "
             "from).</p>")
    rows = []
    for place in places[:SHOWN_SAMPLES]:
        s = samples[place.sample]
        text = s.text
        before, here, after = text[:place.start], text[place.start:place.end], text[place.end:]
        button = (f"<button class='graph-branch' data-branch='{place.sample},{place.token}'>⎇ #{place.sample} at "
                  f"token {place.token}</button> " if place.token is not None else "")
        seed = f" (seed {s.seed})" if s.seed is not None else ""
        # folded, a sample reads as the words around the node (the node's words alone are every row's)
        lead, tail = " ".join(before.split()), " ".join(after.split())
        around = (f"{'…' if len(lead) > CONTEXT_CHARS else ''}{html.escape(lead[-CONTEXT_CHARS:])} "
                  f"<mark>{html.escape(analysis.truncate(' '.join(here.split()), 80))}</mark> "
                  f"{html.escape(tail[:CONTEXT_CHARS])}{'…' if len(tail) > CONTEXT_CHARS else ''}")
        rows.append(f"<div class='graph-sample' data-sample='{place.sample}'>{button}<b>#{place.sample}</b>{seed}"
                    f"<details><summary>{around.strip()}"
                    f"</summary><pre>{html.escape(before)}<mark>{html.escape(here)}</mark>{html.escape(after)}</pre>"
                    "</details></div>")
    more = (f"<p>… and {len(places) - SHOWN_SAMPLES} more: "
            + ", ".join(f"#{p.sample}" for p in places[SHOWN_SAMPLES:]) + "</p>") if len(places) > SHOWN_SAMPLES else ""
    body = head + "".join(rows) + more
    return (f"<div class='graph-note-body' data-run='{html.escape(run_of_note(run), quote=True)}' "
            f"data-node='{html.escape(node, quote=True)}' data-pick='{html.escape(pick or node, quote=True)}'>"
            f"{body}</div>")
