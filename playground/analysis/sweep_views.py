"""A sweep read back: one run per value of one setting, same prompt, same seeds.

Rows are the values in the order they ran. Because sample i has the same seed in every row (unless
the sweep varies the seed), a column follows one seed as the setting changes, and the first token
where a cell parts from the cell above is the first token the setting changed.

The measures of a run are computed by ``run_measures`` plus any ``measures`` callable a caller
passes (the set measures: distinct-n, similarity, Vendi, majority share); a measure ``x`` with
``x_min`` and ``x_max`` beside it is drawn with that range across samples.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.analysis.answers import Answers, Extractor, group_answers, parse_extractor
from playground.analysis.convergence import pass_at_k, read_reference, settled_at, settled_cell
from playground.analysis.diff import first_divergence, identical_groups, identical_label
from playground.analysis.display import message_figure, token_at, truncate, truth_word
from playground.analysis.diversity import set_diversity
from playground.run import Run, Sample

Measures = Callable[[Run], dict]
FIRST_WORDS = 8
# Per-run measures drawn by default, with their labels; extra measures are drawn after them.
CHARTED = {"mean_tokens": "mean length (tokens)", "mean_prob": "mean p(sampled token), per sample",
           "distinct_samples": "distinct samples", "distinct_2": "distinct-2",
           "effective_samples": "effective number of distinct samples (Vendi)",
           "similarity": "mean pairwise similarity", "vote_share": "vote share of the most common answer"}


# The words a page or report's table heads a record's field or measure with (the frames keep the
# names, which exports, tests and scripts read): one vocabulary, so a column is called alike in
# every tab. A name not here is said with spaces for its underscores.
WORDS = {
    "request_id": "run", "token_id": "token id", "first_divergence": "parts at token",
    "pair_similarity": "similarity of the pair",
    **{f"{what}_{side}": f"{side.upper()}'s {said}" for side in "ab"
       for what, said in (("sample", "sample"), ("seed", "seed"), ("tokens", "tokens"), ("token", "token there"))},
    "mean_tokens": "mean length (tokens)", "mean_tokens_min": "shortest (tokens)",
    "mean_tokens_max": "longest (tokens)", "mean_prob": "mean p(sampled token), per sample",
    "mean_prob_min": "lowest sample's mean p", "mean_prob_max": "highest sample's mean p",
    "distinct_2": "distinct-2", "effective_samples": "effective samples (Vendi)",
    "similarity": "mean pairwise similarity", "similarity_min": "least similar pair",
    "similarity_max": "most similar pair", "majority": "majority answer", "majority_tied": "answers tied",
    "settled_at": "settled at sample", "pass_at_1": "pass@1", "pass_at_n": "pass@n",
    # within one run, where a comparison's headline counts samples identical across two
    "any_identical": "two samples of the run identical", "identical_samples": "identical samples within the run",
}


SHARES = {"vote_share", "pass_at_1", "pass_at_n", "distinct_2", "similarity", "mean_prob"}  # between 0 and 1


def in_words(name: str) -> str:
    """A field or measure's name as a table heads it (``WORDS``)."""
    return WORDS.get(name, name.replace("_", " "))


def frame_in_words(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its columns headed in words, and its truths said yes or no (a report's cells
    say them so, ``report.cell``), for a page or a report (not an export, which keeps JSON's)."""
    said = frame.rename(columns=in_words)
    for column in said.columns:
        values = said[column]
        words = values.map(truth_word) if values.dtype in (bool, object) else None
        if words is not None and words.notna().any():
            said[column] = words.where(words.notna(), values)
    return said


def sweep_info(run: Run) -> dict:
    """What the run's bundle says of its sweep, or {} for a run that was not part of one."""
    info = run.request.get("sweep")
    return info if isinstance(info, dict) else {}


def sweep_order(runs: list[Run]) -> list[Run]:
    """Runs in the order their sweep ran them (runs without a position keep theirs, last)."""
    return sorted(runs, key=lambda r: (sweep_info(r).get("position") is None, sweep_info(r).get("position", 0)))


def sweep_param(runs: list[Run]) -> str | None:
    params = {sweep_info(r).get("param") for r in runs}
    return params.pop() if len(params) == 1 else None


def value_label(run: Run, param: str | None = None) -> str:
    """The row's name: the swept value, or else the run's id."""
    info = sweep_info(run)
    if info and (param is None or info.get("param") == param):
        return f"{info.get('param')}={info.get('value')}"
    return str(run.request.get("request_id", "run"))


def sample_mean_prob(sample: Sample) -> float | None:
    """The mean probability of the tokens this sample drew, when logprobs were recorded: as vLLM
    reports it (by default the model's distribution, before temperature and the other settings)."""
    probs = [math.exp(lp.logprob) for lp in sample.logprobs or [] if lp.logprob is not None]
    return sum(probs) / len(probs) if probs else None


def run_measures(run: Run) -> dict:
    """Measures of one run that need nothing but the record, with min/max across samples."""
    lengths = [len(s.token_ids) for s in run.samples]
    probs = [p for s in run.samples if (p := sample_mean_prob(s)) is not None]
    return {
        "mean_tokens": sum(lengths) / len(lengths) if lengths else None,
        "mean_tokens_min": min(lengths, default=None), "mean_tokens_max": max(lengths, default=None),
        "mean_prob": sum(probs) / len(probs) if probs else None,
        "mean_prob_min": min(probs, default=None), "mean_prob_max": max(probs, default=None),
        "distinct_samples": len({tuple(s.token_ids) for s in run.samples}),
        "identical_samples": identical_label(identical_groups(run)),
    }


def diversity_measures(run: Run) -> dict:
    """The set's diversity a sweep charts: distinct-2, the effective number of distinct samples
    (the Vendi score), and the mean pairwise similarity with its min and max over the pairs."""
    d = set_diversity(run).whole
    return {"distinct_2": d.distinct_2, "effective_samples": d.vendi, "similarity": d.similarity_mean,
            "similarity_min": d.similarity_min, "similarity_max": d.similarity_max}


def set_measures_hook(extractor: Extractor | str | None = None) -> Measures:
    """The set measures a sweep charts beside ``run_measures``: ``diversity_measures``, and, when an
    extractor is chosen, the majority answer's vote share (added by ``with_answers`` alone, so no
    run's answers are read twice; a bad extractor raises InvalidExtractor here)."""
    return with_answers(diversity_measures, extractor)


def answer_row(answers: Answers, reference: str | None = None, chars: int | None = None) -> dict:
    """The majority answer and its vote share (self-consistency), as a sweep's table shows them:

    - ``majority``: the majority answer (cut to ``chars``), or, when no answer has more votes than
      every other, why there is none ("no majority: all 8 answers differ", ``Answers.majority_text``);
    - ``majority_tied``: two or more answers share the most votes (so there is no majority);
    - ``vote_share``: the most common answer's share of the n samples, in a tie each tied answer's
      (a number either way, for the chart);
    - ``settled_at``: after how many samples (in index order) the majority was settled, None when
      not within the n (a number or None, for the chart; ``sweep_table_for_people`` says it);
    - with a ``reference`` (already read by the extractor), pass@1 and pass@n."""
    ordered = [answers.answers[i] for i in sorted(answers.answers)]
    row = {"majority": answers.majority_text(chars), "majority_tied": answers.tied,
           "vote_share": answers.vote_share, "settled_at": settled_at(ordered).at}
    if reference is not None:
        passing = pass_at_k(ordered, reference)
        row |= {"pass_at_1": passing.at(1), "pass_at_n": passing.at(len(ordered))}
    return row


def with_answers(measures: Measures | None, extractor: Extractor | str | None,
                 chars: int | None = None) -> Measures | None:
    """``measures`` plus the majority answer, its vote share and when it settled, read by
    ``extractor`` (and pass@1 and pass@n when a run carries its ``reference``), as ``answer_row``
    gives them (``chars``: cut a majority answer to this many characters); nothing more when
    ``extractor`` is None. A bad extractor raises InvalidExtractor here, before any run is read."""
    if extractor is None:
        return measures
    extractor = extractor if isinstance(extractor, Extractor) else parse_extractor(extractor)

    def with_majority(run: Run) -> dict:
        reference = read_reference(run.request.get("reference"), extractor)
        return {**(measures(run) if measures else {}),
                **answer_row(group_answers(run, extractor), reference, chars)}

    return with_majority


def all_measures(run: Run, measures: Measures | None = None) -> dict:
    """``run_measures`` and the caller's extra measures (which win on a shared name)."""
    return {**run_measures(run), **(measures(run) if measures else {})}


def sweep_table(runs: list[Run], measures: Measures | None = None) -> pd.DataFrame:
    """One row per run, in sweep order: the value, the run, and its measures."""
    runs = sweep_order(runs)
    rows = []
    for run in runs:
        info = sweep_info(run)
        seeds = [s.seed for s in run.samples]
        rows.append({
            "position": info.get("position"), "param": info.get("param"), "value": info.get("value"),
            "request_id": run.request.get("request_id"), "status": run.status, "n": run.n,
            "seeds": _seed_range(seeds), "tokens": sum(len(s.token_ids) for s in run.samples),
            **all_measures(run, measures),
        })
    return pd.DataFrame(rows)


def measures_for_people(values: dict, n: int) -> dict:
    """One run's measures (``all_measures``) as people read them: ``settled_at`` says "not within
    n" where the majority did not settle (``settled_cell``); the rest as they are."""
    if "settled_at" not in values:
        return values
    return {**values, "settled_at": settled_cell(values["settled_at"], n)}


def sweep_table_for_people(table: pd.DataFrame) -> pd.DataFrame:
    """A sweep table (``sweep_table``) as people read it: ``settled_at`` says "not within n" (the
    row's n) where the majority did not settle, not a blank that reads as missing data. The table
    given is left as it is; chart that one (it keeps numbers only)."""
    if "settled_at" not in table.columns or table.empty:
        return table
    shown = table.copy()
    shown["settled_at"] = pd.Series([settled_cell(at, n) for at, n in zip(table["settled_at"], table["n"])],
                                    index=table.index, dtype=object)
    return shown


def _seed_range(seeds: list[int | None]) -> str:
    if not seeds or seeds[0] is None:
        return "unseeded"
    return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}…{seeds[-1]}"


def charted_measures(table: pd.DataFrame) -> list[str]:
    """The numeric measures of a sweep table worth a panel: ours, then any extra the caller added."""
    skip = {"position", "value", "n", "tokens"}
    base = [c for c in CHARTED if c in table.columns]
    extra = [c for c in table.columns if c not in skip and c not in base and not c.endswith(("_min", "_max"))
             and pd.api.types.is_numeric_dtype(table[c]) and not pd.api.types.is_bool_dtype(table[c])
             and table[c].notna().any()]
    return base + extra


# A setting whose "off" (0 or -1) is the far end of its scale, not its start: top_k off keeps every token.
OFF_AT_THE_END = {"top_k"}


def sweep_chart(runs: list[Run], measures: Measures | None = None, names: list[str] | None = None,
                table: pd.DataFrame | None = None) -> go.Figure:
    """One panel per measure (``names``: default every numeric one) against the swept value;
    whiskers are the min and max across samples. Seeds and run ids are categories (their order
    means nothing); setting values are numbers, drawn in order along their scale (a top_k "off"
    last). ``table``: ``sweep_table(runs, measures)`` when the
    caller has it (the set measures cost seconds per run; ``measures`` is then unused).
    """
    table = sweep_table(runs, measures) if table is None else table
    if not table.empty:
        names = [n for n in names if n in table.columns] if names is not None else charted_measures(table)
    else:
        names = []
    if not names:
        return message_figure("Sweep", "no finished run yet")
    param = sweep_param(runs)
    numeric = param not in (None, "seed") and table["value"].map(lambda v: isinstance(v, (int, float))).all()
    if numeric:  # along the scale, whatever order the values were swept in
        off = table["value"] <= 0 if param in OFF_AT_THE_END else pd.Series(False, index=table.index)
        table = table.assign(_off=off).sort_values(["_off", "value"], kind="stable")
        x = table["value"]
        if off.any():  # "off" is no small value: a category after the largest, named so
            x, numeric = [f"{v} (off)" if o else str(v) for v, o in zip(table["value"], table["_off"])], False
    else:
        x = [value_label(r, param) for r in sweep_order(runs)]
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[CHARTED.get(name, in_words(name)) for name in names])
    for row, name in enumerate(names, 1):
        y = table[name].astype(float)
        error = None
        if f"{name}_min" in table and f"{name}_max" in table:
            error = {"type": "data", "symmetric": False, "array": (table[f"{name}_max"].astype(float) - y).tolist(),
                     "arrayminus": (y - table[f"{name}_min"].astype(float)).tolist()}
        fig.add_trace(go.Scatter(x=list(x), y=y, mode="lines+markers", name=name, error_y=error, showlegend=False,
                                 hovertemplate=f"%{{x}}<br>{in_words(name)} %{{y:.3f}}<extra></extra>"), row=row, col=1)
        # every measure is 0 or more, and a share at most 1: an axis past them would draw values that cannot be
        fig.update_yaxes(row=row, col=1, **({"range": [0, 1.05]} if name in SHARES else {"rangemode": "nonnegative"}))
    if not numeric:
        fig.update_xaxes(type="category")
    # every panel says its values: a chart of nine panels is read panel by panel, not from its foot
    fig.update_xaxes(showticklabels=True)
    fig.update_xaxes(title=param or "run", row=len(names), col=1)
    fig.update_layout(title=f"How {param or 'the setting'} changes the sample set (whiskers: min-max across "
                            "samples)", height=max(360, 90 + 220 * len(names)))
    return fig


@dataclass
class GridCell:
    """One sample in the grid: its first words, and where it first parts from the cell above
    (None: identical to it, or the top row). ``above``/``here`` are the tokens at that position."""

    index: int
    seed: int | None
    words: str
    diverges_at: int | None = None
    above: str | None = None
    here: str | None = None
    no_above: bool = False  # the top row, or the run above had fewer samples

    def note(self) -> str:
        if self.no_above:
            return ""
        if self.diverges_at is None:
            return "= above"
        return f"≠ above at token {self.diverges_at}: {self.above} → {self.here}"


def first_words(sample: Sample, words: int = FIRST_WORDS) -> str:
    parts = sample.text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def sweep_grid(runs: list[Run], words: int = FIRST_WORDS) -> list[tuple[str, list[GridCell]]]:
    """Rows (label, cells) in sweep order; cell i is sample i, compared with sample i above."""
    runs = sweep_order(runs)
    param = sweep_param(runs)
    rows = []
    for k, run in enumerate(runs):
        above = {s.index: s for s in runs[k - 1].samples} if k else {}
        cells = []
        for s in run.samples:
            cell = GridCell(s.index, s.seed, first_words(s, words), no_above=s.index not in above)
            if s.index in above:
                cell.diverges_at = first_divergence(above[s.index].token_ids, s.token_ids)
                if cell.diverges_at is not None:
                    cell.above = token_at(above[s.index], cell.diverges_at, quoted=True)
                    cell.here = token_at(s, cell.diverges_at, quoted=True)
            cells.append(cell)
        rows.append((value_label(run, param), cells))
    return rows


def grid_html(runs: list[Run], words: int = FIRST_WORDS) -> str:
    """The grid as an HTML table: a cell that parts from the one above says where and how, a cell
    identical to it is greyed."""
    grid = sweep_grid(runs, words)
    if not grid:
        return "<p class='sweep-grid-empty'>No run yet.</p>"
    width = max(len(cells) for _, cells in grid)
    seeds: dict[int, set] = {}
    for _, cells in grid:
        for c in cells:
            seeds.setdefault(c.index, set()).add(c.seed)
    same_seeds = all(len(s) == 1 for s in seeds.values())  # else (a seed sweep) each cell names its seed
    head = "".join(f"<th>#{i}" + (f"<br><small>seed {next(iter(seeds[i]))}</small>" if same_seeds and i in seeds
                                  else "") + "</th>" for i in range(width))
    body = []
    for label, cells in grid:
        tds = []
        for cell in cells:
            style = "color:#6b7280" if cell.diverges_at is None and not cell.no_above else ""
            seed = "" if same_seeds else f"<small>seed {cell.seed}</small><br>"
            note = (f"<div class='sweep-divergence' style='font-size:85%;color:#92400e'>{html.escape(cell.note())}"
                    "</div>") if cell.note() else ""
            tds.append(f"<td class='sweep-cell' style='vertical-align:top;padding:4px;border:1px solid #e5e7eb;"
                       f"{style}'>{seed}{html.escape(truncate(cell.words, 200))}{note}</td>")
        body.append(f"<tr><th style='text-align:left'>{html.escape(label)}</th>{''.join(tds)}</tr>")
    return ("<table class='sweep-grid' style='border-collapse:collapse;font-size:90%'>"
            f"<thead><tr><th>run</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
