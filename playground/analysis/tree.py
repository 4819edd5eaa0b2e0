"""The divergence tree: the prefix trie of the n token sequences, single-child chains collapsed.

Read from the root, it answers "where did the samples part, how many went each way, and how
likely was the token that split them": each branch is a run of tokens some samples shared, and a
new branch starts exactly where their token ids first differ.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import plotly.graph_objects as go

from playground.analysis.display import alternative, for_hover, height_for, joined, pieces, truncate, visible
from playground.run import Run

LABEL_WIDTH = 24  # characters of a branch's text shown in the figure; the hover has it all


@dataclass
class Branch:
    """A run of tokens taken by ``samples``; ``start`` is the position of its first token.

    ``prob`` is the probability of the branching (first) token and ``alternatives`` the top-k
    at that position, as (visible text, probability): both None/empty without logprobs. An
    ``end`` branch has no tokens: it holds samples that stopped where others went on. An
    ``others`` branch stands for that many small branches folded together (``fold``); its
    ``prob`` is theirs together (they part at one position with different tokens: the chance of
    taking any of them).
    """

    key: str
    parent: str | None
    start: int
    token_ids: list[int]
    texts: list[str]
    samples: list[int]
    end: bool = False
    prob: float | None = None
    alternatives: list[tuple[str, float]] = field(default_factory=list)
    children: list[Branch] = field(default_factory=list)
    others: int = 0

    @property
    def count(self) -> int:
        return len(self.samples)

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def leaves(self) -> list[Branch]:
        return [b for b in self.walk() if not b.children]


def divergence_tree(run: Run) -> Branch:
    """The root (the prompt, taken by every sample) with the samples' branches below it."""
    root = Branch("root", None, 0, [], [], [s.index for s in run.samples])
    _grow(root, run, 0)
    return root


def fold(branch: Branch, below: int) -> Branch:
    """The tree with, under each branch, the children taken by fewer than ``below`` samples
    folded into one "others" leaf: with many samples, a tree of every single-sample branch is
    too wide to read (and to draw); the large branches are where the samples part."""
    small = [c for c in branch.children if c.count < below and not c.end]
    children = [fold(c, below) for c in branch.children if c not in small or len(small) == 1]
    if len(small) > 1:
        samples = sorted(i for c in small for i in c.samples)
        probs = [c.prob for c in small]
        together = min(1.0, sum(probs)) if None not in probs else None
        children.append(Branch(f"{branch.key}/others", branch.key, small[0].start, [], [], samples,
                               prob=together, others=len(small)))
    return dataclasses.replace(branch, children=children)


def fold_for(n: int) -> int | None:
    """The fold a tree of ``n`` samples is drawn with: none up to 32 samples."""
    return None if n <= 32 else max(2, math.ceil(n / 64))

def prefix_order(sequences: list[list[int]],
                 known: dict[tuple[int, int], int] | None = None) -> tuple[list[int], list[int]]:
    """The samples in the tree's order, and how many leading tokens each shares with the one before.

    The lexicographic order of the token id sequences is the trie's depth-first order: samples that
    share a prefix sit together, a sample that stopped where others went on comes before them (the
    tree's ``end`` branch), and identical samples keep their index order. Returns the sample indices
    in that order and, for each position in it, the length of the prefix shared with the previous
    sample (0 for the first): a C-level sort of the lists themselves, then one pass over neighbours.

    ``known``: what an earlier call found for pairs of neighbours, for sequences that have only
    grown since (a run in flight): each pair's comparison goes on from there, so identical samples
    (the same-seed mode) cost their new tokens, not their whole length, on every update.
    """
    order = sorted(range(len(sequences)), key=sequences.__getitem__)
    shared = [0] * len(order)
    for rank in range(1, len(order)):
        pair = order[rank - 1], order[rank]
        a, b = sequences[pair[0]], sequences[pair[1]]
        stop = min(len(a), len(b))
        k = min(known.get(pair, 0), stop) if known is not None else 0
        while k < stop and a[k] == b[k]:
            k += 1
        shared[rank] = k
        if known is not None:
            known[pair] = k
    return order, shared


def _grow(branch: Branch, run: Run, pos: int) -> None:
    """Split ``branch``'s samples (who share every token before ``pos``) by their token at ``pos``."""
    ids = {i: run.samples[i].token_ids for i in branch.samples}
    ended = [i for i in branch.samples if len(ids[i]) == pos]
    groups: dict[int, list[int]] = {}
    for i in branch.samples:
        if len(ids[i]) > pos:
            groups.setdefault(ids[i][pos], []).append(i)
    if not groups:
        return  # everyone stopped here: a leaf
    if ended:
        branch.children.append(Branch(f"{branch.key}/end", branch.key, pos, [], [], ended, end=True))
    for token_id, group in groups.items():
        stop = pos + 1  # extend while the whole group agrees and nobody stops
        while all(len(ids[i]) > stop for i in group) and len({ids[i][stop] for i in group}) == 1:
            stop += 1
        first = run.samples[group[0]]
        child = Branch(f"{branch.key}/{token_id}", branch.key, pos, first.token_ids[pos:stop],
                       pieces(first)[pos:stop], group)
        child.prob, child.alternatives = _branch_point(run, group, pos)
        branch.children.append(child)
        _grow(child, run, stop)


def _branch_point(run: Run, group: list[int], pos: int) -> tuple[float | None, list[tuple[str, float]]]:
    """Probability of the token at ``pos`` and the top-k there, from the first sample in the
    group that recorded logprobs (all of them saw the same context)."""
    for i in group:
        logprobs = run.samples[i].logprobs
        if logprobs and pos < len(logprobs) and logprobs[pos].logprob is not None:
            lp = logprobs[pos]
            alternatives = [(visible(alternative(text, tid), multiline=False), math.exp(value))
                            for tid, value, text in lp.top]
            return math.exp(lp.logprob), alternatives
    return None, []


def tree_figure(run: Run, maxdepth: int = 8, fold_below: int | None = -1) -> go.Figure:
    """The tree as a left-to-right icicle: width of a box = samples that took the branch.

    Labels are cut to LABEL_WIDTH characters; the hover shows the full text with token
    boundaries, the samples, and the branching token's probability and alternatives. Deeper
    levels than ``maxdepth`` appear when a branch is clicked. Colour is the branching token's
    probability when logprobs were recorded; the prompt and 'end' boxes, which have no branching
    token, are coloured as certain. Branches of fewer than ``fold_below`` samples are folded into
    one "others" box per parent (default: ``fold_for(n)``).
    """
    root = divergence_tree(run)
    below = fold_for(run.n) if fold_below == -1 else fold_below
    if below:
        root = fold(root, below)
    branches = list(root.walk())
    labels, hovers = [], []
    for b in branches:
        if b is root:
            labels.append("prompt")
            hovers.append(f"prompt: {b.count} sample(s)")
            continue
        if b.end:
            labels.append("⏹ end")
            hovers.append(f"stopped after token {b.start - 1}<br>samples {b.samples}")
            continue
        if b.others:
            labels.append(f"… {b.others} branches")
            hovers.append(f"{b.others} branches of fewer than {below} samples each, folded: {b.count} sample(s)"
                          f"<br>samples {truncate(str(b.samples), 300)}"
                          + (f"<br>p(any of their tokens) = {b.prob:.3f}" if b.prob is not None else ""))
            continue
        labels.append(for_hover(truncate(visible(b.text, multiline=False), LABEL_WIDTH)))
        hover = (f"<b>{for_hover(truncate(joined(b.texts), 600))}</b>"
                 f"<br>tokens {b.start}–{b.start + len(b.token_ids) - 1}"
                 f"<br>{b.count} sample(s): {b.samples}")
        if b.prob is not None:
            hover += f"<br>p(branch token) = {b.prob:.3f}"
            if b.alternatives:  # none for a token a branch forced (What if's first tokens)
                hover += "<br>top-k: " + for_hover(", ".join(f"{t} {p:.3f}" for t, p in b.alternatives))
        hovers.append(hover)
    icicle = go.Icicle(  # customdata: "sample,token" where a branch starts, for a page to branch from it
        ids=[b.key for b in branches], parents=[b.parent or "" for b in branches], labels=labels,
        customdata=[f"{b.samples[0]},{b.start}" if b.samples else "" for b in branches],
        values=[b.count for b in branches], branchvalues="total", hovertext=hovers, hoverinfo="text",
        textinfo="label+value", tiling={"orientation": "h"}, maxdepth=maxdepth, sort=False,
    )
    probs = [b.prob for b in branches]
    if any(p is not None for p in probs):
        icicle.marker = {"colors": [1.0 if p is None else p for p in probs], "colorscale": "RdYlGn",
                         "cmin": 0, "cmax": 1, "showscale": True, "colorbar": {"title": "p(branch)"}}
    fig = go.Figure(icicle)
    folded = f"; branches of fewer than {below} samples folded" if below else ""
    fig.update_layout(title=f"Divergence tree (box height = samples that took the branch{folded})",
                      height=height_for(len(root.leaves()), per_row=28, minimum=360),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig
