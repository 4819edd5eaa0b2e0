"""Partial-order alignment of word sequences into one graph with no cycles (the sample graph's core).

The samples are added one at a time to a directed acyclic graph of words (as in POA, Lee et al.
2002, "Multiple sequence alignment using partial order graphs"): a sample's word joins an existing
node where the alignment matches it, and gets a node of its own otherwise. Full POA aligns each
sequence to the whole graph by dynamic programming, O(L x |graph|) a sample, and the graph grows
with n: at n=256 x 100 words that is seconds to minutes in Python. Here the alignment is sparse:

- **Anchors.** A word may join a node only through a phrase some earlier sample said there: the
  word trigrams of every sample's path are indexed (with a start and an end mark, so a shared
  first or last word counts), and a new sample's trigrams that are in the index propose their
  nodes. A lone "the" in the middle of two unrelated sentences proposes nothing, so common words
  do not tie every sample together.
- **One chain.** Of the proposed (position, node) matches the sample keeps the heaviest chain that
  is increasing in both its word positions and the nodes' places in a topological order of the
  graph (a heaviest increasing subsequence, by a Fenwick tree), a match that continues the
  previous one along an existing edge weighing a little more, so a sample stays on one branch
  while it can.
- **Extension.** Between two kept matches the sample follows existing edges word by word from
  both sides (the shared prefix of a trie, a shared last word); a short stretch left over is lined
  up (longest common subsequence) with the words other samples said between the same two nodes,
  so a lone shared word between two differences meets too ("The cat sat down" and "A dog sat
  up" meet at "sat"), in a longer stretch only a word of four letters or more (not every "a" and
  "the" two sentences share in order); the words left over get new nodes, placed in the order
  between their neighbours.

Every node keeps a place in one topological order, and a sample's nodes are strictly increasing
in it, so every edge points forward: no cycles by construction, and a sample passes a node at most
once. Cost: O(L x c log(L x c)) a sample, c the bounded candidates of a word (``PLACES``), so
O(n x L log L) for the run. Deterministic: samples in index order, ties broken by node.
"""

from __future__ import annotations


class _Mark(str):
    """The start or end mark: a key no word can have (a word's key is a plain str, this is not)."""

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


START, END = 0, 1  # the nodes of the marks every path starts and ends at (not words: never shown)
MARKS = (_Mark("^"), _Mark("$"))
ANCHOR = 3  # words in an anchoring phrase
CAP = 8  # places a phrase is remembered at: a very common phrase proposes the first CAP
PLACES = 6  # nodes a word may be matched to at most
LOCAL = 16  # words (and nodes of other samples) a stretch between two matches may have for its lone words to meet
LONE = 4  # words of a stretch in which any lone shared word meets
CONTENT = 4  # letters of a lone shared word that meets in a longer stretch (not "a", "and", "the")
CONTINUE = 0.5  # weight of a match that follows an edge from the previous match
_GAP = 2.0**16  # spacing of the order values after renumbering


class Aligner:
    """The growing graph: ``add(keys)`` aligns one sample's words and returns its nodes."""

    def __init__(self):
        self.keys: list[str] = list(MARKS)
        self.order: list[float] = [0.0, 2.0**52]
        self.count: list[int] = [0, 0]  # samples through each node
        self.succ: list[dict[str, list[int]]] = [{}, {}]
        self.pred: list[dict[str, list[int]]] = [{}, {}]
        self.edges: set[tuple[int, int]] = set()
        self.phrases: dict[tuple[str, ...], list[tuple[int, ...]]] = {}
        self.said: dict[tuple[str, ...], list[int]] = {}  # the words of each distinct sample -> its path

    def add(self, words: list[str]) -> list[int]:
        """Align one sample (its words' keys) and return the node of each word, in order. A sample
        that says exactly what an earlier one said takes its path (low temperatures make many)."""
        if not words:
            return []
        said = tuple(words)
        if said in self.said:
            path = self.said[said]
            for v in path:
                self.count[v] += 1
            return path
        self.said[said] = path = self._align(words)
        return path

    def _align(self, words: list[str]) -> list[int]:
        keys = [MARKS[0], *words, MARKS[1]]
        chain = self._chain(keys, self._proposals(keys))
        nodes: list[int | None] = [None] * len(keys)
        for p, v in chain:
            nodes[p] = v
        for (a, va), (b, vb) in zip(chain, chain[1:]):
            if b > a + 1:
                self._fill(keys, nodes, a, va, b, vb)
        path = [v for v in nodes if v is not None]
        for u, v in zip(path, path[1:]):
            if (u, v) not in self.edges:
                self.edges.add((u, v))
                self.succ[u].setdefault(self.keys[v], []).append(v)
                self.pred[v].setdefault(self.keys[u], []).append(u)
        for v in path[1:-1]:
            self.count[v] += 1
        for t in range(len(path) - ANCHOR + 1):
            self._remember(tuple(keys[t:t + ANCHOR]), tuple(path[t:t + ANCHOR]))
        for t in range(len(path) - 1):
            if _content(keys[t]) and _content(keys[t + 1]):
                self._remember((keys[t], keys[t + 1]), (path[t], path[t + 1]))
        return path[1:-1]

    def _remember(self, phrase: tuple[str, ...], here: tuple[int, ...]) -> None:
        places = self.phrases.setdefault(phrase, [])
        if len(places) < CAP and here not in places:
            places.append(here)

    def _proposals(self, keys: list[str]) -> dict[int, list[int]]:
        """Position -> the nodes its anchoring phrases propose (the marks always match): at most
        ``PLACES``, those most phrases agree on (then the busiest), so that a text of a few words
        said over and over costs no more than another."""
        found: dict[int, dict[int, int]] = {0: {START: 1}, len(keys) - 1: {END: 1}}
        self._vote(found, enumerate(zip(*(keys[d:] for d in range(ANCHOR)))))
        pairs = ((t, pair) for t, pair in enumerate(zip(keys, keys[1:])) if _content(pair[0]) and _content(pair[1]))
        self._vote(found, pairs, covered=set(found))  # a pair proposes only where no trigram did
        count = self.count
        return {p: sorted(votes) if len(votes) <= PLACES else
                sorted(sorted(votes, key=lambda v: (-votes[v], -count[v], v))[:PLACES])
                for p, votes in found.items()}

    def _vote(self, found: dict[int, dict[int, int]], windows, covered: set[int] | tuple = ()) -> None:
        """Each remembered place of each phrase in ``windows`` ((position, phrase) pairs) votes for
        its nodes at the positions it spans, but at those in ``covered``."""
        for t, phrase in windows:
            for place in self.phrases.get(phrase, ()):
                for d, v in enumerate(place, t):
                    if d in covered:
                        continue
                    votes = found.get(d)
                    if votes is None:
                        found[d] = {v: 1}
                    else:
                        votes[v] = votes.get(v, 0) + 1

    def _chain(self, keys: list[str], proposals: dict[int, list[int]]) -> list[tuple[int, int]]:
        """The heaviest chain of matches increasing in position and in order, from START to END."""
        order, pred = self.order, self.pred
        ranks = {o: r for r, o in enumerate(sorted({order[v] for vs in proposals.values() for v in vs}), 1)}
        size = len(ranks)
        tree_weight, tree_item = [0.0] * (size + 1), [-1] * (size + 1)  # a Fenwick tree of prefix maxima
        weights: list[float] = []
        items: list[tuple[int, int, int]] = []  # (position, node, parent item)
        at: dict[tuple[int, int], int] = {}
        for p in sorted(proposals):
            made = []
            before = proposals.get(p - 1, ())
            for v in proposals[p]:
                r = ranks[order[v]]
                weight, parent, i = 0.0, -1, r - 1
                while i > 0:
                    if tree_weight[i] > weight:
                        weight, parent = tree_weight[i], tree_item[i]
                    i -= i & -i
                weight += 1
                for u in pred[v].get(keys[p - 1], ()) if before else ():  # an edge from a match just before
                    j = at.get((p - 1, u))
                    if j is not None and weights[j] + 1 + CONTINUE > weight:
                        weight, parent = weights[j] + 1 + CONTINUE, j
                made.append((v, r, weight, parent))
            for v, r, weight, parent in made:
                j = len(items)
                items.append((p, v, parent))
                weights.append(weight)
                at[(p, v)] = j
                while r <= size:
                    if weight > tree_weight[r]:
                        tree_weight[r], tree_item[r] = weight, j
                    r += r & -r
        chain, j = [], at[(len(keys) - 1, END)]
        while j != -1:
            chain.append(items[j][:2])
            j = items[j][2]
        return chain[::-1]

    def _fill(self, keys: list[str], nodes: list[int | None], a: int, va: int, b: int, vb: int) -> None:
        """Words a+1..b-1 between two matches: follow edges from both ends, then line the rest up
        with the words other samples said between the same two nodes (when both are short), then
        new nodes for what is left."""
        lo, hi, left, right, order = a + 1, b - 1, va, vb, self.order
        while lo <= hi and (v := self._step(self.succ[left], keys[lo], order[left], order[vb])) is not None:
            nodes[lo], left, lo = v, v, lo + 1
        while lo <= hi and (v := self._step(self.pred[right], keys[hi], order[left], order[right])) is not None:
            nodes[hi], right, hi = v, v, hi - 1
        if lo > hi:
            return
        if hi - lo < LOCAL and (between := self._between(left, right)):
            pairs = _common(keys[lo:hi + 1], [self.keys[v] for v in between], lo, between)
            for p, v in _meaningful(pairs, between, hi - lo + 1, keys):
                nodes[p] = v
        start, before = lo, left
        for p in range(lo, hi + 2):  # each run of words still without a node, between its neighbours
            if p <= hi and nodes[p] is None:
                continue
            if p > start:
                self._new_nodes(keys, nodes, start, p - 1, before, nodes[p] if p <= hi else right)
            if p <= hi:
                start, before = p + 1, nodes[p]

    def _between(self, left: int, right: int) -> list[int]:
        """The nodes other samples went through from ``left`` before ``right`` (in the order), in
        order; none when there are more than ``LOCAL`` (a long stretch: its lone words are noise)."""
        order, low, high = self.order, self.order[left], self.order[right]
        seen: set[int] = set()
        stack = [left]
        while stack:
            for vs in self.succ[stack.pop()].values():
                for v in vs:
                    if low < order[v] < high and v not in seen:
                        seen.add(v)
                        stack.append(v)
                        if len(seen) > LOCAL:
                            return []
        return sorted(seen, key=order.__getitem__)

    def _new_nodes(self, keys: list[str], nodes: list[int | None], lo: int, hi: int, left: int, right: int) -> None:
        """Nodes for words lo..hi, evenly placed in the order between two nodes."""
        room = (self.order[right] - self.order[left]) / (hi - lo + 2)
        if room < 1e-10 * max(1.0, abs(self.order[right])):  # floats keep 52 bits
            self._renumber()
            room = (self.order[right] - self.order[left]) / (hi - lo + 2)
        for k, p in enumerate(range(lo, hi + 1), 1):
            nodes[p] = self._node(keys[p], self.order[left] + k * room)

    def _step(self, near: dict[str, list[int]], key: str, above: float, below: float) -> int | None:
        """The neighbour with this key strictly between two places in the order (the busiest)."""
        found = [v for v in near.get(key, ()) if above < self.order[v] < below and v != END]
        return max(found, key=lambda v: (self.count[v], -self.order[v])) if found else None

    def _node(self, key: str, order: float) -> int:
        self.keys.append(key)
        self.order.append(order)
        self.count.append(0)
        self.succ.append({})
        self.pred.append({})
        return len(self.keys) - 1

    def _renumber(self) -> None:
        """Evenly spaced order values again (the order itself is unchanged)."""
        for rank, v in enumerate(sorted(range(len(self.order)), key=self.order.__getitem__)):
            self.order[v] = rank * _GAP


def _content(key: str) -> bool:
    """A word that says something on its own: ``CONTENT`` letters or more (not "a", "the", "of")."""
    return not isinstance(key, _Mark) and len(key) >= CONTENT


def _meaningful(pairs: list[tuple[int, int]], between: list[int], words: int, keys: list[str]) -> list[tuple[int, int]]:
    """The matches of a stretch's line-up that say something: those in a run of two or more words
    matched one after the other; a lone word in a stretch of up to ``LONE`` words ("The cat sat
    down" and "A dog sat up" meet at "sat"); and a lone word of ``CONTENT`` letters or more in a
    longer one. Over fifteen words, the line-up of two different sentences otherwise meets at
    every "a", "and" and "the" they share in order, a ladder of chance meetings."""
    if words <= LONE:
        return pairs
    place = {v: k for k, v in enumerate(between)}
    kept = []
    for k, (p, v) in enumerate(pairs):
        joined = any(0 <= k + d < len(pairs) and pairs[k + d][0] == p + d and place[pairs[k + d][1]] == place[v] + d
                     for d in (-1, 1))
        if joined or _content(keys[p]):
            kept.append((p, v))
    return kept


def _common(words: list[str], keys: list[str], first: int, nodes: list[int]) -> list[tuple[int, int]]:
    """The longest common subsequence of two short word lists, as (position, node) pairs:
    positions count from ``first``, nodes are ``nodes`` (whose keys are ``keys``)."""
    rows, cols = len(words), len(keys)
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        for j in range(cols - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if words[i] == keys[j] else max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < rows and j < cols:
        if words[i] == keys[j]:
            pairs.append((first + i, nodes[j]))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs
