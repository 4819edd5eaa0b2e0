"""What the n samples say together: the set measures of one run, as one record, a flat row (the
batch summary's columns), a per-sample table (the CSV export) and a JSON-ready dict.

The measures themselves are defined in diversity.py (distinct-n, pairwise similarity, Vendi),
answers.py (answer groups, majority vote, answer entropy) and meaning.py (clusters by meaning).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from playground.analysis.answers import Answers, Extractor, group_answers
from playground.analysis.convergence import read_reference
from playground.analysis.display import height_for, message_figure, percent, truncate
from playground.analysis.diversity import Diversity, SetDiversity, set_diversity
from playground.analysis.meaning import DEFAULT_SIMILARITY, MeaningClusters, meaning_clusters
from playground.run import Run

_DIVERSITY = ["distinct_1", "distinct_2", "distinct_3", "similarity_mean", "similarity_std", "vendi"]
SET_COLUMNS = (["extractor", "answered", "groups", "majority", "majority_size", "vote_share", "tied",
                "tied_answers", "answer_entropy_bits", "unanswered", "common_prefix"] + _DIVERSITY
               + [f"{name}_after" for name in _DIVERSITY] + ["meaning_clusters", "semantic_entropy_bits"])
GROUP_COLUMNS = ["group", "answer", "size", "share", "samples", "seeds", "example"]
NO_ANSWER = "(no answer)"
MAX_BARS = 20  # answer groups drawn one bar each; the rest share a bar
LABEL_CHARS = 40  # of an answer on the chart's axis; the hover has it whole
SAMPLE_COLUMNS = ["sample", "seed", "tokens", "answer", "extractor", "group", "group_size", "meaning_cluster"]


@dataclass
class SetMeasures:
    diversity: SetDiversity
    answers: Answers
    meaning: MeaningClusters | None = None  # only with an embedding model

    def row(self) -> dict:
        """The measures flat, in SET_COLUMNS order (``_after``: after the first divergence point),
        as data (JSON's ``figures``), not words:

        - ``majority``: the answer with more votes than every other; None when there is no majority
          (a tie at the top, all answers distinct included, or no answer at all);
        - ``majority_size``: the votes of the most common answer, in a tie each tied answer's (0:
          no answer); ``vote_share`` is it over n;
        - ``tied``: two or more answers share the most votes; ``tied_answers``: how many answers
          have ``majority_size`` votes (1: a majority, 0: no answer).

        ``analysis.majority_text(row["majority"], row["majority_size"], row["tied_answers"])``
        says the majority in words, for a table people read."""
        a, d = self.answers, self.diversity
        winner = a.winner
        row = {
            "extractor": a.extractor, "answered": a.answered, "groups": len(a.groups),
            "majority": winner.answer if winner else None, "majority_size": a.top_votes,
            "vote_share": a.vote_share, "tied": a.tied, "tied_answers": len(a.leaders),
            "answer_entropy_bits": a.entropy,
            "unanswered": list(a.unanswered), "common_prefix": d.common_prefix,
        }
        row |= _diversity_values(d.whole) | {f"{k}_after": v for k, v in _diversity_values(d.after_divergence).items()}
        row["meaning_clusters"] = len(self.meaning.clusters) if self.meaning else None
        row["semantic_entropy_bits"] = self.meaning.entropy if self.meaning else None
        return row

    def to_dict(self) -> dict:
        """Everything, for JSON: the flat measures, every answer group and every sample's answer."""
        a = self.answers
        return {
            "figures": self.row(),
            "diversity": self.diversity.to_dict(),
            "groups": [{"answer": g.answer, "size": g.size, "samples": g.indices, "seeds": g.seeds,
                        "example": g.example} for g in a.groups],
            "answers": [{"sample": index, "answer": answer, "group": _group_number(a, index)}
                        for index, answer in a.answers.items()],
            "meaning": self.meaning.to_dict() if self.meaning else None,
        }


def set_measures(run: Run, extractor: Extractor | str | None = None, embeddings: np.ndarray | None = None,
                 model: str = "", threshold: float = DEFAULT_SIMILARITY) -> SetMeasures:
    """The run's set measures. ``embeddings``: one row per sample (in ``run.samples`` order) from the
    embedding model ``model``, to group by meaning as well; InvalidExtractor for a bad extractor."""
    answers = group_answers(run, extractor)  # first: a pattern that cannot work fails before the costly part
    meaning = None
    if embeddings is not None:
        meaning = meaning_clusters(embeddings, [s.index for s in run.samples], model, threshold)
    return SetMeasures(set_diversity(run), answers, meaning)


def samples_frame(run: Run, measures: SetMeasures, reference: str | None = None) -> pd.DataFrame:
    """One row per sample: its answer (and the extractor that read it, so the file says how), its
    group (1 = the most common answer; empty: no answer) and the group's size, its cluster by
    meaning when there is one, and with a ``reference`` whether the answer is it (read the same
    way, as pass@k counts). For the CSV export."""
    a = measures.answers
    clusters = dict(zip(measures.meaning.indices, measures.meaning.labels, strict=True)) if measures.meaning else {}
    right = read_reference(reference, a.extractor)
    rows = []
    for s in run.samples:
        number = _group_number(a, s.index)
        rows.append({"sample": s.index, "seed": s.seed, "tokens": len(s.token_ids), "answer": a.answers[s.index],
                     "extractor": a.extractor, "group": number,
                     "group_size": a.groups[number - 1].size if number else None,
                     "meaning_cluster": clusters[s.index] + 1 if s.index in clusters else None,
                     **({"reference": reference, "correct": a.answers[s.index] == right} if right is not None else {})})
    columns = SAMPLE_COLUMNS + (["reference", "correct"] if right is not None else [])
    return pd.DataFrame(rows, columns=columns).astype({"group": "Int64", "group_size": "Int64",
                                                       "meaning_cluster": "Int64"})


def measures_table(d: SetDiversity) -> pd.DataFrame:
    """The diversity measures for people: one row per measure, whole samples beside the text after
    the first divergence point (column "after token k", k the common prefix)."""
    names = {"distinct_1": "distinct-1", "distinct_2": "distinct-2", "distinct_3": "distinct-3",
             "similarity_mean": "mean pairwise similarity", "similarity_std": "similarity spread (std)",
             "similarity_min": "least similar pair", "similarity_max": "most similar pair",
             "vendi": "Vendi score (effective number of samples)"}
    whole, after = d.whole.to_dict(), d.after_divergence.to_dict()
    rows = [{"figure": label, "whole samples": _rounded(whole[key]),
             f"after token {d.common_prefix}": _rounded(after[key])}
            for key, label in names.items()]
    return pd.DataFrame(rows)


def group_label(number: int, answer: str) -> str:
    """An answer group as a chart names it: the answer (on one line, cut), then its group's number
    in words, "8 (group 2)", never "2. 8", which reads as the decimal 2.8 when answers are numbers."""
    return f"{_cut(answer, LABEL_CHARS)} (group {number})"


def groups_frame(answers: Answers, example_chars: int = 120) -> pd.DataFrame:
    """One row per answer group, largest first, then the samples with no answer (no group, a blank
    example, which a report writes as missing; their seeds listed like a group's)."""
    rows = [{"group": k, "answer": g.answer, "size": g.size, "share": round(g.size / answers.n, 3),
             "samples": _listed(g.indices), "seeds": _listed(g.seeds), "example": _cut(g.example, example_chars)}
            for k, g in enumerate(answers.groups, 1)]
    if answers.unanswered:
        rows.append({"group": None, "answer": NO_ANSWER, "size": len(answers.unanswered),
                     "share": round(len(answers.unanswered) / answers.n, 3), "samples": _listed(answers.unanswered),
                     "seeds": _listed(_unanswered_seeds(answers)), "example": ""})
    return pd.DataFrame(rows, columns=GROUP_COLUMNS).astype({"group": "Int64"})


def answer_groups_figure(answers: Answers) -> go.Figure:
    """A bar per answer group (the most common first, dark: the majority, or every answer tied
    for the most votes), the groups beyond ``MAX_BARS`` in one bar, and one for the samples with no
    answer. The title gives the majority's vote share, or says why there is no majority.

    Each bar's ``customdata`` is its samples' indices, comma-separated ("0,2,5"): a click on a
    bar (Plotly's ``plotly_click``, ``points[0].customdata``) tells which samples are in the group.
    """
    if not answers.n:
        return message_figure("Answer groups", "No samples.")
    top = answers.top_votes
    bars = [(group_label(k, g.answer), g.answer, g.indices, g.seeds,
             "#2563eb" if g.size == top else "#93c5fd") for k, g in enumerate(answers.groups[:MAX_BARS], 1)]
    rest = answers.groups[MAX_BARS:]
    if rest:
        indices = sorted(i for g in rest for i in g.indices)
        label = f"{len(rest)} more answers"
        bars.append((label, f"{label}, each given by {max(g.size for g in rest)} sample(s) or fewer", indices,
                     [None] * len(indices), "#bfdbfe"))
    if answers.unanswered:
        bars.append((NO_ANSWER, NO_ANSWER, answers.unanswered, _unanswered_seeds(answers), "#d1d5db"))
    hover = [f"{html.escape(answer)}<br>{len(indices)} of {answers.n} samples: {_listed(indices)}"
             + (f"<br>seeds {_listed(seeds)}" if any(x is not None for x in seeds) else "")
             for _, answer, indices, seeds, _ in bars]
    fig = go.Figure(go.Bar(
        x=[len(b[2]) for b in bars], y=[b[0] for b in bars], orientation="h", marker_color=[b[4] for b in bars],
        customdata=[",".join(map(str, b[2])) for b in bars], hovertext=hover,
        hoverinfo="text", text=[len(b[2]) for b in bars], textposition="auto",
    ))
    if answers.winner is not None:
        said = f"majority vote share {percent(answers.vote_share)}"
    elif answers.groups:  # a tie: the share is each tied answer's
        said = f"{answers.majority_text()} (vote share {percent(answers.vote_share)} each)"
    else:
        said = answers.majority_text()
    fig.update_layout(
        # two lines: a tie's sentence is long, and a title is cut at the figure's edge, never wrapped
        title=f"Answer groups ({_cut(answers.extractor, 30)})<br><sup>{html.escape(said)}</sup>",
        height=height_for(len(bars), per_row=34, minimum=260), xaxis_title="samples",
        yaxis={"autorange": "reversed", "automargin": True}, clickmode="event",
    )
    return fig


def _listed(values) -> str:
    return ", ".join("?" if v is None else str(v) for v in values)


def _unanswered_seeds(answers: Answers) -> list[int | None]:
    """The seeds of the samples with no answer ("?" each, listed, when the answers do not hold them)."""
    return answers.unanswered_seeds or [None] * len(answers.unanswered)


def _cut(text: str, chars: int) -> str:
    """On one line (labels and table cells), then cut like every other text."""
    return truncate(" ".join(text.split()), chars)


def _diversity_values(d: Diversity) -> dict:
    return {name: getattr(d, name) for name in _DIVERSITY}


def _group_number(answers: Answers, index: int) -> int | None:
    position = answers.group_of(index)
    return None if position is None else position + 1


def _rounded(value):
    return round(value, 3) if isinstance(value, float) else value
