"""How sure the model was at each token, and how much the n samples agree there.

vLLM returns only the top-k logprobs (plus the sampled token), so the entropy cannot be computed
exactly; what is computed is a lower bound, in bits, named so (``entropy_lb_bits``) wherever it
appears: the one entropy of a token in the playground (analysis/entropy.py). These are the
distributions as vLLM reports them (by default the raw model's, before temperature, top-p and
penalties).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.analysis.display import (
    alternative,
    drawn_samples,
    for_hover,
    message_figure,
    pieces,
    sample_color,
    visible,
)
from playground.analysis.entropy import entropies, per_position
from playground.run import Run, TokenLogprob

UNCERTAINTY_COLUMNS = ["sample", "position", "token_id", "token", "prob", "logprob", "rank",
                       "entropy_lb_bits", "topk_mass", "residual_mass", "alternatives"]
ENTROPY_NAME = "entropy lower bound from top-k (bits)"


def uncertainty_frame(run: Run) -> pd.DataFrame:
    """One row per sample x position: the sampled token's probability and the entropy bound.

    Samples without logprobs get rows with empty (NaN) values, so positions still line up.
    """
    rows = []
    for s in run.samples:
        texts = pieces(s)
        bits, masses, residuals = per_position(s.logprobs, len(s.token_ids))
        for pos, token_id in enumerate(s.token_ids):
            lp = s.logprobs[pos] if s.logprobs and pos < len(s.logprobs) else None
            row = {"sample": s.index, "position": pos, "token_id": token_id, "token": visible(texts[pos], False)}
            if lp is not None and lp.logprob is not None:
                row.update(prob=math.exp(lp.logprob), logprob=lp.logprob, rank=lp.rank, entropy_lb_bits=bits[pos],
                           topk_mass=masses[pos], residual_mass=residuals[pos], alternatives=_alternatives(lp))
            rows.append(row)
    return pd.DataFrame(rows, columns=UNCERTAINTY_COLUMNS)


def tokens_table(run: Run) -> pd.DataFrame:
    """The tokens export (``Run.tokens_frame``: a row per sample x token) with what the page shows
    of each token beside it: ``prob`` (exp of the logprob), the entropy bound in bits; and whether
    it is part of the sample's ``text`` (``in_text``: False for the stop string's token and the
    end-of-turn token, which vLLM leaves out of the text; empty where the pieces do not spell the
    text out), and each sample's ``finish_reason``."""
    frame = run.tokens_frame()
    frame.insert(frame.columns.get_loc("logprob") + 1, "prob", np.exp(frame["logprob"].astype(float)))
    frame["entropy_lb_bits"] = [bits for s in run.samples for bits in entropies(s.logprobs, len(s.token_ids))]
    frame["in_text"] = [inside for s in run.samples for inside in _in_text(s)]
    frame["finish_reason"] = [s.finish_reason for s in run.samples for _ in s.token_ids]
    return frame


def _in_text(sample) -> list[bool | None]:
    """Per token: whether its piece ends within the sample's text (None for each, where the pieces
    do not spell the text out: a record without token texts). A part of a character (an empty
    piece) is in the text when the token that completes its character is: a character the
    sample's end cut in two is not in its text."""
    pieces = sample.token_texts[:len(sample.token_ids)]
    if len(pieces) < len(sample.token_ids) or not "".join(pieces).startswith(sample.text):
        return [None] * len(sample.token_ids)
    ends = np.cumsum([len(piece) for piece in pieces])
    inside, carried = [False] * len(pieces), False
    for k in reversed(range(len(pieces))):  # a part takes the answer of the token that carries its character
        inside[k] = carried = carried if pieces[k] == "" else bool(ends[k] <= len(sample.text))
    return inside


def _alternatives(lp: TokenLogprob) -> str:
    return ", ".join(f"{visible(alternative(text, tid), False)} {math.exp(v):.3f}" for tid, v, text in lp.top)


def agreement_frame(run: Run) -> pd.DataFrame:
    """Per position: among the samples that reached it, the share holding the most common token.

    Positions are absolute: once samples diverge, the same position may hold tokens written in
    different contexts (the tree shows contexts). Agreement is 1.0 up to the common prefix.
    """
    length = max((len(s.token_ids) for s in run.samples), default=0)
    texts = [pieces(s) for s in run.samples]
    rows = []
    for pos in range(length):
        held = [(s.token_ids[pos], t[pos]) for s, t in zip(run.samples, texts) if len(s.token_ids) > pos]
        counts = Counter(token_id for token_id, _ in held)
        text = dict(reversed(held))  # token id -> its piece
        top_id, top_count = counts.most_common(1)[0]
        rows.append({
            "position": pos, "reached": len(held), "distinct": len(counts), "top_token_id": top_id,
            "top_token": visible(text[top_id], False), "top_count": top_count,
            "agreement": top_count / len(held),
            "tokens": ", ".join(f"{visible(text[t], False)} ×{c}" for t, c in counts.most_common()),
        })
    columns = ["position", "reached", "distinct", "top_token_id", "top_token", "top_count", "agreement", "tokens"]
    return pd.DataFrame(rows, columns=columns)


MEAN_FROM = 8  # samples past which their lines are a tangle: the mean is drawn over them, they fade


def uncertainty_figure(run: Run) -> go.Figure:
    """Two panels, one line per sample: the sampled token's probability, and the entropy lower
    bound from the top-k. The hover shows the token and the top-k alternatives."""
    frame = uncertainty_frame(run).dropna(subset=["prob"])
    if frame.empty:
        return message_figure("Per-token uncertainty", "no logprobs recorded: ask for logprobs (e.g. 5) to see this")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("p(sampled token)", ENTROPY_NAME))
    drawn, note = drawn_samples(run)
    averaged = bool(note) or run.n > MEAN_FROM
    if averaged:  # the mean over every sample, over faint lines of each (of the first ones, past the drawn)
        mean = frame.groupby("position", sort=True)[["prob", "entropy_lb_bits"]].mean()
        for row, column in ((1, "prob"), (2, "entropy_lb_bits")):
            fig.add_trace(go.Scatter(x=mean.index, y=mean[column], mode="lines", name=f"mean of all {run.n}",
                                     line={"color": "black", "width": 3}, showlegend=row == 1), row=row, col=1)
        frame = frame[frame["sample"].isin({s.index for s in drawn})]
    for sample, rows in frame.groupby("sample", sort=True):
        hover = [f"sample {sample}, token {r.position}: <b>{for_hover(r.token)}</b><br>p = {r.prob:.3f}, "
                 f"rank {r.rank}<br>entropy ≥ {r.entropy_lb_bits:.2f} bits (top-k mass {r.topk_mass:.3f})"
                 f"<br>top-k: {for_hover(r.alternatives)}" for r in rows.itertuples()]
        common = {"x": rows["position"], "mode": "lines+markers", "name": f"sample {sample}",
                  "legendgroup": str(sample), "hovertext": hover, "hoverinfo": "text",
                  "line": {"color": sample_color(sample), **({"width": 1} if averaged else {})},
                  **({"opacity": 0.35, "marker": {"size": 4}} if averaged else {})}
        fig.add_trace(go.Scatter(y=rows["prob"], **common), row=1, col=1)
        fig.add_trace(go.Scatter(y=rows["entropy_lb_bits"], showlegend=False, **common), row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title="token position", row=2, col=1)
    fig.update_layout(title="Per-token uncertainty" + note, height=560)
    return fig


def agreement_figure(run: Run) -> go.Figure:
    """Agreement per position as bars, with how many samples reached each position."""
    frame = agreement_frame(run)
    if frame.empty:
        return message_figure("Agreement across samples", "no tokens yet")
    hover = [f"token {r.position}: {r.top_count}/{r.reached} hold <b>{for_hover(r.top_token)}</b>"
             f"<br>{for_hover(r.tokens)}" for r in frame.itertuples()]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=frame["position"], y=frame["agreement"], name="agreement",
                         hovertext=hover, hoverinfo="text"))
    fig.add_trace(go.Scatter(x=frame["position"], y=frame["reached"], name="samples that reached it",
                             mode="lines", line={"shape": "hv", "dash": "dot"}), secondary_y=True)
    fig.update_yaxes(title="share holding the most common token", range=[0, 1.02], secondary_y=False)
    fig.update_yaxes(title="samples", range=[0, run.n * 1.02], secondary_y=True)  # n level with 1.0
    fig.update_layout(title="Agreement across samples per position", xaxis_title="token position", height=380)
    return fig
