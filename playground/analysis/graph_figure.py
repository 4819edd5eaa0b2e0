"""The sample graph as a picture: left to right from the prompt, a marker per node sized by the
samples through it, a line per edge as wide as the samples along it, and at each branch point
each branch's share of the samples beside the model's probability of taking it.

At n=256 the graph has hundreds to thousands of nodes, most taken by one or two samples; drawn
whole it is a hairball and a slow page. So the words fewer than ``fold`` samples said are folded:
the paths between two drawn nodes are one dashed edge, and the samples that go on along rare words
alone end in one "… k more" node. The graph is the overview ("how diverse is this?"); the text of
every node is in its hover, and a click on a node lists its samples' texts (the page's Graph tab).

Each node marker's ``customdata`` is "nodes|samples": the graph nodes it draws ("12" or "12,13,14"
when the fold left a run of them unbranched; ``start`` the prompt; ``more:<id>`` the rare paths after
a node) and its samples' indices ("0,2,5"), for a page to mark them and branch from there
(``graph.node_places``).
"""

from __future__ import annotations

import html
import math
from collections import Counter
from dataclasses import dataclass, field

import plotly.graph_objects as go

from playground.analysis.answers import Answers
from playground.analysis.display import for_hover, height_for, message_figure, truncate, visible
from playground.analysis.graph import SampleGraph

MAX_DRAWN = 100  # nodes drawn at most: beyond, the rarest are folded
LABEL_CHARS = 18
FEW = 40  # nodes of a graph small enough to label every branch
LABELLED = 4  # branches labelled with their share and probability at one branch point (the hover has all)
COLUMNS = 14  # columns in view at first: the rest are a pan away (the figure's autoscale shows all)
ANSWER_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]
OTHER, NONE_COLOUR = "#9ca3af", "#e5e7eb"


@dataclass
class Drawn:
    """A node as drawn: graph nodes (``members``: one, or a run of them the fold left unbranched),
    the prompt (``start``) or the folded ends of rare paths (``more:<id>``)."""

    key: str
    label: str
    text: str
    samples: list[int]
    members: list[int] = field(default_factory=list)
    prob: float | None = None
    varied: int = 0  # samples that said rarer words somewhere inside it (folded)
    x: int = 0
    y: float = 0.0


@dataclass
class DrawnEdge:
    source: str
    target: str
    samples: list[int] = field(default_factory=list)
    direct: bool = True  # False: through words fewer samples said (folded)
    probs: list[float] = field(default_factory=list)


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
            d.text = f"{len(d.samples)} sample(s) that go on along words fewer than {fold} samples said"
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
                   else _label(d.text))
    return drawn, kept


def _mean_prob(members: list[int], graph: SampleGraph) -> float | None:
    """The mean token probability of joined nodes, weighted by their words."""
    parts = [(graph.nodes[m].prob, graph.nodes[m].words) for m in members]
    parts = [(p, w) for p, w in parts if p is not None]
    return sum(p * w for p, w in parts) / sum(w for _, w in parts) if parts else None


def layout(drawn: dict[str, Drawn], edges: list[DrawnEdge]) -> None:
    """Place the nodes: x is the longest path from the prompt (every edge points right), y the
    mean height of where a node's samples come from, nodes of one column kept a step apart."""
    into: dict[str, list[DrawnEdge]] = {}
    for e in edges:
        into.setdefault(e.target, []).append(e)
    columns: dict[int, list[Drawn]] = {}
    for d in _topological(drawn):
        d.x = max((drawn[e.source].x + 1 for e in into.get(d.key, ())), default=0)
        columns.setdefault(d.x, []).append(d)
    for x in sorted(columns):
        wanted = {}
        for d in columns[x]:
            came = into.get(d.key, ())
            weight = sum(len(e.samples) for e in came)
            wanted[d.key] = sum(drawn[e.source].y * len(e.samples) for e in came) / weight if weight else 0.0
        column = sorted(columns[x], key=lambda d: (wanted[d.key], -len(d.samples), d.key))
        y = -math.inf
        for d in column:
            y = d.y = max(wanted[d.key], y + 1.0)
        shift = sum(d.y - wanted[d.key] for d in column) / len(column)
        for d in column:
            d.y = round(d.y - shift, 3)


def _topological(drawn: dict[str, Drawn]) -> list[Drawn]:
    """The prompt, the graph's nodes by id (ids are a topological order), each "more" after."""
    def rank(key: str) -> tuple[int, int]:
        if key == "start":
            return (-1, 0)
        if key.startswith("more:"):
            base = key[5:]
            return (-1 if base == "start" else int(base), 1)
        return (int(key), 0)
    return sorted(drawn.values(), key=lambda d: rank(d.key))


def graph_figure(graph: SampleGraph, colour: str = "probability", answers: Answers | None = None,
                 fold: int | None = None, title: str = "Sample graph") -> go.Figure:
    """The figure: ``colour`` "probability" (mean probability of a node's tokens) or "answer"
    (the answer group most of a node's samples are in, from ``answers``); ``fold``: the fewest
    samples a drawn node has (None: ``fold_for``)."""
    if not any(graph.paths.values()):
        return message_figure(title, "No words yet: the graph grows as the samples do.")
    fold = fold_for(graph) if fold is None else max(1, int(fold))
    drawn, edges = folded(graph, fold)
    layout(drawn, edges)
    n = len(drawn["start"].samples)
    fig = go.Figure()
    for trace in _edge_traces(drawn, edges, n):
        fig.add_trace(trace)
    on_edges, beside = _branch_labels(drawn, edges)
    for trace in _branch_traces(drawn, edges, on_edges):
        fig.add_trace(trace)
    fig.add_trace(_shares(drawn, beside, n))
    for trace in _node_traces(drawn, n, colour, answers):
        fig.add_trace(trace)
    ys = [d.y for d in drawn.values()]
    rows = max(max(Counter(d.x for d in drawn.values()).values()), math.ceil(max(ys) - min(ys)) + 1)
    columns = max(d.x for d in drawn.values())
    wide = {"range": [-0.5, COLUMNS + 0.5]} if columns > COLUMNS else {}  # a range slider would draw it all twice
    folded_note = f"; words fewer than {fold} samples said are folded (dashed)" if fold > 1 else ""
    if columns > COLUMNS:
        folded_note += f"; the first {COLUMNS} of {columns} columns: drag to see the rest"
    fig.update_layout(
        title={"text": f"{title}: {len(graph.nodes)} nodes, {len(graph.meeting_points())} where samples meet again"
                       f"<br><sup>node size: samples through it · edge width: samples along it · at a branch: "
                       f"share of samples, p = the model's probability{folded_note}</sup>"},
        height=height_for(rows, per_row=54, minimum=420, maximum=1400), showlegend=colour == "answer" and bool(answers),
        xaxis={"visible": False, **wide},
        yaxis={"visible": False, "fixedrange": False}, hovermode="closest", clickmode="event",
        margin={"l": 10, "r": 10, "t": 70, "b": 10}, plot_bgcolor="white", dragmode="pan",
        legend={"title": {"text": "answer"}},
    )
    return fig


def _edge_traces(drawn: dict[str, Drawn], edges: list[DrawnEdge], n: int) -> list[go.Scatter]:
    """One line trace per width and dash (a trace per edge would be thousands at n=256)."""
    buckets: dict[tuple[int, bool], tuple[list, list]] = {}
    for e in edges:
        width = 1 + round(7 * math.sqrt(len(e.samples) / n))
        xs, ys = buckets.setdefault((width, e.direct), ([], []))
        curve = _curve(drawn[e.source], drawn[e.target], e.direct)
        xs += [x for x, _ in curve] + [None]
        ys += [y for _, y in curve] + [None]
    return [go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                       line={"width": width, "color": "#94a3b8" if direct else "#cbd5e1",
                             "dash": "solid" if direct else "dot"})
            for (width, direct), (xs, ys) in sorted(buckets.items())]


def _branch_labels(drawn: dict[str, Drawn], edges: list[DrawnEdge]) -> tuple[dict[int, str], dict[str, str]]:
    """At each branch point, the label of each of its larger branches (``LABELLED`` at most; in a
    graph of more than ``FEW`` nodes, only those of two samples and 10 % of the samples there or
    more): "share · p". A branch that is the only way into its node is labelled beside that node
    (labels halfway along the edges of a fan crowd each other and the nodes); only an edge into a
    meeting point keeps its label on the edge. Returns (edge id -> label, node key -> label)."""
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
        label = f"{share:.0%}" + (f" · p {p:.2f}" if p is not None else "")
        if ways_in[e.target] == 1:
            beside[e.target] = label
        else:
            on_edges[id(e)] = label
    return on_edges, beside


def _share(drawn: dict[str, Drawn], e: DrawnEdge) -> tuple[float, float | None]:
    """An edge's share of the samples at its source, and the mean probability they gave its target."""
    return len(e.samples) / max(1, len(drawn[e.source].samples)), (sum(e.probs) / len(e.probs) if e.probs else None)


def _branch_traces(drawn: dict[str, Drawn], edges: list[DrawnEdge], labels: dict[int, str]) -> list[go.Scatter]:
    """A point halfway along each edge: its hover, and the edge's label from ``labels`` if it has one."""
    xs, ys, texts, hovers = [], [], [], []
    for e in edges:
        a, b = drawn[e.source], drawn[e.target]
        share, p = _share(drawn, e)
        curve = _curve(a, b, e.direct)
        x, y = curve[len(curve) // 2]
        xs.append(x)
        ys.append(y)
        texts.append(labels.get(id(e), ""))
        hovers.append(f"{for_hover(truncate(a.label, 40))} → {for_hover(truncate(b.label, 40))}"
                      f"{'' if e.direct else ' (through rarer words)'}<br>{len(e.samples)} sample(s), {share:.0%} of "
                      f"those at {for_hover(truncate(a.label, 40))}"
                      + (f"<br>p = {p:.3f}: the mean probability they gave the first token after it" if p is not None
                         else "") + f"<br>samples {_listed(e.samples, 12)}")
    shown = [k for k, text in enumerate(texts) if text]  # labels only where there are: a label is an SVG element
    return [go.Scatter(x=xs, y=ys, mode="markers", hovertext=hovers, hoverinfo="text",
                       marker={"size": 8, "color": "rgba(0,0,0,0)"}, showlegend=False),
            go.Scatter(x=[xs[k] for k in shown], y=[ys[k] for k in shown], text=[texts[k] for k in shown],
                       mode="text", textposition="middle center", textfont={"size": 10, "color": "#334155"},
                       hoverinfo="skip", showlegend=False)]


def _curve(a: Drawn, b: Drawn, direct: bool = True, steps: int = 8) -> list[tuple[float, float]]:
    """The points of an edge: straight to the next column, an arc over the columns it skips (a
    straight line would run through their nodes); a folded edge arcs always, so that it never
    covers a direct edge between the same two nodes."""
    skipped = b.x - a.x - 1
    if skipped <= 0 and direct:
        return [(a.x, a.y), ((a.x + b.x) / 2, (a.y + b.y) / 2), (b.x, b.y)]
    lift = min(0.45 + 0.3 * skipped, 3.0)
    cx, cy = (a.x + b.x) / 2, max(a.y, b.y) + lift
    ts = [k / steps for k in range(steps + 1)]
    return [(round((1 - t) ** 2 * a.x + 2 * (1 - t) * t * cx + t * t * b.x, 3),
             round((1 - t) ** 2 * a.y + 2 * (1 - t) * t * cy + t * t * b.y, 3)) for t in ts]


def _node_traces(drawn: dict[str, Drawn], n: int, colour: str, answers: Answers | None) -> list[go.Scatter]:
    nodes = list(drawn.values())
    if colour == "answer" and answers is not None:
        order = {g.answer: k for k, g in enumerate(answers.groups)}
        by_group: dict[str, list[Drawn]] = {}
        for d in nodes:
            said = Counter(answers.answers.get(i) for i in d.samples)
            top = min(said, key=lambda a: (-said[a], order.get(a, math.inf) if a is not None else math.inf))
            name = (top if order.get(top, len(ANSWER_COLOURS)) < len(ANSWER_COLOURS) else "other answers") \
                if top is not None else "no answer"
            by_group.setdefault(name, []).append(d)
        names = sorted(by_group, key=lambda a: (0, order[a]) if a in order else (1 if a == "other answers" else 2, 0))
        return [_nodes(by_group[name], n, ANSWER_COLOURS[order[name]] if name in order else
                       OTHER if name == "other answers" else NONE_COLOUR, truncate(name, 30), answers)
                for name in names]
    probs = [d.prob for d in nodes if not d.key.startswith(("more:", "start"))]
    if any(p is not None for p in probs):
        plain = [d for d in nodes if d.prob is None]
        scored = [d for d in nodes if d.prob is not None]
        marker = {"color": [d.prob for d in scored], "colorscale": "RdYlGn", "cmin": 0, "cmax": 1, "showscale": True,
                  "colorbar": {"title": {"text": "mean p"}, "thickness": 12}}
        return [_nodes(plain, n, OTHER, "", None), _nodes(scored, n, marker, "", None)]
    return [_nodes(nodes, n, "#60a5fa", "", None)]


def _nodes(nodes: list[Drawn], n: int, colour, name: str, answers: Answers | None) -> go.Scatter:
    marker = dict(colour) if isinstance(colour, dict) else {"color": colour}
    marker.update(size=[_size(d, n) for d in nodes],
                  line={"width": 1, "color": "#334155"})
    hovers = []
    for d in nodes:
        hover = (f"<b>{for_hover(truncate(visible(d.text, multiline=False), 300))}</b><br>{len(d.samples)} of {n} "
                 f"samples: {_listed(d.samples)}")
        if d.prob is not None:
            hover += f"<br>mean p of its tokens {d.prob:.3f}"
        if d.varied:
            hover += f"<br>{d.varied} of them said rarer words inside it (folded)"
        if answers is not None:
            said = Counter(answers.answers.get(i) for i in d.samples).most_common(3)
            hover += "<br>answers: " + ", ".join(f"{html.escape(truncate(str(a), 20))} ({c})" for a, c in said)
        hovers.append(hover + "<br><i>click: mark these samples, branch from here</i>")
    return go.Scatter(x=[d.x for d in nodes], y=[d.y for d in nodes], mode="markers+text", name=name or None,
                      text=[for_hover(d.label) for d in nodes], textfont={"size": 11},
                      textposition=["top center" if _above(d) else "bottom center" for d in nodes],
                      hovertext=hovers, hoverinfo="text", marker=marker, showlegend=bool(name),
                      customdata=[f"{','.join(map(str, d.members)) or d.key}|{','.join(map(str, d.samples))}"
                                  for d in nodes])


def _above(d: Drawn) -> bool:
    """Whether a node's words go above its marker: in even columns, and below in odd ones, so the
    labels of neighbouring columns, wider than a column, do not run into each other. The share
    of the branch that leads to it goes on the other side."""
    return d.x % 2 == 0


def _shares(drawn: dict[str, Drawn], beside: dict[str, str], n: int) -> go.Scatter:
    """The labels of the branches into nodes that have one way in (``beside``), small and grey, on
    the other side of each marker than its words (markers as large as the nodes', unseen, so the
    text keeps clear of them)."""
    nodes = [drawn[key] for key in beside]
    return go.Scatter(x=[d.x for d in nodes], y=[d.y for d in nodes], mode="markers+text",
                      text=[beside[d.key] for d in nodes], textfont={"size": 9, "color": "#64748b"},
                      textposition=["bottom center" if _above(d) else "top center" for d in nodes],
                      marker={"size": [_size(d, n) for d in nodes], "color": "rgba(0,0,0,0)"},
                      hoverinfo="skip", showlegend=False)


def _size(d: Drawn, n: int) -> float:
    return 8 + 34 * math.sqrt(len(d.samples) / max(n, 1))


def _label(text: str) -> str:
    return truncate(" ".join(text.split()), LABEL_CHARS)


def _listed(samples: list[int], most: int = 24) -> str:
    shown = ", ".join(f"#{i}" for i in samples[:most])
    return shown + (f" … ({len(samples) - most} more)" if len(samples) > most else "")
