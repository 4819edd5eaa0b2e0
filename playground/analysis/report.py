"""A run, a comparison of two runs, or a sweep, as one self-contained HTML page.

Anyone can open it: no server, no network. Each chart is plotly's own HTML export of the figure the
page shows, and plotly.js is inlined once, in the head. Every text from the run (prompts, samples,
tokens) is escaped: a sample that writes ``<script>`` shows it, it does not run it.

A report is read by people, so every table is written by one writer (``Page.table``) with one rule
for what is not there: a missing value (None, NaN, pandas' NA, a blank text) is written ``MISSING``
("—"), never "<NA>", "nan", "None" or a blank, whichever table it is in; the row around it says
why (a pair's verdict "identical" or "only in run A", the answer "(no answer)"). Floats are
written with three decimals.

With a reference answer (the run's ``request["reference"]``: the Set tab's, set on the run by the
Export tab, or a batch line's), a run's section has the README's "How many samples do you need?"
part as the Set tab shows it: where the majority settled, pass@1 and pass@n, agreement@k, pass@k and
maj@k against k (the chart when the report has charts, and a table at a few k always), and the
set's uncertainty (EigV, DegMat and the logprob measures).
"""

from __future__ import annotations

import html
import math
import time

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from playground.analysis.answers import Extractor, cut_short_note, group_answers
from playground.analysis.branching import aligned, branch_label
from playground.analysis.comparison import (
    PAIRS_HEADING,
    PairBy,
    comparison_html,
    conditions_statement,
    measures_side_by_side,
    pair_frame,
    run_label,
    run_row,
    seed_statement,
    settings_diff,
)
from playground.analysis.confidence import confidence_table, probabilities_note
from playground.analysis.convergence import (
    CURVE_LABELS,
    Convergence,
    convergence_figure,
    how_many_samples,
    settled_sentence,
)
from playground.analysis.diff import diff_legend, diff_rows, pairwise_heatmap, shared_prefix_sentence
from playground.analysis.display import continued_text, model_name, truth_word
from playground.analysis.graph import graph_sentence, sample_graph
from playground.analysis.graph_figure import WIDE, graph_figure
from playground.analysis.replays import marked, origin_note
from playground.analysis.sample_set import answer_groups_figure, groups_frame
from playground.analysis.sweep_views import (
    Measures,
    all_measures,
    frame_in_words,
    grid_html,
    in_words,
    measures_for_people,
    sweep_chart,
    sweep_order,
    sweep_param,
    sweep_table,
    sweep_table_for_people,
    value_label,
)
from playground.analysis.timing import tokens_over_time_figure
from playground.analysis.tree import tree_figure
from playground.analysis.uncertainty import agreement_figure, uncertainty_figure
from playground.request import SETTINGS
from playground.run import Run

STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;max-width:1400px;color:#111827}
h1{font-size:1.5em} h2{margin-top:2em;border-bottom:1px solid #d1d5db}
table{border-collapse:collapse;font-size:90%;display:block;max-width:100%;overflow-x:auto}
td,th{border:1px solid #e5e7eb;padding:3px 6px;text-align:left}
pre{white-space:pre-wrap;background:#f9fafb;padding:8px;border:1px solid #e5e7eb}
.columns{display:flex;flex-wrap:wrap;gap:12px} .column{flex:1 1 300px;min-width:0}
.column pre{max-height:24em;overflow:auto}
.token-diff .tok{display:inline-block}
"""
REQUEST_KEYS = (*SETTINGS, "request_id", "num_prompt_tokens")
MISSING = "—"  # what every table of a report writes for a value that is not there
HOW_MANY = "How many samples do you need?"  # the README's section, and the report's


def cell(value) -> object:
    """A table cell as a report writes it: ``MISSING`` for a missing value (None, NaN, pandas' NA
    or NaT, a blank text), yes or no for a truth value (not Python's True), a float with three
    decimals, anything else as it is."""
    if (word := truth_word(value)) is not None:
        return word
    if isinstance(value, str):
        return value if value.strip() else MISSING
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return MISSING
    if pd.api.types.is_float(value):  # numpy's floats too
        return f"{value:.3f}"
    return value


class Page:
    """Sections of HTML and plotly figures, written out as one page with plotly.js inlined once."""

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []
        self.figures = 0

    def heading(self, text: str, level: int = 2) -> None:
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def text(self, text: str) -> None:
        self.parts.append(f"<p>{html.escape(text)}</p>")

    def raw(self, markup: str) -> None:
        """Markup built by the analysis (it escapes what it quotes)."""
        self.parts.append(markup)

    def table(self, frame: pd.DataFrame) -> None:
        """The one writer of a report's tables: headed in words (``frame_in_words``), each cell by
        ``cell`` (one rule for missing values and numbers in every table), escaped."""
        shown = frame_in_words(frame.astype(object).map(cell))
        self.parts.append(shown.to_html(index=False, escape=True, border=0))

    def figure(self, fig: go.Figure) -> None:
        self.figures += 1
        height = fig.layout.height or 450
        self.parts.append(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"figure-{self.figures}",
                                      default_height=f"{height}px", config={"displaylogo": False}))

    def render(self) -> str:
        return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(self.title)}"
                f"</title><style>{STYLE}</style>\n<script type='text/javascript'>{get_plotlyjs()}</script>\n"
                f"</head><body>\n<h1>{html.escape(self.title)}</h1>\n"
                f"<p><small>Written {time.strftime('%Y-%m-%d %H:%M')} by the vLLM parallel-sampling playground. "
                "Charts are interactive (hover, zoom); the page needs no network.</small></p>\n"
                + "\n".join(self.parts) + "\n</body></html>\n")


def _model_name(model) -> str:
    """A model as a report for other readers names it: a folder on this machine by its own name
    (the bundle keeps the whole path), a hub id as it is."""
    text = str(model)
    return model_name(text) if text.startswith(("/", "~", "./")) else text


def _request_table(run: Run) -> pd.DataFrame:
    shown = lambda value: value if isinstance(value, bool) else str(value)  # noqa: E731 (``cell`` says yes/no)
    rows = [{"setting": k, "value": "none" if run.request[k] is None else shown(run.request[k])}
            for k in REQUEST_KEYS if k in run.request]
    rows += [{"setting": k, "value": _model_name(run.engine[k]) if k == "model" else str(run.engine[k])}
             for k in ("model", "vllm_version", "device") if k in run.engine]
    return pd.DataFrame(rows, columns=["setting", "value"])


def _columns(run: Run) -> str:
    cells = []
    for s in run.samples:
        head = f"#{s.index} · seed {s.seed} · {len(s.token_ids)} tokens · {s.finish_reason or run.status}"
        cells.append(f"<div class='column' id='sample-{s.index}'><b>{html.escape(head)}</b>"
                     f"<pre>{html.escape(s.text)}</pre></div>")
    return f"<div class='columns'>{''.join(cells)}</div>"


def _diff(run: Run, reference: int = 0) -> str:
    parts = [(f"<p>{shared_prefix_sentence(run)} Each sample token by token "
              f"against sample {reference}: {diff_legend()} marked, · a space, ↵ a newline.</p>")]
    return "\n".join(parts + diff_rows(run, reference))


def _run_sections(page: Page, run: Run, measures: Measures | None, charts: bool = True,
                  extractor: Extractor | str | None = None) -> None:
    """A run's request, samples, diff, tree and graph, its answers (read by ``extractor``) and
    figures; ``charts``: the figures' charts too (a report of many runs leaves them out: they
    would make it tens of megabytes)."""
    page.heading("The request", 3)
    if note := origin_note(run):
        page.text(note)
    if branch := branch_label(run):  # its samples continue a parent's sample: say which, and the words
        lead = continued_text(run)
        page.text(f"A branch: {branch}. Each sample continues the prompt below"
                  + (f" and then “{lead}” (the parent's words up to the point, and the forced token), which "
                     "its answers are read with." if lead else "."))
    page.raw(f"<pre>{html.escape(run.request.get('rendered_prompt') or run.request.get('prompt', ''))}</pre>")
    page.table(_request_table(run))
    page.table(run_row(run).drop(columns=["cached_prompt_tokens"]))
    page.heading("The samples", 3)
    page.raw(_columns(run))
    if not run.samples:
        return
    page.heading("Diff", 3)
    page.raw(_diff(run))
    page.figure(marked(tree_figure(run), run))
    _graph(page, run)
    _answers(page, run, extractor)
    _how_many(page, run, extractor, charts)
    page.heading("Figures", 3)
    page.table(_measures_table(measures_for_people(all_measures(run, measures), run.n)))
    if charts:
        for fig in (pairwise_heatmap(run), uncertainty_figure(run), agreement_figure(run),
                    tokens_over_time_figure(run)):
            page.figure(marked(fig, run))


def _graph(page: Page, run: Run) -> None:
    """Where the samples part and meet again: the sample graph, with its sentence."""
    graph = sample_graph(run)
    page.heading("Sample graph", 3)
    page.text(graph_sentence(graph).replace("**", ""))
    page.figure(marked(graph_figure(graph, width=WIDE), run))  # a report is as wide as the Graph tab


def _answers(page: Page, run: Run, extractor: Extractor | str | None) -> None:
    """The samples' answers grouped as the Set tab groups them, read by ``extractor`` (the Set tab's
    when the page writes the report, ``--answer`` for ``analyze``; None: the whole text)."""
    answers = group_answers(run, extractor)
    page.heading(f"Answer groups ({answers.extractor})", 3)
    if note := cut_short_note(run):
        page.text(f"⚠️ {note}")
    page.figure(marked(answer_groups_figure(answers), run))
    page.table(groups_frame(answers))


def _how_many(page: Page, run: Run, extractor: Extractor | str | None, charts: bool) -> None:
    """With the run's reference answer, what the Set tab shows of how many samples the prompt
    needs: where the majority settled and pass@1 and pass@n in a sentence, agreement@k, pass@k and
    maj@k against k (the chart with ``charts``; a table at a few k always), and the uncertainty of
    the set. Without a reference, nothing: pass@k and maj@k need one."""
    reference = run.request.get("reference")
    if reference is None or not str(reference).strip():
        return
    how = how_many_samples(run, extractor, str(reference))
    c = how.convergence
    page.heading(f"{HOW_MANY} ({c.extractor}, against the reference “{c.reference}”)", 3)
    settled = settled_sentence(c.settled, run.n, c.reference)
    said = f"{settled[0].upper()}{settled[1:]}."
    if c.pass_at_k is not None:
        said += f" pass@1 {c.pass_at_k.at(1):.3f}, pass@{c.n} {c.pass_at_k.at(c.n):.3f}."
    how_read = ("exact" if c.exact else f"estimated from {c.draws} random subsets per k, "
                "the 95% band's ends beside each estimate")
    page.text(f"{said} Below, what k of the {c.n} samples drawn at random would have given ({how_read}).")
    if charts:
        page.figure(marked(convergence_figure(c), run))
    page.table(curves_frame(c))
    page.heading("Uncertainty of the set", 4)
    page.table(confidence_table(how.confidence, run.engine))


def curves_frame(c: Convergence) -> pd.DataFrame:
    """agreement@k, pass@k and maj@k at k = 1, 2, 4, … and n (and where the majority settled), a
    row each; an estimated value with its 95% band ("0.412 (0.398–0.426)")."""
    ks = sorted({2 ** i for i in range(int(math.log2(c.n)) + 1)} | {c.n} | ({c.settled.at} - {None})) if c.n else []
    rows = []
    for k in ks:
        row: dict = {"k": k}
        for name, curve in c.curves().items():
            band = "" if curve.exact[k - 1] else f" ({curve.low[k - 1]:.3f}–{curve.high[k - 1]:.3f})"
            row[CURVE_LABELS[name]] = f"{curve.at(k):.3f}{band}"
        rows.append(row)
    return pd.DataFrame(rows, columns=["k", *(CURVE_LABELS[name] for name in c.curves())])


def _measures_table(values: dict) -> pd.DataFrame:
    return pd.DataFrame([{"figure": in_words(k), "value": v} for k, v in values.items()], columns=["figure", "value"])


def run_report(run: Run, measures: Measures | None = None, extractor: Extractor | str | None = None) -> str:
    """One run: the request, the columns, the diff, the divergence tree, the sample graph, the
    answer groups (read by ``extractor``) and the charts. ``measures``: extra per-run measures
    (e.g. the set measures) for the measures table."""
    page = Page(f"Run {run_label(run)}: n={run.n}, {run.request.get('mode')}, seed {run.request.get('seed')}")
    _run_sections(page, run, measures, extractor=extractor)
    return page.render()


def comparison_report(a: Run, b: Run, measures: Measures | None = None, extractor: Extractor | str | None = None,
                      by: PairBy = "index") -> str:
    """Two runs: what differs in their settings, the samples of A against those of B (sample i
    against sample i, or ``by`` seed the samples that share one: ``pair_frame``) with what their
    seeds make of the pairs (``seed_statement``, as the Compare tab says it), their measures side
    by side, and each run's own columns, tree, answers (read by ``extractor``) and figures."""
    page = Page(f"Run {run_label(a)} (A) and run {run_label(b)} (B) side by side")
    page.heading("Settings that differ")
    diff = settings_diff(a, b)
    if diff.empty:
        page.text("The two runs asked for the same settings.")
    else:
        page.table(diff)
    page.heading(PAIRS_HEADING[by])
    shown_a, shown_b, lined_up = aligned(a, b)  # a branch behind the tokens it was sent after
    pairs = pair_frame(shown_a, shown_b, by)
    for note in (lined_up, seed_statement(a, b, by), conditions_statement(a, b)):
        if note:
            page.text(note)
    page.table(pairs)
    page.raw(comparison_html(shown_a, shown_b, frame=pairs, by=by))
    page.heading("Figures")
    page.table(measures_side_by_side(a, b, measures))
    if note := probabilities_note(a, b):
        page.text(note)
    for name, run in (("A", a), ("B", b)):
        page.heading(f"Run {name}: {run_label(run)}")
        _run_sections(page, run, measures, charts=False, extractor=extractor)
    return page.render()


def sweep_report(runs: list[Run], measures: Measures | None = None, table: pd.DataFrame | None = None) -> str:
    """A sweep: the chart of the measures against the value, the table, and the grid. The table
    (``table``: ``sweep_table(runs, measures)`` when the caller has it) is computed once for both."""
    runs = sweep_order(runs)
    table = sweep_table(runs, measures) if table is None else table
    param = sweep_param(runs) or "setting"
    page = Page(f"Sweep of {param}: {len(runs)} runs")
    if runs:
        page.heading("The request", 3)
        page.raw(f"<pre>{html.escape(runs[0].request.get('prompt', ''))}</pre>")
        settings = _request_table(runs[0])
        page.table(settings[~settings["setting"].isin([param, "request_id"])])
    page.heading("Figures against the value")
    page.figure(sweep_chart(runs, table=table))
    page.table(sweep_table_for_people(table))
    if note := probabilities_note(*runs):
        page.text(note)
    page.heading("The grid")
    page.text("Rows are the values in the order they ran, columns the sample indices (sample i keeps its seed in "
              "every row unless the seed is swept); each cell says where it first differs from the cell above.")
    page.raw(grid_html(runs))
    for run in runs:
        page.heading(value_label(run, param))
        page.raw(_columns(run))
        if run.samples:
            page.figure(tree_figure(run))
            _graph(page, run)
    return page.render()


def runs_report(runs: list[Run], measures: Measures | None = None, extractor: Extractor | str | None = None) -> str:
    """Any number of runs (a batch): a summary row each, then each run's request, columns, diff,
    tree, graph, answers (read by ``extractor``) and figures, without the per-run charts."""
    page = Page(f"{len(runs)} runs")
    page.table(pd.concat([run_row(r) for r in runs], ignore_index=True).drop(columns=["cached_prompt_tokens"]))
    for run in runs:
        page.heading(f"Run {run_label(run)}")
        _run_sections(page, run, measures, charts=False, extractor=extractor)
    return page.render()


def report_for(runs: list[Run], measures: Measures | None = None, extractor: Extractor | str | None = None) -> str:
    """The report the runs call for: one run; a sweep (every run carries the same sweep's mark);
    two runs of one prompt side by side (two runs of different prompts have no pairs to compare);
    or any number of runs one after another (answers read by ``extractor`` in one run or many)."""
    if not runs:
        raise ValueError("there is no run to report")
    if len(runs) > 1 and sweep_param(runs) is not None:
        return sweep_report(runs, measures)
    if len(runs) == 1:
        return run_report(runs[0], measures, extractor)
    if len(runs) == 2 and runs[0].request.get("prompt") == runs[1].request.get("prompt"):
        return comparison_report(runs[0], runs[1], measures, extractor)
    return runs_report(runs, measures, extractor)
