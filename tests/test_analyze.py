"""``python app.py analyze``: end to end on bundles recorded from the real engine (written as
batch writes them, one per line), and every kind of bad input, each named and the rest analysed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from playground import analysis as A
from playground.commands import analyze, exits
from playground.request import SampleRequest
from playground.run import BUNDLE_VERSION, Run
from tests.helpers import record_to_end

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Question: what is 3 + 4? Answer with a number.\nAnswer:"


@pytest.fixture(scope="module")
def runs_file(backend, tmp_path_factory) -> Path:
    """Two small real runs, as ``python app.py batch --out`` writes them (with their batch_line)."""
    runs = [record_to_end(backend, SampleRequest(PROMPT, n=4, seed=5, max_tokens=8)),
            record_to_end(backend, SampleRequest("Name a colour:", n=2, seed=1, max_tokens=6, mode="native"))]
    for line, run in enumerate(runs, 1):
        run.request["batch_line"] = line
    path = tmp_path_factory.mktemp("analyze") / "runs.jsonl"
    path.write_text("".join(run.to_json() + "\n" for run in runs), encoding="utf-8")
    return path


def test_analyze_command_end_to_end_on_real_bundles(runs_file, tmp_path):
    out = tmp_path / "figures.json"
    # -X importtime lists every module imported: the command must start without vLLM, torch, Gradio or openai.
    done = subprocess.run([sys.executable, "-X", "importtime", "app.py", "analyze", str(runs_file),
                           "--answer", "last-number", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == exits.OK, done.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "rapidfuzz" in imported and not imported & {"vllm", "torch", "gradio", "openai"}
    printed = done.stdout.splitlines()
    assert len(printed) == 2 and printed[0].startswith("line 1 ") and printed[1].startswith("line 2 ")
    assert " n=4 " in printed[0] and " n=2 " in printed[1] and "Vendi" in printed[0]
    assert "analysed 2 run(s)" in done.stderr

    # The JSON says what the analysis says of the same bundles, in process.
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["answer"] == "last-number" and document["errors"] == []
    bundles = [Run.from_json(text) for text in runs_file.read_text(encoding="utf-8").splitlines()]
    for bundle, written in zip(bundles, document["runs"], strict=True):
        expected = json.loads(json.dumps(A.set_measures(bundle, "last-number").to_dict()))
        assert {k: written[k] for k in expected} == expected
        figures = written["figures"]
        assert sum(g["size"] for g in written["groups"]) + len(figures["unanswered"]) == bundle.n
        assert written["request_id"] == bundle.request["request_id"] and written["n"] == bundle.n
    assert [a["sample"] for a in document["runs"][0]["answers"]] == [0, 1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.json"]  # written atomically: no temp file


def test_a_bundle_the_page_exported(runs_file, tmp_path, capsys):
    exported = tmp_path / "run.json"
    exported.write_text(Run.from_json(runs_file.read_text().splitlines()[0]).to_json(indent=1), encoding="utf-8")
    page = tmp_path / "run.html"
    assert analyze.main([str(exported), "--answer", r"regex:(\d+)", "--html", str(page)]) == exits.OK
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].startswith("the file ") and "(regex:(\\d+))" in printed[0]
    report = page.read_text(encoding="utf-8")  # one page anyone can open: plotly inlined, no server
    assert report.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in report and 'src="http' not in report
    assert "effective samples (Vendi)" in report
    assert "Answer groups (regex:(\\d+))" in report  # the report reads the answers as --answer does
    assert "How many samples do you need?" not in report  # no reference: nothing to count passes against
    assert analyze.main([str(exported), "--answer", r"regex:(\d+)", "--reference", "7", "--html", str(page)]) == 0
    assert "How many samples do you need?" in page.read_text(encoding="utf-8")  # the flag's reference, as the page's


def test_a_matrix_cell_without_a_run_is_named_and_the_others_analysed(tmp_path, capsys):
    """A QA matrix whose cell failed before it made a run: the cell is named with its error, not
    called a damaged bundle. (The real matrix's cells are read in tests/test_qa.py.)"""
    matrix = {"matrix_version": 2, "request": {"prompt": "p"}, "kinds": ["DELTA"], "paths": ["async"],
              "cells": [{"output_kind": "DELTA", "path": "async wrapper", "run": {"samples": ["4", "4"]}},
                        {"output_kind": "DELTA", "path": "remote", "run": None, "error": "connection refused"}]}
    source = tmp_path / "matrix.json"
    source.write_text(json.dumps(matrix, indent=1), encoding="utf-8")
    assert analyze.main([str(source)]) == exits.FAILED
    captured = capsys.readouterr()
    assert captured.out.startswith('the file, cell DELTA × async wrapper (no prompt) n=2')  # a hand-made run
    assert "skipping the file, cell DELTA × remote: no run (connection refused)" in captured.err
    assert "analysed 1 run(s); skipped the file, cell DELTA × remote" in captured.err


def test_bad_lines_are_named_and_the_other_bundles_still_analysed(runs_file, tmp_path, capsys):
    good = runs_file.read_text(encoding="utf-8").splitlines()
    newer = json.dumps({**json.loads(good[1]), "bundle_version": BUNDLE_VERSION + 1})
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([good[0], '{"prompt": "Name a tree:", "n": 2}', "[1, 2]", "{not json", "",
                                newer, good[1]]) + "\n", encoding="utf-8")
    out = tmp_path / "figures.json"
    assert analyze.main([str(mixed), "--json", str(out)]) == exits.FAILED
    captured = capsys.readouterr()
    assert [line.split(" ")[1] for line in captured.out.splitlines()] == ["1", "7"]
    assert ("skipping line 2: this is not a run bundle: a bundle is a JSON object with \"request\" and \"samples\""
            in captured.err and "It looks like a line of batch's input: run `python app.py batch` on it first."
            in captured.err)
    assert "skipping line 3: this is not a run bundle" in captured.err
    assert "skipping line 4: not valid JSON (Expecting property name enclosed in double quotes at column 2)" \
        in captured.err
    assert (f"skipping line 6: this bundle has version {BUNDLE_VERSION + 1}, newer than this playground reads "
            f"({BUNDLE_VERSION}): update the playground to open it") in captured.err
    assert "analysed 2 run(s); skipped line(s) 2, 3, 4, 6" in captured.err
    document = json.loads(out.read_text(encoding="utf-8"))
    assert [r["line"] for r in document["runs"]] == [1, 7] and [e["line"] for e in document["errors"]] == [2, 3, 4, 6]


def test_a_file_that_is_not_bundles(tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "one"}\n{"prompt": "two"}\n', encoding="utf-8")
    assert analyze.main([str(prompts)]) == exits.FAILED
    err = capsys.readouterr().err
    assert "skipping line 1: this is not a run bundle" in err and "skipping line 2: this is not a run bundle" in err
    assert f"no run bundle in {prompts}" in err

    broken = tmp_path / "broken.json"
    broken.write_text('{\n "request": {},\n "samples": [\n}\n', encoding="utf-8")
    assert analyze.main([str(broken)]) == exits.FAILED
    assert ("skipping line 4: not valid JSON (Expecting value at column 1): the file looks like one indented bundle"
            in capsys.readouterr().err)

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert analyze.main([str(empty)]) == exits.FAILED
    assert "no run bundle" in capsys.readouterr().err


def test_a_reader_that_stops_reading_stops_the_command_quietly(tmp_path):
    """`analyze ... | head -1`: once the reader has gone, the command stops with the shell's status
    for it (128 + SIGPIPE), with no traceback on the terminal."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text('["a b", "a c"]\n' * 5000, encoding="utf-8")
    command = subprocess.Popen([sys.executable, "app.py", "analyze", str(runs)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert command.stdout.readline().startswith("line 1 ")
    command.stdout.close()
    assert command.wait(timeout=120) == 141
    said = command.stderr.read()
    assert "Traceback" not in said and "BrokenPipe" not in said, said


@pytest.mark.parametrize("argv, message", [
    (["--answer", "regex:(unclosed"], "argument --answer: the pattern '(unclosed' does not compile"),
    (["--answer", "regex:answer is \\w+"], "argument --answer: the pattern 'answer is \\w+' has 0 groups"),
    (["--answer", "middle-line"], "unknown answer extractor 'middle-line'"),
    (["--similarity", "1.5"], "argument --similarity: must be between 0 and 1, got 1.5"),
    (["--json", "/no/such/folder/out.json"], "--json: the folder /no/such/folder does not exist"),
    (["--similarity", "0.9"], "--similarity is the threshold of grouping by meaning: give --embedding-model too"),
    (["--json", "{source}"], "--json: {source} is the input this command reads; writing it would destroy it"),
    (["--json", "{out}", "--graph", "{out}"], "--json and --graph both name {out}: give each a file of its own"),
    (["--grph", "{out}"], "unrecognized arguments: --grph {out} (--grph: did you mean --graph?)"),
])
def test_usage_errors_name_the_pattern_or_the_flag(argv, message, tmp_path, capsys):
    source = tmp_path / "runs.jsonl"
    source.write_text('{"prompt": "kept as it was"}\n', encoding="utf-8")
    names = {"source": source, "out": tmp_path / "out.json"}
    assert analyze.main([str(source), *(a.format(**names) for a in argv)]) == exits.USAGE
    assert message.format(**names) in capsys.readouterr().err
    assert source.read_text(encoding="utf-8") == '{"prompt": "kept as it was"}\n'


def test_a_file_that_is_no_runs_is_said_in_a_few_lines_not_one_per_line(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("".join(f"note {k}\n" for k in range(500)), encoding="utf-8")
    assert analyze.main([str(notes)]) == exits.FAILED
    said = capsys.readouterr().err.splitlines()
    assert len(said) <= 24 and "… and 480 more lines skipped" in said[-2], said[-3:]


def test_an_unreadable_file_is_a_usage_error(tmp_path, capsys):
    assert analyze.main([str(tmp_path / "missing.jsonl")]) == exits.USAGE
    assert f"cannot read {tmp_path / 'missing.jsonl'}: No such file or directory" in capsys.readouterr().err


def test_grouping_by_meaning_from_the_command_line(runs_file, tmp_path, capsys, embedding_model):
    model = embedding_model
    out = tmp_path / "figures.json"
    status = analyze.main([str(runs_file), "--embedding-model", model, "--similarity", "0.9", "--json", str(out)])
    assert status == exits.OK
    assert all("cluster(s), entropy" in line for line in capsys.readouterr().out.splitlines())
    for written in json.loads(out.read_text(encoding="utf-8"))["runs"]:
        meaning = written["meaning"]
        assert meaning["model"] == model and meaning["threshold"] == 0.9
        assert sorted(i for cluster in meaning["clusters"] for i in cluster) == list(range(written["n"]))
    assert analyze.main([str(runs_file), "--embedding-model", "nobody/no-such-model"]) == exits.USAGE
    assert "the embedding model 'nobody/no-such-model' could not be loaded" in capsys.readouterr().err


def test_a_sample_graph_given_for_runs_is_named_as_one(tmp_path, capsys):
    graphs = tmp_path / "graphs.jsonl"
    graphs.write_text(json.dumps({"run": {"prompt": "p"}, "nodes": [], "edges": []}) + "\n", encoding="utf-8")
    assert analyze.main([str(graphs)]) == exits.FAILED
    assert "It looks like a sample graph (analyze --graph's output)" in capsys.readouterr().err


def test_a_reference_read_against_whole_texts_is_noted(runs_file, capsys):
    assert analyze.main([str(runs_file), "--reference", "391"]) in (exits.OK, exits.FAILED)
    assert "note: the reference '391' is compared with each sample's whole text" in capsys.readouterr().err
    assert analyze.main([str(runs_file), "--reference", "391", "--answer", "last-number"]) in (exits.OK, exits.FAILED)
    assert "whole text" not in capsys.readouterr().err


def test_a_runs_own_reference_read_against_whole_texts_is_noted_too(tmp_path, capsys):
    """A batch line's ``"reference"`` is kept in its run: read with the default extractor, it is
    noted as the flag's is."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps({"prompt": "What is 3 + 4?", "reference": "7", "samples": ["It is 7.", "7"]}) + "\n",
                    encoding="utf-8")
    assert analyze.main([str(runs)]) == exits.OK
    assert "note: the reference '7' is compared with each sample's whole text" in capsys.readouterr().err
    assert analyze.main([str(runs), "--answer", "last-number"]) == exits.OK
    assert "whole text" not in capsys.readouterr().err


def test_runs_are_named_as_their_maker_did_and_seeds_shared_by_design_are_not_noted(tmp_path, capsys):
    """A sweep's values share their seeds on purpose, and say which value they are; a batch run
    says its input line; runs that share seeds by chance are noted."""
    def line(**beside):
        return json.dumps({"prompt": "Name a colour.", "seed": 1, "samples": ["red", "blue"], **beside})

    sweep = [{"param": "temperature", "value": v, "values": [0.5, 1.0], "position": k}
             for k, v in enumerate([0.5, 1.0])]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join([line(sweep=sweep[0]), line(sweep=sweep[1])]) + "\n", encoding="utf-8")
    assert analyze.main([str(runs)]) == exits.OK
    printed = capsys.readouterr()
    assert [row.split(" \"")[0] for row in printed.out.splitlines()] == ["line 1 (temperature=0.5)",
                                                                        "line 2 (temperature=1.0)"]
    assert "share" not in printed.err
    runs.write_text("\n".join([line(batch_line=8), line(batch_line=9)]) + "\n", encoding="utf-8")
    assert analyze.main([str(runs)]) == exits.OK
    printed = capsys.readouterr()
    assert printed.out.startswith("line 1 (input line 8) ")
    assert "note: line 1 (input line 8) and line 2 (input line 9) share 2 child seeds" in printed.err


def test_a_report_or_figures_given_as_runs_are_named_and_earlier_figures_are_kept(tmp_path, capsys):
    """What analyze itself writes, fed back to it: said as what it is, in one line; and --json, with
    no run to read, leaves the figures an earlier call wrote."""
    report, figures, kept = tmp_path / "report.html", tmp_path / "figures.json", tmp_path / "kept.json"
    runs = tmp_path / "runs.jsonl"
    runs.write_text('["a b", "a c"]\n', encoding="utf-8")
    assert analyze.main([str(runs), "--json", str(figures), "--html", str(report)]) == exits.OK
    kept.write_text(figures.read_text(encoding="utf-8"), encoding="utf-8")
    capsys.readouterr()
    table = tmp_path / "tokens.csv"  # the Export tab's tokens CSV
    table.write_text("sample,seed,position,token_id,token_text,t,logprob,rank,entropy_lb_bits\n0,3,0,33,1,0.2,-0.8,1,"
                     "2.8\n", encoding="utf-8")
    for path, said in ((report, "this is an HTML page (a report?), not run bundles"),
                       (table, "this is a table of comma-separated values (its columns: sample,seed,position,"),
                       (figures, "It looks like analyze --json's figures: give the runs they were read from.")):
        assert analyze.main([str(path), "--json", str(kept)]) == exits.FAILED
        err = capsys.readouterr().err
        assert said in err and len(err.splitlines()) == 2, err
    assert kept.read_text(encoding="utf-8") == figures.read_text(encoding="utf-8")


def test_several_files_are_read_in_turn_each_run_named_by_its_file(runs_file, tmp_path, capsys):
    """Runs exported one file each (the page's exports) are analysed together, as a shell glob
    gives them: each line and each skipped line names its file; the report and the figures hold
    every run; a file that cannot be read names itself; stdin is read once."""
    lines = runs_file.read_text(encoding="utf-8").splitlines()
    first, second, broken = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.jsonl"
    first.write_text(json.dumps(json.loads(lines[0]), indent=1), encoding="utf-8")  # as the page exports one
    second.write_text(lines[1] + "\n", encoding="utf-8")
    broken.write_text(lines[0] + "\n{not json\n", encoding="utf-8")
    out, page = tmp_path / "figures.json", tmp_path / "report.html"
    assert analyze.main([str(first), str(second), str(broken), "--json", str(out), "--html", str(page)]) == exits.FAILED
    captured = capsys.readouterr()
    assert [re.match(r'(.*?)(?: \(input line \d\))? "', line)[1] for line in captured.out.splitlines()] == [
        "a.json", "b.json line 1", "c.jsonl line 1"], captured.out
    assert "skipping c.jsonl line 2: not valid JSON" in captured.err
    assert "analysed 3 run(s); skipped c.jsonl line 2" in captured.err
    document = json.loads(out.read_text(encoding="utf-8"))
    assert [r["file"] for r in document["runs"]] == ["a.json", "b.json", "c.jsonl"]
    assert document["inputs"] == [str(first), str(second), str(broken)]
    assert page.read_text(encoding="utf-8").count("Name a colour:") >= 1  # every run in one report
    assert analyze.main([str(first), str(tmp_path / "missing.json")]) == exits.USAGE
    assert "missing.json" in capsys.readouterr().err
    assert analyze.main(["-", "-"]) == exits.USAGE
    assert "stdin" in capsys.readouterr().err
    assert analyze.main([str(first), str(tmp_path / "." / "a.json")]) == exits.USAGE  # one file twice
    assert "is given twice" in capsys.readouterr().err
    (tmp_path / "again").mkdir()
    twin = tmp_path / "again" / "b.json"
    twin.write_text(second.read_text(encoding="utf-8"), encoding="utf-8")
    assert analyze.main([str(second), str(twin)]) == exits.OK  # two files of one name: each named by its path
    assert [line.split(" line")[0] for line in capsys.readouterr().out.splitlines()] == [str(second), str(twin)]


def test_an_embedding_model_folder_that_is_not_there_is_said_without_a_download_to_try(runs_file, capsys):
    assert analyze.main([str(runs_file), "--embedding-model", "/no/such/model"]) == exits.USAGE
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == "python app.py analyze: error: the embedding model folder /no/such/model does not exist", said
