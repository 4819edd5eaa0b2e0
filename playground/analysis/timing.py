"""When each sample's tokens reached the caller.

Times are token arrivals as the caller saw them (seconds since the run started), so they include
queueing and the output_kind's batching: tokens that arrive in one event share one time, giving
inter-token latencies of 0 (kept, and flagged ``same_event``), and FINAL_ONLY delivers every token
at the end. Engine-side numbers, when stats were on, are in ``Sample.metrics``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from playground.analysis.charts import message_figure, sample_color
from playground.run import Run

TIMING_COLUMNS = ["sample", "seed", "tokens", "ttft", "total_time", "tokens_per_s", "decode_tokens_per_s",
                  "itl_mean", "itl_median", "itl_max", "engine_ttft", "finish_reason"]


def itl_frame(run: Run) -> pd.DataFrame:
    """One row per token after a sample's first: its inter-token latency (seconds)."""
    rows = []
    for s in run.samples:
        for pos in range(1, len(s.token_times)):
            itl = s.token_times[pos] - s.token_times[pos - 1]
            rows.append({"sample": s.index, "position": pos, "itl": itl, "same_event": itl == 0})
    return pd.DataFrame(rows, columns=["sample", "position", "itl", "same_event"])


def timing_frame(run: Run) -> pd.DataFrame:
    """One row per sample: time to first token, total time (last token), throughput and ITLs.

    ``tokens_per_s`` counts from the start of the run (it includes the wait for the first
    token); ``decode_tokens_per_s`` counts from the first token to the last, and is empty when
    they arrived together (one token, or FINAL_ONLY).
    """
    rows = []
    for s in run.samples:
        times = s.token_times
        itls = np.diff(times) if len(times) > 1 else np.array([])
        total = times[-1] if times else None
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        rows.append({
            "sample": s.index, "seed": s.seed, "tokens": len(s.token_ids), "ttft": s.ttft, "total_time": total,
            "tokens_per_s": len(times) / total if total else None,
            "decode_tokens_per_s": (len(times) - 1) / span if span > 0 else None,
            "itl_mean": itls.mean() if itls.size else None,
            "itl_median": float(np.median(itls)) if itls.size else None,
            "itl_max": itls.max() if itls.size else None,
            "engine_ttft": (s.metrics or {}).get("first_token_latency"),
            "finish_reason": s.finish_reason,
        })
    return pd.DataFrame(rows, columns=TIMING_COLUMNS).astype({c: "float64" for c in TIMING_COLUMNS[3:11]})


def tokens_over_time_figure(run: Run) -> go.Figure:
    """Tokens received so far against time, one step line per sample."""
    fig = go.Figure()
    for s in run.samples:
        if s.token_times:
            fig.add_trace(go.Scatter(
                x=[0.0] + [t * 1000 for t in s.token_times], y=list(range(len(s.token_times) + 1)),
                mode="lines", line={"shape": "hv", "color": sample_color(s.index)}, name=f"sample {s.index}",
            ))
    fig.update_layout(title="Tokens received over time", xaxis_title="ms since the run started",
                      yaxis_title="tokens", height=400)
    return fig


def itl_figure(run: Run) -> go.Figure:
    """Distribution of inter-token latencies per sample (0 ms = arrived in the same event)."""
    frame = itl_frame(run)
    if frame.empty:
        return message_figure("Inter-token latency", "fewer than two tokens per sample: no latencies")
    fig = go.Figure()
    for sample, rows in frame.groupby("sample", sort=True):
        fig.add_trace(go.Box(y=rows["itl"] * 1000, name=f"sample {sample}", boxpoints="outliers",
                             marker_color=sample_color(sample)))
    fig.update_layout(title="Inter-token latency per sample (0 ms: same event)", yaxis_title="ms",
                      height=400, showlegend=False)
    return fig


def ttft_figure(run: Run) -> go.Figure:
    """Time to first token per sample, as the caller saw it."""
    frame = timing_frame(run).dropna(subset=["ttft"])
    fig = go.Figure(go.Bar(x=[f"sample {i}" for i in frame["sample"]], y=frame["ttft"] * 1000, name="ttft",
                           marker_color=[sample_color(i) for i in frame["sample"]]))
    fig.update_layout(title="Time to first token per sample", yaxis_title="ms",
                      height=360)
    return fig
