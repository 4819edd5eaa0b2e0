"""What the engine did with each child: queued, prefill, decode, on the time axis of the arrivals.

The caller sees token arrivals; the engine knows when it queued each child, when the scheduler
first put it in a batch, and when it made its first and last token (vLLM's per-request stats,
recorded per sample as ``queued_at``, ``queued_s``, ``prefill_s``, ``decode_s``). Drawn one row per
child, a person sees which children were batched together (their prefills line up) and which
waited. A backend that cannot know (a remote server) leaves them empty, and the figure says so.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from playground.analysis.charts import height_for, message_figure
from playground.run import Run

PHASES = (("queued", "queued_s", "#9ca3af"), ("prefill", "prefill_s", "#f59e0b"), ("decode", "decode_s", "#3b82f6"))
PHASE_COLUMNS = ["sample", "seed", "queued_at", "queued_s", "prefill_s", "decode_s", "scheduled_at",
                 "first_token_at", "last_token_at", "first_arrival", "last_arrival"]


def phases_frame(run: Run) -> pd.DataFrame:
    """One row per sample: when each phase began (seconds since the run started) and how long it
    took, beside the first and last token arrivals the caller saw."""
    rows = []
    for s in run.samples:
        scheduled = _plus(s.queued_at, s.queued_s)
        first = _plus(scheduled, s.prefill_s)
        rows.append({
            "sample": s.index, "seed": s.seed, "queued_at": s.queued_at, "queued_s": s.queued_s,
            "prefill_s": s.prefill_s, "decode_s": s.decode_s, "scheduled_at": scheduled,
            "first_token_at": first, "last_token_at": _plus(first, s.decode_s),
            "first_arrival": s.token_times[0] if s.token_times else None,
            "last_arrival": s.token_times[-1] if s.token_times else None,
        })
    return pd.DataFrame(rows, columns=PHASE_COLUMNS).astype({c: "float64" for c in PHASE_COLUMNS[2:]})


def _plus(start: float | None, length: float | None) -> float | None:
    return None if start is None or length is None else start + length


def child_timeline_figure(run: Run) -> go.Figure:
    """Queued / prefill / decode bars, one row per child, with the caller's first and last token
    arrival marked on the same axis."""
    frame = phases_frame(run)
    title = "Per-child timeline: what the engine did with each child"
    if frame["queued_at"].isna().all():
        return message_figure(title, "the engine's per-request timings are not known on this backend "
                                     "(a remote server), or the run has not reached the engine yet")
    rows = [f"#{int(s)}" for s in frame["sample"]]
    ms = frame[PHASE_COLUMNS[2:]] * 1000  # milliseconds, the axis of "Tokens received over time"
    fig = go.Figure()
    starts = {"queued": ms["queued_at"], "prefill": ms["scheduled_at"], "decode": ms["first_token_at"]}
    for name, column, color in PHASES:
        hover = [f"sample {int(sample)}: {name} {length:.1f} ms from {start:.1f} ms"
                 if pd.notna(length) and pd.notna(start) else ""
                 for sample, length, start in zip(frame["sample"], ms[column], starts[name])]
        fig.add_trace(go.Bar(y=rows, x=ms[column], base=starts[name], orientation="h", name=name,
                             marker_color=color, hovertext=hover, hoverinfo="text"))
    for column, symbol, label in (("first_arrival", "triangle-right", "first token received"),
                                  ("last_arrival", "line-ns-open", "last token received")):
        fig.add_trace(go.Scatter(y=rows, x=ms[column], mode="markers", name=label,
                                 marker={"symbol": symbol, "size": 10, "color": "#111827"}))
    fig.update_layout(title=title, barmode="overlay", xaxis={"title": "ms since the run started",
                                                             "rangemode": "tozero"},
                      yaxis={"autorange": "reversed", "type": "category"},
                      height=height_for(run.n, per_row=22, minimum=300))
    return fig


def engine_load_line(run: Run) -> tuple[list[float], list[int]] | None:
    """(event times, requests unfinished in the engine at each) for the inspector's timeline;
    None when the backend did not count."""
    points = [(e.t, e.engine_requests) for e in run.events if e.engine_requests is not None]
    if not points:
        return None
    return [t for t, _ in points], [count for _, count in points]
