"""The sample graph as a picture: left to right from the prompt, a marker per node sized by the
samples through it, a line per edge as wide as the samples along it, and at each branch point
each branch's share of the samples beside the model's probability of taking it.

At n=256 the graph has hundreds to thousands of nodes, most taken by one or two samples; drawn
whole it is a hairball and a slow page. So the words fewer than ``fold`` samples said are folded:
the paths between two drawn nodes are one dashed edge, and the samples that go on along rare words
alone end in one "… k more" node. The graph is the overview ("how diverse is this?"); the text of
every node is in its hover, and a click on a node lists its samples' texts (the page's Graph tab).

Where nodes and labels go is graph_layout.py's: labels never overlap, those that do not fit are
cut short or left to the hover. Each node marker's ``customdata`` is "nodes|samples": the graph
nodes it draws ("12" or "12,13,14" when the fold left a run of them unbranched; ``start`` the
prompt; ``more:<id>`` the rare paths after a node) and its samples' indices ("0,2,5"), for a page
to mark them and branch from there (``graph.node_places``).
"""

from __future__ import annotations

import html
import math
import textwrap
from collections import Counter

import plotly.graph_objects as go

from playground.analysis.answers import Answers
from playground.analysis.display import counted, for_hover, message_figure, percent, truncate, visible
from playground.analysis.graph import SampleGraph
from playground.analysis.graph_layout import (
    BOTTOM,
    FONT,
    SMALL,
    Drawn,
    DrawnEdge,
    Label,
    curve,
    in_view,
    label,
    layout,
    place_labels,
    size,
    text_width,
    view,
)

MAX_DRAWN = 100  # nodes drawn at most: beyond, the rarest are folded
FEW = 40  # nodes of a graph small enough to label every branch
LABELLED = 4  # branches labelled with their share and probability at one branch point (the hover has all)
WIDE, NARROW = 1100, 560  # px across: the Graph tab's figure at a 1280-px window; half a page (Compare)
SIDE_COLOURBAR, SIDE_LEGEND = 100, 230  # px of a figure's width its colour bar or its legend takes
# px: the title's font; room above it (Gradio draws the chart's label over the figure's top left); a
# line of it; room below; and the least top margin (Gradio makes a titled chart's 100 at least)
TITLE_FONT, TITLE_TOP, TITLE_LINE, TITLE_GAP, LEAST_TOP = 17, 30, 21, 10, 100
ASCENT = 15  # px plotly draws a title's first line above the point it anchors its top at
LABEL_KINDS = {"words": (FONT, "#1e293b"), "share": (SMALL, "#64748b"), "edge": (SMALL, "#334155")}
ANSWER_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]
OTHER, NONE_COLOUR = "#9ca3af", "#e5e7eb"
MIXED = "tied: no one answer leads"  # a node whose samples' most common answers tie: no group's colour
MIXED_MARKER = {"color": "#ffffff", "symbol": "circle-x", "line": {"width": 1.5, "color": "#334155"}}


def fold_for(graph: SampleGraph, most: int = MAX_DRAWN) -> int:
    """The fewest samples a drawn node has: 1 (all) when the graph is small, else about the
    smallest count that draws at most ``most`` nodes, "k more" ends included (runs the fold
    leaves unbranched draw as one), by a binary search over the nodes' counts."""
    if len(graph.nodes) <= most:  # every node drawn, no "k more" end
        return 1
    candidates = sorted({n.count for n in graph.nodes} | {1})
    candidates.append(candidates[-1] + 1)  # folds every node: always fits
    low, high = 0, len(candidates) - 1  # the answer is candidates[k] for the smallest k that fits
    while low < high:
        middle = (low + high) // 2
        if len(folded(graph, candidates[middle], probs=False)[0]) - 1 <= most:
            high = middle
        else:
            low = middle + 1
    return candidates[low]


def folded(graph: SampleGraph, fold: int, probs: bool = True) -> tuple[dict[str, Drawn], list[DrawnEdge]]:
    """The nodes with at least ``fold`` samples, the prompt, and "k more" ends, with their edges;
    then each run of drawn nodes that the fold left without a branch drawn as one. ``probs``:
    gather the probabilities of the branches too (not needed to count the nodes)."""
    drawn = {"start": Drawn("start", "prompt", "the prompt", [])}
    shown = {node.id for node in graph.nodes if node.count >= fold}
    for v in sorted(shown):
        node = graph.nodes[v]
        drawn[str(v)] = Drawn(str(v), "", node.text, node.samples, [v], node.prob)
    edges: dict[tuple[str, str, bool], DrawnEdge] = {}
    for i, path in graph.paths.items():
        if not path:
            continue
        drawn["start"].samples.append(i)
        at, after = "start", 0  # the last drawn node, and where the path went on from it
        for j, v in enumerate(path):
            if v in shown:
                key = str(v)
                _take(edges, at, key, j == after, i, graph.nodes[path[after]].visit(i).prob if probs else None)
                at, after = key, j + 1
        if after < len(path):  # rare words to the end: one "k more" node after the last one drawn
            more = f"more:{at}"
            drawn.setdefault(more, Drawn(more, "", "", [])).samples.append(i)
            _take(edges, at, more, False, i, graph.nodes[path[after]].visit(i).prob if probs else None)
    for d in drawn.values():
        if d.key.startswith("more:"):
            d.text = (f"{len(d.samples)} sample(s) that go on along words fewer than {fold} samples said "
                      "(folded: click to read them)")
    return _joined(drawn, list(edges.values()), graph)


def _take(edges: dict, source: str, target: str, direct: bool, sample: int, prob: float | None) -> None:
    edge = edges.get((source, target, direct))
    if edge is None:
        edge = edges[(source, target, direct)] = DrawnEdge(source, target, direct=direct)
    edge.samples.append(sample)
    if prob is not None:
        edge.probs.append(prob)


def _joined(drawn: dict[str, Drawn], edges: list[DrawnEdge], graph: SampleGraph) -> tuple[dict, list]:
    """Drawn nodes a -> b in one when every sample of a goes on to b and every sample of b came
    from a (some perhaps through folded words): at n=256 the fold leaves long runs like that."""
    out: dict[str, list[DrawnEdge]] = {}
    into: dict[str, set[str]] = {}
    for e in edges:
        out.setdefault(e.source, []).append(e)
        into.setdefault(e.target, set()).add(e.source)
    gone: dict[str, str] = {}  # a node joined into a run -> the run's first node
    for key in [k for k in drawn if k != "start" and not k.startswith("more:")]:
        if key in gone:
            continue
        head = drawn[key]
        while True:
            last = str(head.members[-1])
            leaving = out.get(last, [])
            targets = {e.target for e in leaving}
            if len(targets) != 1 or sum(len(e.samples) for e in leaving) != len(head.samples):
                break
            nxt = drawn[targets.pop()]
            if nxt.key.startswith("more:") or into.get(nxt.key) != {last}:
                break
            head.varied += sum(len(e.samples) for e in leaving if not e.direct)
            head.members += nxt.members
            gone[nxt.key] = head.key
        if len(head.members) > 1:
            head.text = " ".join(graph.nodes[m].text for m in head.members)
            head.prob = _mean_prob(head.members, graph)
    for key in gone:
        del drawn[key]
    kept = [e for e in edges if e.target not in gone]  # the rest are inside a joined node
    for e in kept:  # an edge leaving a run's last node leaves the run
        e.source = gone.get(e.source, e.source)
    for d in drawn.values():
        d.label = (f"… {len(d.samples)} more" if d.key.startswith("more:") else "prompt" if d.key == "start"
                   else label(d.text))
    return drawn, kept


def _mean_prob(members: list[int], graph: SampleGraph) -> float | None:
    """The mean token probability of joined nodes, weighted by their words."""
    parts = [(graph.nodes[m].prob, graph.nodes[m].words) for m in members]
    parts = [(p, w) for p, w in parts if p is not None]
    return sum(p * w for p, w in parts) / sum(w for _, w in parts) if parts else None


def graph_figure(graph: SampleGraph, colour: str = "probability", answers: Answers | None = None,
                 fold: int | None = None, title: str = "Sample graph", width: int = NARROW) -> go.Figure:
    """The figure: ``colour`` "probability" (mean probability of a node's tokens) or "answer"
    (the answer group most of a node's samples are in, from ``answers``); ``fold``: the fewest
    samples a drawn node has (None: ``fold_for``); ``width``: the fewest pixels across it is drawn
    at (``NARROW``: half a page, as Compare draws two; the Graph tab's is ``WIDE``), which sets
    the columns in view at first and where its title's lines break."""
    if not any(graph.paths.values()):
        return message_figure(title, "No words yet: the graph grows as the samples do.")
    fold = fold_for(graph) if fold is None else max(1, int(fold))
    drawn, edges = folded(graph, fold)
    layout(drawn, edges)
    n = len(drawn["start"].samples)
    by_answer = colour == "answer" and answers is not None
    columns = max(d.x for d in drawn.values())
    last = in_view(width, SIDE_LEGEND if by_answer else SIDE_COLOURBAR)
    lines = _title_lines(title, graph, fold, columns, last, width)
    at = view(drawn, edges, n, last, max(LEAST_TOP, TITLE_TOP + TITLE_LINE * len(lines) + TITLE_GAP))
    on_edges, beside = _branch_labels(drawn, edges)
    fig = go.Figure()
    for trace in _edge_traces(drawn, edges, n):
        fig.add_trace(trace)
    fig.add_trace(_branch_hovers(drawn, edges))
    for trace in _node_traces(drawn, n, colour, answers, beside):
        fig.add_trace(trace)
    for trace in _label_traces(place_labels(drawn, edges, n, at, on_edges, beside)):
        fig.add_trace(trace)
    fig.update_layout(
        title={"text": "<br>".join(lines), "x": 0.02, "xanchor": "left", "yref": "container", "y": 1,
               "yanchor": "top", "pad": {"t": TITLE_TOP + ASCENT}},
        height=at.height, showlegend=by_answer,
        xaxis={"visible": False, "range": [at.x0, at.x1]},
        yaxis={"visible": False, "range": [at.y0, at.y1], "fixedrange": True},  # labels keep their pixels
        hovermode="closest", clickmode="event",
        margin={"l": 10, "r": 10, "t": at.top, "b": BOTTOM}, plot_bgcolor="white", dragmode="pan",
        legend={"title": {"text": "answer"}},
    )
    return fig


def _title_lines(title: str, graph: SampleGraph, fold: int, columns: int, last: int, width: int) -> list[str]:
    """The title and what the figure shows, in lines that fit ``width`` (a line too long for the
    figure is cut at its edge): each phrase whole on a line when it fits."""
    meets = len(graph.meeting_points())
    head = f"{title}: {counted(len(graph.nodes), 'node')}, {meets or 'none'} where samples meet again"
    phrases = ["node size: samples through it", "edge width: samples along it",
               "at a branch: its share of the samples and p, the model's probability of it"]
    if fold > 1:
        phrases.append(f"words fewer than {fold} samples said are folded (dashed)")
    if columns > last:
        phrases.append(f"{columns + 1} columns, the first {last + 1} in view at first: drag to see the rest")
    room = 0.95 * width - 40  # the title starts a little in from the figure's left edge
    lines = textwrap.wrap(head, int(room / (text_width("x", TITLE_FONT) - 2)))
    small, line = int(room / (text_width("x", TITLE_FONT * 0.7) - 2)), ""
    for phrase in phrases:
        *whole, end = textwrap.wrap(phrase, small)  # ``whole``: lines of a phrase longer than a line
        if line and (whole or len(line) + 3 + len(end) > small):
            lines.append(f"<sup>{line}</sup>")
            line = ""
        lines += [f"<sup>{part}</sup>" for part in whole]
        line = f"{line} · {end}" if line else end
    return lines + [f"<sup>{line}</sup>"]


def _edge_traces(drawn: dict[str, Drawn], edges: list[DrawnEdge], n: int) -> list[go.Scatter]:
    """One line trace per width and dash (a trace per edge would be thousands at n=256)."""
    buckets: dict[tuple[int, bool], tuple[list, list]] = {}
    for e in edges:
        width = 1 + round(7 * math.sqrt(len(e.samples) / n))
        xs, ys = buckets.setdefault((width, e.direct), ([], []))
        points = curve(drawn[e.source], drawn[e.target], e.direct)
        xs += [x for x, _ in points] + [None]
        ys += [y for _, y in points] + [None]
    return [go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                       line={"width": width, "color": "#94a3b8" if direct else "#cbd5e1",
                             "dash": "solid" if direct else "dot"})
            for (width, direct), (xs, ys) in sorted(buckets.items())]


def _branch_labels(drawn: dict[str, Drawn], edges: list[DrawnEdge]) -> tuple[dict[int, tuple], dict[str, tuple]]:
    """At each branch point, the label of each of its larger branches (``LABELLED`` at most; in a
    graph of more than ``FEW`` nodes, only those of two samples and 10 % of the samples there or
    more): "share · p", and "share" alone where that does not fit. A branch that is the only way
    into its node is labelled beside that node; an edge into a meeting point is labelled halfway
    along it, in a graph of ``FEW`` nodes or fewer (in a larger one its hover says it). Returns
    (edge id -> labels, node key -> labels)."""
    leaving: dict[str, list[DrawnEdge]] = {}
    for e in edges:
        leaving.setdefault(e.source, []).append(e)
    labelled, few = [], len(drawn) <= FEW
    for source, out in leaving.items():
        there = len(drawn[source].samples)
        if len(out) > 1 or sum(len(e.samples) for e in out) < there:
            big = sorted(out, key=lambda e: -len(e.samples))[:LABELLED]
            labelled += [e for e in big if few or len(e.samples) >= max(2, 0.1 * there)]
    ways_in = Counter(e.target for e in edges)
    on_edges, beside = {}, {}
    for e in labelled:
        share, p = _share(drawn, e)
        # whole percents on the chart (its labels are small, the hover says 12.5%)
        labels = (f"{share:.0%}" + (f" · p {p:.2f}" if p is not None else ""), f"{share:.0%}")
        if ways_in[e.target] == 1:
            beside[e.target] = labels
        elif few:
            on_edges[id(e)] = labels
    return on_edges, beside


def _share(drawn: dict[str, Drawn], e: DrawnEdge) -> tuple[float, float | None]:
    """An edge's share of the samples at its source, and the mean probability they gave its target."""
    return len(e.samples) / max(1, len(drawn[e.source].samples)), (sum(e.probs) / len(e.probs) if e.probs else None)


def _branch_hovers(drawn: dict[str, Drawn], edges: list[DrawnEdge]) -> go.Scatter:
    """A point halfway along each edge, unseen: its hover says the branch whole."""
    xs, ys, hovers = [], [], []
    for e in edges:
        a, b = drawn[e.source], drawn[e.target]
        share, p = _share(drawn, e)
        points = curve(a, b, e.direct)
        x, y = points[len(points) // 2]
        xs.append(x)
        ys.append(y)
        hovers.append(f"{for_hover(truncate(a.label, 40))} → {for_hover(truncate(b.label, 40))}"
                      f"{'' if e.direct else ' (through rarer words)'}<br>{len(e.samples)} sample(s), "
                      f"{percent(share)} of those at {for_hover(truncate(a.label, 40))}"
                      + (f"<br>p = {p:.3f}: the mean probability they gave the first token after it" if p is not None
                         else "") + f"<br>samples {_listed(e.samples, 12)}")
    return go.Scatter(x=xs, y=ys, mode="markers", hovertext=hovers, hoverinfo="text",
                      marker={"size": 8, "color": "rgba(0,0,0,0)"}, showlegend=False)


def _label_traces(labels: list[Label]) -> list[go.Scatter]:
    """The labels, one text trace per kind (a label is an SVG element: only those placed are drawn)."""
    out = []
    for kind, (font, colour) in LABEL_KINDS.items():
        mine = [placed for placed in labels if placed.kind == kind]
        out.append(go.Scatter(x=[placed.x for placed in mine], y=[placed.y for placed in mine],
                              text=[for_hover(placed.text) for placed in mine], mode="text", name=kind,
                              textposition="middle center", textfont={"size": font, "color": colour},
                              hoverinfo="skip", showlegend=False))
    return out


def _node_traces(drawn: dict[str, Drawn], n: int, colour: str, answers: Answers | None,
                 beside: dict[str, tuple]) -> list[go.Scatter]:
    nodes = list(drawn.values())
    if colour == "answer" and answers is not None:
        order = {g.answer: k for k, g in enumerate(answers.groups)}
        by_group: dict[str, list[Drawn]] = {}
        for d in nodes:
            by_group.setdefault(_leading(d, answers, order), []).append(d)
        last = {"other answers": 1, "no answer": 2, MIXED: 3}
        names = sorted(by_group, key=lambda a: (0, order[a]) if a in order else (last[a], 0))
        return [_nodes(by_group[name], n, {"color": ANSWER_COLOURS[order[name]]} if name in order else
                       {"color": OTHER} if name == "other answers" else {"color": NONE_COLOUR} if name == "no answer"
                       else MIXED_MARKER, truncate(name, 30), answers, beside)
                for name in names]
    probs = [d.prob for d in nodes if not d.key.startswith(("more:", "start"))]
    if any(p is not None for p in probs):
        plain = [d for d in nodes if d.prob is None]
        scored = [d for d in nodes if d.prob is not None]
        marker = {"color": [d.prob for d in scored], "colorscale": "RdYlGn", "cmin": 0, "cmax": 1, "showscale": True,
                  "colorbar": {"title": {"text": "mean p"}, "thickness": 12}}
        return [_nodes(plain, n, {"color": OTHER}, "", None, beside), _nodes(scored, n, marker, "", None, beside)]
    return [_nodes(nodes, n, {"color": "#60a5fa"}, "", None, beside)]


def _leading(d: Drawn, answers: Answers, order: dict) -> str:
    """The answer group most of a node's samples that gave an answer are in (its name, or "other
    answers" past the colours), as the Set tab reads a majority: samples with no answer are not a
    group; "no answer" when none of them gave one; ``MIXED`` when no one answer leads there (a tie:
    two or more are as common), which no group's colour would say."""
    said = Counter(a for i in d.samples if (a := answers.answers.get(i)) is not None)
    ranked = said.most_common()
    if not ranked:
        return "no answer"
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return MIXED
    top = ranked[0][0]
    return top if order.get(top, len(ANSWER_COLOURS)) < len(ANSWER_COLOURS) else "other answers"


def _nodes(nodes: list[Drawn], n: int, marker: dict, name: str, answers: Answers | None,
           beside: dict[str, tuple]) -> go.Scatter:
    marker = {"line": {"width": 1, "color": "#334155"}, **marker, "size": [size(d, n) for d in nodes]}
    hovers = []
    for d in nodes:
        # a node's words with their spaces drawn; the prompt's and a fold's are sentences of ours
        words = d.text if d.key == "start" or d.key.startswith("more:") else visible(d.text, multiline=False)
        hover = (f"<b>{for_hover(truncate(words, 300))}</b><br>{len(d.samples)} of {n} "
                 f"samples: {_listed(d.samples)}")
        if d.key in beside:  # what its share label says, should it not fit
            said = beside[d.key][0]
            hover += (f"<br>the branch into it: {said} (the share of the samples before it"
                      + (" · p, the model's probability of its first token)" if " · p " in said else ")"))
        if d.prob is not None:
            hover += f"<br>mean p of its tokens {d.prob:.3f}"
        if d.varied:
            hover += f"<br>{d.varied} of them said rarer words inside it (folded)"
        if answers is not None:
            said = Counter(answers.answers.get(i) for i in d.samples).most_common(3)
            hover += "<br>answers: " + ", ".join(f"{html.escape(truncate(str(a), 20))} ({c})" for a, c in said)
            if name == MIXED:
                hover += f"<br>{MIXED}: no one answer is more common here than every other"
        hovers.append(hover + "<br><i>click: mark these samples, branch from here</i>")
    return go.Scatter(x=[d.x for d in nodes], y=[d.y for d in nodes], mode="markers", name=name or None,
                      hovertext=hovers, hoverinfo="text", marker=marker, showlegend=bool(name),
                      customdata=[f"{','.join(map(str, d.members)) or d.key}|{','.join(map(str, d.samples))}"
                                  for d in nodes])


def _listed(samples: list[int], most: int = 24) -> str:
    shown = ", ".join(f"#{i}" for i in samples[:most])
    return shown + (f" … ({len(samples) - most} more)" if len(samples) > most else "")
