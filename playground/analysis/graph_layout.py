"""Where the sample graph's figure puts its nodes and labels (graph_figure.py draws them).

A node's words are wider than a column, and a column of a fan holds many nodes: placed by rule
alone ("words above the marker, the share below") labels ran into each other until neither was
readable. So the layout works in pixels. A node's column is its longest path from the prompt;
the nodes of a column are kept apart by their markers and the two lines of labels between them,
y being pixels (squeezed only when the figure would be taller than it may be, ``MAX_HEIGHT``); the
figure shows at first the columns that fit ``COLUMN_PX`` apart at the width it is laid out for
(``in_view``), and does not zoom vertically, so a label keeps its place in pixels. Then each label
is placed where it overlaps no other label and no marker, with columns at their narrowest: its
preferred side, else the other, else cut short, else left to the hover (``place_labels``).
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, field

from playground.analysis.display import truncate

FONT, SMALL = 11, 9  # px: a node's words; a branch's share and probability
CHAR_EM = 0.55  # a character's width in ems, about (Chromium draws the figures' font at 0.46-0.49, "m" 0.83)
LINE_EM = 1.25  # a label's height in ems (the glyphs' box is 1.1)
PAD = 2  # px between a marker and its labels
LABEL_CHARS, SHORT_CHARS = 18, 10  # a node's words as labelled; cut shorter where they do not fit
COLUMN_PX = 84  # px between columns at the narrowest the figure is drawn
X_MARGIN = 0.6  # columns of room left and right of the columns in view (a label is wider than a column)
ROW_PX = 54  # px an arc over one skipped column rises, about a row
MIN_HEIGHT, MAX_HEIGHT, BOTTOM = 420, 1400, 10  # px


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
    y: float = 0.0  # px (graph_figure draws y in pixels, 1:1 unless squeezed)


@dataclass
class DrawnEdge:
    source: str
    target: str
    samples: list[int] = field(default_factory=list)
    direct: bool = True  # False: through words fewer samples said (folded)
    probs: list[float] = field(default_factory=list)


def layout(drawn: dict[str, Drawn], edges: list[DrawnEdge]) -> None:
    """Place the nodes: x is the longest path from the prompt (every edge points right), y (in
    pixels) the mean height of where a node's samples come from, the nodes of one column kept
    apart by their markers and the two lines of labels between them (``_gap``)."""
    n = len(drawn["start"].samples) if "start" in drawn else 1
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
        below = None
        for d in column:
            d.y = wanted[d.key] if below is None else max(wanted[d.key], below.y + _gap(below, d, n))
            below = d
        shift = sum(d.y - wanted[d.key] for d in column) / len(column)
        for d in column:
            d.y = round(d.y - shift, 3)


def _gap(a: Drawn, b: Drawn, n: int) -> float:
    """Pixels between two nodes of a column: their markers' radii, and between them one node's
    words and the other's share (words go on one side of the markers of a column, shares on the
    other)."""
    return (size(a, n) + size(b, n)) / 2 + height(FONT) + height(SMALL) + 3 * PAD


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


@dataclass
class View:
    """What the figure shows: the x range in view (the columns up to ``last`` and a margin), the
    y range, the pixels per unit of y (``scale``: 1 unless the figure would be taller than
    ``MAX_HEIGHT``), the figure's height and top margin. At the width the figure is laid out for,
    or any wider, its columns are ``COLUMN_PX`` apart or more."""

    x0: float
    x1: float
    y0: float
    y1: float
    scale: float
    height: int
    top: int
    last: int  # the last column in view at first

    def px(self, x: float, y: float) -> tuple[float, float]:
        """A point in pixels from the plot's bottom left, its columns at their narrowest."""
        return (x - self.x0) * COLUMN_PX, (y - self.y0) * self.scale


def in_view(width: int, side: int) -> int:
    """The last column a figure ``width`` pixels wide shows at first, ``side`` pixels of it taken by
    its colour bar or legend: as many as fit ``COLUMN_PX`` apart, with a margin either side."""
    return max(1, int((width - 20 - side) / COLUMN_PX - 2 * X_MARGIN))


def view(drawn: dict[str, Drawn], edges: list[DrawnEdge], n: int, last: int, top: int) -> View:
    """The figure's ranges and height: every node, edge and label of an edge node inside, the
    figure ``MIN_HEIGHT`` to ``MAX_HEIGHT`` tall (its top margin ``top``, the title's)."""
    last = min(last, max(d.x for d in drawn.values()))
    ys = [d.y for d in drawn.values()]
    ys += [y for e in edges for _, y in curve(drawn[e.source], drawn[e.target], e.direct)]
    pad = max(size(d, n) for d in drawn.values()) / 2 + height(FONT) + 2 * PAD  # a label beyond the edge nodes
    low, high = min(ys), max(ys)
    room = MAX_HEIGHT - top - BOTTOM
    if high - low + 2 * pad <= room:
        scale, plot = 1.0, max(high - low + 2 * pad, MIN_HEIGHT - top - BOTTOM)
        extra = (plot - (high - low)) / 2
    else:  # too tall: squeezed, and the labels that no longer fit are left to the hover
        scale, plot = (room - 2 * pad) / max(high - low, 1.0), room
        extra = pad / scale
    return View(-X_MARGIN, last + X_MARGIN, round(low - extra, 3), round(high + extra, 3), scale,
                int(math.ceil(plot)) + top + BOTTOM, top, last)


def text_width(text: str, font: float) -> float:
    """About the pixels a label takes across (a wide East Asian character counts an em)."""
    return font * sum(1.0 if unicodedata.east_asian_width(c) in "WF" else CHAR_EM for c in text) + 2


def height(font: float) -> float:
    return font * LINE_EM


@dataclass
class Label:
    """A label as placed: its centre (in the figure's units), text, font size and ``kind``:
    "words" (a node's), "share" (of the branch into a node, beside it) or "edge" (halfway along
    an edge into a meeting point)."""

    x: float
    y: float
    text: str
    size: int
    kind: str


def place_labels(drawn: dict[str, Drawn], edges: list[DrawnEdge], n: int, at: View, on_edges: dict[int, tuple],
                 beside: dict[str, tuple]) -> list[Label]:
    """Every label placed where it overlaps no other label and no marker, columns at their
    narrowest: first the words of each node (the prompt, then the larger nodes first), above the
    marker in even columns and below in odd ones, else on the other side, else cut short, else
    left to the hover; then each branch's share beside its node (``beside``: node key -> the
    label and a shorter one), on the other side than the node's words; then the labels halfway
    along edges (``on_edges``: edge id -> the two), in a gap between columns; each where it first
    fits, else left to the hover."""
    taken: dict[int, list[tuple]] = {}

    def cells(b: tuple) -> range:
        return range(int(b[0] // COLUMN_PX), int(b[1] // COLUMN_PX) + 1)

    def first(candidates: list[tuple], kind: str) -> Label | None:
        for x, y, text, font in candidates:
            cx, cy = at.px(x, y)
            w, h = text_width(text, font), height(font)
            b = (cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2)
            if not any(b[0] < o[1] and o[0] < b[1] and b[2] < o[3] and o[2] < b[3]
                       for cell in cells(b) for o in taken.get(cell, ())):
                for cell in cells(b):
                    taken.setdefault(cell, []).append(b)
                return Label(x, y, text, font, kind)
        return None

    def beyond(d: Drawn, side: int, font: int) -> float:  # the centre of a label on one side of a marker
        return d.y + side * (size(d, n) / 2 + PAD + height(font) / 2) / at.scale

    for d in drawn.values():  # every marker is in the way of the labels (its own keep clear of it)
        cx, cy = at.px(d.x, d.y)
        r = size(d, n) / 2
        for cell in cells((cx - r, cx + r)):
            taken.setdefault(cell, []).append((cx - r, cx + r, cy - r, cy + r))
    placed, sides = [], {}
    for d in sorted(drawn.values(), key=lambda d: (d.key != "start", -len(d.samples), d.x, d.y)):
        texts = [d.label] + ([label(d.text, SHORT_CHARS)] if len(d.label) > SHORT_CHARS + 1 else [])
        prefer = 1 if above(d) else -1
        placed.append(first([(d.x, beyond(d, side, FONT), text, FONT) for text in texts
                             for side in (prefer, -prefer)], "words"))
        if placed[-1] is not None:
            sides[d.key] = 1 if placed[-1].y > d.y else -1
    for key in sorted(beside, key=lambda key: (-len(drawn[key].samples), drawn[key].x)):
        d = drawn[key]
        side = -sides.get(key, 1 if above(d) else -1)
        placed.append(first([(d.x, beyond(d, s, SMALL), text, SMALL) for text in beside[key]
                             for s in ((side,) if key in sides else (side, -side))], "share"))
    for e in edges:
        if id(e) in on_edges:
            points = curve(drawn[e.source], drawn[e.target], e.direct)
            # in a gap between columns first, nearest the middle: at a column, a label over an arc
            # sits by that column's node and reads as that node's
            middle = (len(points) - 1) / 2
            order = sorted(range(len(points)), key=lambda k: (abs(points[k][0] % 1 - 0.5) > 0.25, abs(k - middle)))
            placed.append(first([(*points[k], text, SMALL) for k in order for text in on_edges[id(e)]], "edge"))
    return [p for p in placed if p is not None]


def curve(a: Drawn, b: Drawn, direct: bool = True, steps: int = 8) -> list[tuple[float, float]]:
    """The points of an edge: straight to the next column, an arc over the columns it skips (a
    straight line would run through their nodes); a folded edge arcs always, so that it never
    covers a direct edge between the same two nodes."""
    skipped = b.x - a.x - 1
    if skipped <= 0 and direct:
        return [(a.x, a.y), ((a.x + b.x) / 2, (a.y + b.y) / 2), (b.x, b.y)]
    lift = min(0.45 + 0.3 * skipped, 3.0) * ROW_PX
    cx, cy = (a.x + b.x) / 2, max(a.y, b.y) + lift
    ts = [k / steps for k in range(steps + 1)]
    return [(round((1 - t) ** 2 * a.x + 2 * (1 - t) * t * cx + t * t * b.x, 3),
             round((1 - t) ** 2 * a.y + 2 * (1 - t) * t * cy + t * t * b.y, 3)) for t in ts]


def above(d: Drawn) -> bool:
    """Whether a node's words go above its marker at best: in even columns, and below in odd ones,
    so the labels of neighbouring columns, wider than a column, do not run into each other. The
    share of the branch that leads to it goes on the other side."""
    return d.x % 2 == 0


def size(d: Drawn, n: int) -> float:
    """A node's marker's diameter in px."""
    return 8 + 34 * math.sqrt(len(d.samples) / max(n, 1))


def label(text: str, chars: int = LABEL_CHARS) -> str:
    return truncate(" ".join(text.split()), chars)
