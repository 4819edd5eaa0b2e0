"""When things happened in a run, on one time axis (seconds since the run started): each sample's
token arrivals, what the engine did with each child, and every raw event the caller received.

Token arrivals are as the caller saw them, so they include queueing and the output_kind's
batching: tokens that arrive in one event share one time, giving inter-token latencies of 0 (kept,
and flagged ``same_event``), and FINAL_ONLY delivers every token at the end. Engine-side numbers,
when stats were on, are in ``Sample.metrics``.

The caller sees token arrivals; the engine knows when it queued each child, when the scheduler
first put it in a batch, and when it made its first and last token (vLLM's per-request stats,
recorded per sample as ``queued_at``, ``queued_s``, ``prefill_s``, ``decode_s``). Drawn one row per
child, a person sees which children were batched together (their prefills line up) and which
waited. A backend that cannot know (a remote server) leaves them empty, and the figure says so.

The output_kind inspector draws every raw event per sample index, because the same request looks
different by output_kind: CUMULATIVE repeats each sample's whole text in every event (marks grow),
DELTA carries only the new tokens (marks stay small), FINAL_ONLY is a single event at the end
holding all n. The timeline makes that visible without reading logs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from playground.analysis.display import (
    counted,
    drawn_samples,
    for_hover,
    height_for,
    message_figure,
    sample_color,
    truncate,
    visible,
)
from playground.analysis.replays import marked, replayed_from
from playground.run import Run

TIMING_COLUMNS = ["sample", "seed", "tokens", "ttft", "total_time", "tokens_per_s", "decode_tokens_per_s",
                  "itl_mean", "itl_median", "itl_max", "engine_ttft", "finish_reason"]
PHASES = (("queued", "queued_s", "#9ca3af"), ("prefill", "prefill_s", "#f59e0b"), ("decode", "decode_s", "#3b82f6"))
PHASE_COLUMNS = ["sample", "seed", "queued_at", "queued_s", "prefill_s", "decode_s", "scheduled_at",
                 "first_token_at", "last_token_at", "first_arrival", "last_arrival"]
EVENT_OUTPUT_COLUMNS = ["event", "t", "index", "tokens_carried", "new_tokens", "finish_reason", "text", "finished"]


# ---- token arrivals -----------------------------------------------------------------------------

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
    """Tokens received so far against time, one step line per sample (the first
    ``MAX_SAMPLE_LINES``), and with more samples the mean over all of them."""
    if untimed := _untimed(run, "Tokens received over time"):
        return untimed
    drawn, note = drawn_samples(run)
    fig = go.Figure()
    for s in drawn:
        if s.token_times:
            fig.add_trace(go.Scatter(
                x=[0.0] + [t * 1000 for t in s.token_times], y=list(range(len(s.token_times) + 1)),
                mode="lines", line={"shape": "hv", "color": sample_color(s.index)}, name=f"sample {s.index}",
            ))
    if note:
        times = sorted(t for s in run.samples for t in s.token_times)
        fig.add_trace(go.Scatter(x=[0.0] + [t * 1000 for t in times], y=[k / run.n for k in range(len(times) + 1)],
                                 mode="lines", line={"shape": "hv", "color": "black", "width": 3},
                                 name=f"mean of all {run.n}"))
    fig.update_layout(title="Tokens received over time" + note, xaxis_title="ms since the run started",
                      yaxis_title="tokens", height=400)
    return marked(fig, run, _replayed(run))


def _untimed(run: Run, title: str) -> go.Figure | None:
    """A sentence in place of empty axes, for a run with samples and no time for any token: one
    written by hand, or a bundle that kept only the final texts."""
    if any(s.token_ids for s in run.samples) and not any(s.token_times for s in run.samples):
        return message_figure(title, "no token of this run has a time: it holds its samples' texts, "
                                     "not how they streamed (a run written by hand, or its final texts only)")
    return None


def itl_figure(run: Run) -> go.Figure:
    """Distribution of inter-token latencies per sample (0 ms = arrived in the same event)."""
    if untimed := _untimed(run, "Inter-token latency"):
        return untimed
    frame = itl_frame(run)
    if frame.empty:
        return message_figure("Inter-token latency", "fewer than two tokens per sample: no latencies")
    drawn, note = drawn_samples(run, "boxes")
    fig = go.Figure()
    if note:
        fig.add_trace(go.Box(y=frame["itl"] * 1000, name=f"all {run.n}", boxpoints=False, marker_color="black"))
    shown = {s.index for s in drawn}
    for sample, rows in frame.groupby("sample", sort=True):
        if sample in shown:
            fig.add_trace(go.Box(y=rows["itl"] * 1000, name=f"sample {sample}", boxpoints="outliers",
                                 marker_color=sample_color(sample)))
    # Drawn at half the page's width: what the boxes are goes under the title, not past its end.
    fig.update_layout(title=f"Inter-token latency per sample<br><sup>0 ms: arrived in the same event{note}</sup>",
                      yaxis_title="ms", height=400, showlegend=False)
    return marked(fig, run, _replayed(run))


def _replayed(run: Run, what: str = "the times are the replay's, not the recorded run's") -> str | None:
    """A timing chart's note when the run is a replay (``marked`` puts it under the title): whose
    times it shows."""
    return f"⟲ a replay of {of}: {what}" if (of := replayed_from(run)) else None


def ttft_figure(run: Run) -> go.Figure:
    """Time to first token per sample, as the caller saw it."""
    if untimed := _untimed(run, "Time to first token per sample"):
        return untimed
    frame = timing_frame(run).dropna(subset=["ttft"])
    fig = go.Figure(go.Bar(x=[f"sample {i}" for i in frame["sample"]], y=frame["ttft"] * 1000, name="ttft",
                           marker_color=[sample_color(i) for i in frame["sample"]]))
    fig.update_layout(title="Time to first token per sample", yaxis_title="ms", height=360)
    return marked(fig, run, _replayed(run))


# ---- the engine's phases per child --------------------------------------------------------------

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


EVERY_ROW_NAMED = 48  # children up to which every row of the timeline is named (Plotly names every other row)


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
    fig.update_layout(title=title, barmode="overlay",
                      xaxis={"title": "ms since the run started", "rangemode": "tozero"},
                      yaxis={"autorange": "reversed", "type": "category",
                             **({"tickmode": "linear", "dtick": 1} if run.n <= EVERY_ROW_NAMED else {})},
                      height=height_for(run.n, per_row=22, minimum=300))
    return marked(fig, run, _replayed(run, "the engine's phases are the recorded run's, the arrivals the replay's"))


def engine_load_line(run: Run) -> tuple[list[float], list[int]] | None:
    """(event times, requests unfinished in the engine at each) for the inspector's timeline;
    None when the backend did not count."""
    points = [(e.t, e.engine_requests) for e in run.events if e.engine_requests is not None]
    if not points:
        return None
    return [t for t, _ in points], [count for _, count in points]


# ---- raw events, per output_kind ----------------------------------------------------------------

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
    diamond; a dashed line marks the event that finished the whole run. Of a large run, the marks
    of its first samples (``drawn_samples``): at n=128 every mark is thousands of them, and a page
    that draws them stops painting for a second; the events table has every one."""
    if not run.events and (untimed := _untimed(run, "Raw events")):
        return untimed
    frame = event_outputs_frame(run)
    outputs = len(frame)
    drawn, note = drawn_samples(run, "marks")
    rows_shown = len(drawn) if note else run.n
    if note:
        frame = frame[frame["index"] < rows_shown]
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
        # whole requests only: at a count of 1, auto ticks at 0.5 would read "0, 1, 1"
        fig.update_layout(yaxis2={"title": "requests in the engine", "overlaying": "y", "side": "right",
                                  "rangemode": "tozero", "showgrid": False, "tickmode": "linear", "tick0": 0,
                                  "dtick": max(1, math.ceil(max(counts, default=0) / 6)), "tickformat": "d"})
    fig.update_layout(
        title=(f"Raw events ({run.output_kind}): {counted(len(run.events), 'event')}, "
               f"{counted(outputs, 'output')}{note}"),
        # From 0, so a FINAL_ONLY run shows its one event at the end, not alone in the middle.
        xaxis={"title": "ms since the run started", "rangemode": "tozero"},
        yaxis={"title": "sample index", "range": [rows_shown - 0.5, -0.5], "tickmode": "linear", "dtick": 1},
        height=height_for(rows_shown, per_row=20, minimum=320),
        # Above the chart at its right, not over the engine's axis and its title.
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
    )
    return fig
