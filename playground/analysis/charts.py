"""Small shared pieces of every analysis figure: a height that grows with the rows shown (Gradio
has rendered autosized plots at zero height), and an honest empty figure."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative


def height_for(rows: int, per_row: int = 26, minimum: int = 320, maximum: int = 960) -> int:
    return max(minimum, min(maximum, 120 + per_row * rows))


def message_figure(title: str, message: str, height: int = 320) -> go.Figure:
    """A figure with no data that says why (no logprobs recorded, no tokens yet)."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=title, height=height, xaxis_visible=False, yaxis_visible=False)
    return fig


def sample_color(index: int) -> str:
    """One colour per sample index, the same in every figure (Alphabet has 26; larger n repeats)."""
    palette = qualitative.Alphabet
    return palette[index % len(palette)]
