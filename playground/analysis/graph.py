"""The sample graph: the n samples as paths through shared word spans, which part and meet again.

The divergence tree shows where samples part and never lets them meet: two samples that differ in
their first word and then say the same sentence sit in different branches for good. In the graph
a node is a span of words, a sample is a path through nodes, samples share a node while they say
the same words, part where they differ, and meet again where they later say the same words
(graph_align.py: a partial-order alignment, no cycles, each node at most once per sample). Long
shared runs are one node. Words match after light normalisation (case, punctuation at a word's
edges; words are split at whitespace), or also by meaning when the caller passes word embeddings
(``synonyms``). Each node keeps every sample's exact text there, so a sample's path reads back its
text exactly, and the token it starts at, so a page can branch from it.

Pure over one run: the Graph tab, the report, ``analyze --graph`` and Compare all read
``sample_graph(run)``.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
import unicodedata
from dataclasses import dataclass, field

import numpy as np
import regex

from playground.analysis.display import counted, pieces
from playground.analysis.graph_align import Aligner
from playground.analysis.meaning import cluster_by_similarity
from playground.bundle_format import collector_paused
from playground.run import Run, Sample
from playground.text import fold

NORMALISATION = ("words split at whitespace (each character a word in scripts written without spaces), compared "
                 "case-folded in compatibility form without the punctuation at their edges")
WORD_SIMILARITY = 0.9  # words whose embeddings are this similar count as one (a lone word's is less sure than a text's)
# A word: what whitespace parts, or one character (with its marks) of a script written without spaces (Chinese,
# Japanese, Thai, ...), where samples could otherwise share no word and never meet.
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
_WORD = regex.compile(rf"\s*((?=[{_UNSPACED}])\X|[^\s{_UNSPACED}]+)")  # \X: a character with its marks


@dataclass
class Visit:
    """Sample ``sample`` at a node: its exact ``text`` there (leading whitespace included), the
    token its first word starts in (``token``; None without token ids) and how many tokens it
    spans, and the probability of that first token (None without logprobs)."""

    sample: int
    text: str
    token: int | None
    tokens: int
    prob: float | None = None


@dataclass
class Node:
    """Words some samples said at this point; ``text`` is how the lowest-numbered of them wrote
    it (trimmed), ``key`` the words as compared; ``prob`` the mean probability of their tokens."""

    id: int
    key: str
    text: str
    words: int
    visits: list[Visit]
    prob: float | None = None

    @property
    def samples(self) -> list[int]:
        return [v.sample for v in self.visits]

    @property
    def count(self) -> int:
        return len(self.visits)

    def visit(self, sample: int) -> Visit | None:
        return self._by_sample.get(sample)

    @functools.cached_property
    def _by_sample(self) -> dict[int, Visit]:
        return {v.sample: v for v in self.visits}


@dataclass
class Edge:
    """Samples that went from ``source`` straight to ``target``: their ``share`` of the source's
    samples, and ``prob``, the mean probability they gave the target's first token."""

    source: int
    target: int
    samples: list[int]
    share: float
    prob: float | None = None


@dataclass
class SampleGraph:
    """The nodes, the edges between them, and each sample's path (its node ids, in order)."""

    nodes: list[Node]  # by id, in a topological order: ids increase along every path
    edges: list[Edge]
    paths: dict[int, list[int]]  # sample index -> its nodes
    seeds: dict[int, int | None] = field(default_factory=dict)
    normalisation: str = NORMALISATION

    def text_of(self, sample: int) -> str:
        """The sample's text read back from its path (a text of whitespace only reads back empty)."""
        return "".join(self.nodes[v].visit(sample).text for v in self.paths[sample])

    def successors(self) -> dict[int, list[Edge]]:
        out: dict[int, list[Edge]] = {}
        for e in self.edges:
            out.setdefault(e.source, []).append(e)
        return out

    def predecessors(self) -> dict[int, list[int]]:
        """Node -> the nodes samples came from (-1: a sample's path starts there)."""
        into: dict[int, list[int]] = {}
        for path in self.paths.values():
            if path:
                into.setdefault(path[0], [])
                if -1 not in into[path[0]]:
                    into[path[0]].append(-1)
        for e in self.edges:
            into.setdefault(e.target, []).append(e.source)
        return into

    def meeting_points(self) -> list[int]:
        """Nodes samples reach from two or more places (a node where some samples' paths start
        counts its start as a place)."""
        return sorted(v for v, came in self.predecessors().items() if len(came) > 1)

    def branch_points(self) -> list[int]:
        """Nodes whose samples go two or more ways (stopping there is one way)."""
        out = self.successors()
        return [node.id for node in self.nodes
                if len(out.get(node.id, [])) + (sum(len(e.samples) for e in out.get(node.id, [])) < node.count) > 1]

    def to_dict(self) -> dict:
        """The graph as JSON-ready data (``analyze --graph``; the README names every field)."""
        return {
            "normalisation": self.normalisation,
            "samples": len(self.paths),
            "nodes": [{"id": n.id, "text": n.text, "key": n.key, "words": n.words, "count": n.count,
                       "samples": n.samples, "prob": _rounded(n.prob),
                       "visits": [{"sample": v.sample, "text": v.text, "token": v.token, "tokens": v.tokens}
                                  for v in n.visits]} for n in self.nodes],
            "edges": [{"source": e.source, "target": e.target, "count": len(e.samples), "samples": e.samples,
                       "share": round(e.share, 4), "prob": _rounded(e.prob)} for e in self.edges],
            "paths": [{"sample": i, "seed": self.seeds.get(i), "nodes": path} for i, path in self.paths.items()],
            "meeting_points": self.meeting_points(),
            "branch_points": self.branch_points(),
        }


@dataclass
class Place:
    """Where a node (or a stretch of a path) is in one sample: characters ``start:end`` of its
    text, and the token it starts in (None without token ids)."""

    sample: int
    start: int
    end: int
    token: int | None


def node_places(graph: SampleGraph, picked: str) -> list[Place]:
    """Where a drawn node is in each of its samples. ``picked`` is a drawn node's ``customdata``
    (graph_figure.py): "12,13|0,4" (graph nodes 12 and 13, joined in the drawing; samples 0 and
    4), "more:12|3,5" (the rare words samples 3 and 5 went on with after node 12, to their end)
    or "start|..." (the samples' whole texts)."""
    nodes, _, listed = picked.partition("|")
    samples = [int(i) for i in listed.split(",") if i.strip()]
    places = []
    for i in samples:
        path, texts = graph.paths[i], [graph.nodes[v].visit(i) for v in graph.paths[i]]
        offsets = [0]
        for visit in texts:
            offsets.append(offsets[-1] + len(visit.text))
        if nodes == "start":
            at = range(len(path))
        elif nodes.startswith("more:"):
            after = nodes[5:]
            at = range(0 if after == "start" else path.index(int(after)) + 1, len(path))
        else:
            wanted = {int(v) for v in nodes.split(",")}
            at = [k for k, v in enumerate(path) if v in wanted]
        if at:
            first, last = at[0], at[-1]
            places.append(Place(i, offsets[first], offsets[last + 1], texts[first].token))
    return places


def graph_sentence(graph: SampleGraph) -> str:
    """The graph in a sentence or two, for the page above the figure."""
    walked = [i for i, path in graph.paths.items() if path]
    if not walked:
        return "No words yet."
    meets = graph.meeting_points()
    parts = len(graph.branch_points())  # nodes where paths part, as the JSON's branch_points lists them
    if len({graph.paths[i][0] for i in walked}) > 1:  # parted at the prompt, which is no node
        where = "part at their first word" + (f" and at {counted(parts, 'later point')}" if parts else "")
    elif parts:
        where = f"part at {counted(parts, 'point')}"
    else:
        where = ""
    if where:
        where += f" and **meet again at {counted(len(meets), 'point')}**" if meets else " and **never meet again**"
    else:
        where = "never part"
    said = f"**{counted(len(walked), 'sample')}, {counted(len(graph.nodes), 'node')}**: the samples {where}."
    shared = [node for node in graph.nodes if node.count > 1]
    if shared:
        most = max(shared, key=lambda node: (node.count, node.words, -node.id))
        said += f" The most samples share “{_short(most.text)}” ({most.count} samples, {_words(most.words)})."
    return said


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def words(text: str) -> list[tuple[str, int]]:
    """The text cut into words (at whitespace; each character of a script written without spaces
    a word of its own) as spans that together are the text: each span is a word with
    the whitespace before it (the last also takes the whitespace after it), with the offset of
    its first non-space character. A text of whitespace only has no words: like an empty text, it
    has no path through the graph (a node of no words would be drawn with no text)."""
    spans = [(m.group(), m.start(1)) for m in _WORD.finditer(text)]
    if not spans:
        return []
    tail = text[sum(len(s) for s, _ in spans):]
    if tail:
        spans[-1] = (spans[-1][0] + tail, spans[-1][1])
    return spans


@functools.lru_cache(maxsize=200_000)  # a run says the same words again and again
def normalise(word: str) -> str:
    """A word as compared: Unicode-compatibility form, lower case, without the punctuation at its
    edges ("Mat." and "mat" match; "don't" keeps its apostrophe); a word of punctuation only
    stays itself ("..." matches "...")."""
    word = fold(word.strip())
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("P"):
        end -= 1
    return word[start:end] or word


def word_keys(run: Run) -> list[str]:
    """Every distinct word key of the run, in order of first use: what a caller embeds to pass
    ``synonyms`` (``synonyms_by_meaning``)."""
    seen: dict[str, None] = {}
    for s in run.samples:
        for span, _ in words(s.text):
            seen.setdefault(normalise(span), None)
    return list(seen)


def synonyms_by_meaning(keys: list[str], embeddings: np.ndarray, threshold: float) -> dict[str, str]:
    """Key -> the key it counts as: words whose embeddings are at least ``threshold`` similar (by
    cosine, the Set tab's greedy grouping) count as the first of them."""
    labels = cluster_by_similarity(embeddings, threshold)
    first: dict[int, str] = {}
    return {key: first.setdefault(label, key) for key, label in zip(keys, labels, strict=True)}


def sample_graph(run: Run, synonyms: dict[str, str] | None = None, how: str | None = None) -> SampleGraph:
    """The run's sample graph. ``synonyms``: word key -> the key it counts as (words that mean
    the same by an embedding model); ``how``: what the normalisation was, for the record."""
    with collector_paused():  # some 10^5 small objects that all live on, none in a cycle
        return _build(run, synonyms, how)


def _build(run: Run, synonyms: dict[str, str] | None, how: str | None) -> SampleGraph:
    aligner = Aligner()
    spans: dict[int, list[tuple[str, int]]] = {}
    word_nodes: dict[int, list[int]] = {}
    for s in run.samples:
        spans[s.index] = words(s.text)
        keys = [normalise(span) for span, _ in spans[s.index]]
        if synonyms:
            keys = [synonyms.get(k, k) for k in keys]
        word_nodes[s.index] = aligner.add(keys)
    chains = _reading_order(_chains(aligner, word_nodes), word_nodes, aligner.order)
    return _assemble(run, aligner, chains, spans, word_nodes, how or NORMALISATION)


def _chains(aligner: Aligner, word_nodes: dict[int, list[int]]) -> list[list[int]]:
    """The word nodes in runs that are one node each: a node's only successor, whose only
    predecessor it is, with the same samples (as many: every sample there came from it)."""
    samples: dict[int, list[int]] = {}
    nexts: dict[int, set[int]] = {}
    prevs: dict[int, set[int]] = {}
    for i, path in word_nodes.items():
        for v in path:
            samples.setdefault(v, []).append(i)
        for u, v in zip(path, path[1:]):
            nexts.setdefault(u, set()).add(v)
            prevs.setdefault(v, set()).add(u)
        if path:
            prevs.setdefault(path[0], set()).add(-1)  # a start is a predecessor of its own
    # w continues u's chain when u leads only to w, w is reached only from u (and starts no path),
    # and the same samples pass both; every other node starts a chain.
    continues: set[int] = set()
    for u, ws in nexts.items():
        if len(ws) == 1 and len(prevs[w := next(iter(ws))]) == 1 and len(samples[w]) == len(samples[u]):
            continues.add(w)
    chains: list[list[int]] = []
    for v in sorted(samples, key=aligner.order.__getitem__):
        if v in continues:
            continue
        chain = [v]
        while len(nexts.get(chain[-1], ())) == 1 and (w := next(iter(nexts[chain[-1]]))) in continues:
            chain.append(w)
        chains.append(chain)
    return chains


def _reading_order(chains: list[list[int]], word_nodes: dict[int, list[int]], order: list[float]) -> list[list[int]]:
    """The nodes in a topological order that reads like the samples: of the nodes whose
    predecessors are all placed, the one of the lowest-numbered sample first (so sample 0's
    nodes come in its order, and ids increase along every path)."""
    chain_of = {v: k for k, chain in enumerate(chains) for v in chain}
    lowest: dict[int, int] = {}
    after: dict[int, set[int]] = {}
    for i, path in word_nodes.items():
        ks = [chain_of[v] for v in path]
        for k in ks:
            lowest.setdefault(k, i)
        for a, b in zip(ks, ks[1:]):
            if a != b:
                after.setdefault(a, set()).add(b)
    waiting = [0] * len(chains)
    for nexts in after.values():
        for b in nexts:
            waiting[b] += 1
    ready = [(lowest[k], order[chains[k][0]], k) for k in range(len(chains)) if not waiting[k]]
    heapq.heapify(ready)
    placed = []
    while ready:
        k = heapq.heappop(ready)[2]
        placed.append(chains[k])
        for b in sorted(after.get(k, ())):
            waiting[b] -= 1
            if not waiting[b]:
                heapq.heappush(ready, (lowest[b], order[chains[b][0]], b))
    return placed


def _assemble(run: Run, aligner: Aligner, chains: list[list[int]], spans: dict[int, list[tuple[str, int]]],
              word_nodes: dict[int, list[int]], how: str) -> SampleGraph:
    node_of = {v: k for k, chain in enumerate(chains) for v in chain}
    by_sample = {s.index: s for s in run.samples}
    paths: dict[int, list[int]] = {}
    visits: list[list[Visit]] = [[] for _ in chains]
    token_sums = [[0.0, 0] for _ in chains]
    for i, path in word_nodes.items():
        sample = by_sample[i]
        starts = _token_starts(sample, [offset for _, offset in spans[i]])
        probs = _token_probs(sample)
        nodes = []
        for w, v in enumerate(path):
            k = node_of[v]
            if nodes and nodes[-1] == k:
                continue  # the next word of the same span node
            nodes.append(k)
            last = w + len(chains[k]) - 1
            text = "".join(span for span, _ in spans[i][w:last + 1])
            first = starts[w] if starts else None
            stop = (starts[last + 1] if last + 1 < len(starts) else len(sample.token_ids)) if starts else None
            tokens = max(0, stop - first) if first is not None else 0
            p = probs[first] if probs and first is not None and first < len(probs) else None
            visits[k].append(Visit(i, text, first, tokens, p))
            if probs and first is not None:
                seen = [x for x in probs[first:first + tokens] if x is not None]
                token_sums[k][0] += sum(seen)
                token_sums[k][1] += len(seen)
        paths[i] = nodes
    nodes = []
    for k, chain in enumerate(chains):
        keys = " ".join(aligner.keys[v] for v in chain)
        first = min(visits[k], key=lambda v: v.sample)
        total, counted = token_sums[k]
        nodes.append(Node(k, keys, first.text.strip(), len(chain), sorted(visits[k], key=lambda v:
                          v.sample), total / counted if counted else None))
    return SampleGraph(nodes, _edges(nodes, paths), paths, {s.index: s.seed for s in run.samples}, how)


def _edges(nodes: list[Node], paths: dict[int, list[int]]) -> list[Edge]:
    taken: dict[tuple[int, int], list[int]] = {}
    for i, path in paths.items():
        for u, v in zip(path, path[1:]):
            taken.setdefault((u, v), []).append(i)
    edges = []
    for (u, v), samples in sorted(taken.items()):
        probs = [p for i in samples if (p := nodes[v].visit(i).prob) is not None]
        edges.append(Edge(u, v, sorted(samples), len(samples) / nodes[u].count,
                          sum(probs) / len(probs) if probs else None))
    return edges


def _token_starts(sample: Sample, offsets: list[int]) -> list[int]:
    """The token each word starts in (by the characters of the tokens' pieces); none without
    token ids, or without the text of every token (a bundle another client wrote). When the
    pieces do not spell the text exactly (a stop string cut it), the offsets are read against
    the pieces all the same, clamped to the last token."""
    if not sample.token_ids or len(sample.token_texts) < len(sample.token_ids):
        return []
    ends, total = [], 0
    for piece in pieces(sample):
        total += len(piece)
        ends.append(total)
    last = len(sample.token_ids) - 1
    return [min(bisect.bisect_right(ends, offset), last) for offset in offsets]


def _token_probs(sample: Sample) -> list[float | None]:
    if not sample.logprobs:
        return []
    return [math.exp(lp.logprob) if lp is not None and lp.logprob is not None else None for lp in sample.logprobs]


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _words(count: int) -> str:
    return f"{count} word{'s' if count != 1 else ''}"
