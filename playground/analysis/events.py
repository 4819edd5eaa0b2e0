"""The output_kind inspector: every raw event the caller received, per sample index.

The same request looks different by output_kind: CUMULATIVE repeats each sample's whole text in
every event (marks grow), DELTA carries only the new tokens (marks stay small), FINAL_ONLY is a
single event at the end holding all n. The timeline makes that visible without reading logs.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from playground.analysis.charts import height_for
from playground.analysis.phases import engine_load_line
from playground.analysis.tokens import for_hover, truncate, visible
from playground.run import Run

EVENT_OUTPUT_COLUMNS = ["event", "t", "index", "tokens_carried", "new_tokens", "finish_reason", "text", "finished"]


def event_outputs_frame(run: Run) -> pd.DataFrame:
    """One row per event x output it carried: how many token ids it carried and how many were new."""
    delta = run.output_kind == "DELTA"
    seen: dict[int, int] = {}
    rows = []
    for number, event in enumerate(run.events):
        for out in event.outputs:
            carried = len(out.token_ids)
            new = carried if delta else max(0, carried - seen.get(out.index, 0))
            seen[out.index] = seen.get(out.index, 0) + carried if delta else carried
            rows.append({"event": number, "t": event.t, "index": out.index, "tokens_carried": carried,
                         "new_tokens": new, "finish_reason": out.finish_reason, "text": out.text,
                         "finished": event.finished})
    return pd.DataFrame(rows, columns=EVENT_OUTPUT_COLUMNS)


def events_figure(run: Run) -> go.Figure:
    """A mark per event per index carried (size: tokens carried); a sample's finish is a red
    diamond; a dashed line marks the event that finished the whole run."""
    frame = event_outputs_frame(run)
    fig = go.Figure()
    for name, rows, symbol, color in (
        ("output", frame[frame["finish_reason"].isna()], "circle", "#3b82f6"),
        ("finish", frame[frame["finish_reason"].notna()], "diamond", "#dc2626"),
    ):
        hover = [f"event {r.event} at {r.t * 1000:.1f} ms, sample {r.index}<br>carries {r.tokens_carried} "
                 f"token(s), {r.new_tokens} new" + (f", finish: {r.finish_reason}" if name == "finish" else "")
                 + f"<br>{for_hover(truncate(visible(r.text, False), 120))}" for r in rows.itertuples()]
        fig.add_trace(go.Scatter(
            x=rows["t"] * 1000, y=rows["index"], mode="markers", name=name, hovertext=hover, hoverinfo="text",
            marker={"symbol": symbol, "color": color, "line": {"width": 1, "color": "white"},
                    "size": [min(36, 7 + 2.5 * math.sqrt(c)) for c in rows["tokens_carried"]]},
        ))
    for event in run.events:
        if event.finished:
            fig.add_vline(x=event.t * 1000, line_dash="dash", line_color="#6b7280")
    load = engine_load_line(run)
    if load is not None:  # vLLM counts every child: a run of n alone shows n, falling as they finish
        times, counts = load
        fig.add_trace(go.Scatter(x=[t * 1000 for t in times], y=counts, mode="lines", name="requests in the engine",
                                 line={"shape": "hv", "color": "#10b981"}, yaxis="y2",
                                 hovertemplate="%{y} request(s) unfinished in the engine<extra></extra>"))
        fig.update_layout(yaxis2={"title": "requests in the engine", "overlaying": "y", "side": "right",
                                  "rangemode": "tozero", "showgrid": False})
    fig.update_layout(
        title=f"Raw events ({run.output_kind}): {len(run.events)} event(s), {len(frame)} output(s)",
        # From 0, so a FINAL_ONLY run shows its one event at the end, not alone in the middle.
        xaxis={"title": "ms since the run started", "rangemode": "tozero"},
        yaxis={"title": "sample index", "range": [run.n - 0.5, -0.5], "tickmode": "linear", "dtick": 1},
        height=height_for(run.n, per_row=20, minimum=320),
    )
    return fig
