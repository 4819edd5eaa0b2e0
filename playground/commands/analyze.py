"""What the n samples of each run say together: ``python app.py analyze RUNS.jsonl [...] [options]``

    python app.py analyze runs.jsonl                                 every bundle batch wrote
    python app.py analyze run.json --answer last-number             a bundle the page exported
    python app.py analyze exports/*.json --html report.html         several files: their runs in turn
    python app.py analyze runs.jsonl --answer 'regex:answer is (\\w+)' --json figures.json
    python app.py analyze runs.jsonl --embedding-model DIR --similarity 0.85
    python app.py analyze runs.jsonl --graph graphs.jsonl           each run's sample graph, as JSON

Reads run bundles: the JSONL that ``python app.py batch`` writes (one bundle per line) or the JSON
file the page exports (one indented bundle). Prints one line per bundle: the answer groups, the
majority answer and its vote share, the answer entropy, distinct-1/2/3, the mean pairwise
similarity, the Vendi score, and the same after the first divergence point. ``--json`` writes
every measure, every answer group and every sample's answer (atomically); ``--graph`` each run's
sample graph (where its samples part and meet again), one JSON object per line. Any of the three
may be ``-``, stdout (the per-run lines then go to stderr); an input of ``-`` is read from stdin.
Several inputs are read in turn as one list of runs, each run named by its file ("b.json line 3").

No engine: this runs anywhere the bundles are. An embedding model (``--embedding-model``, a
Hugging Face id or a local folder) also groups the samples by meaning; it is loaded offline unless
``--download`` is given.

A line that is not a run bundle, or a bundle from a newer playground, is reported by its line
number and skipped; the others are still analysed.

Exit status: 0 every bundle was analysed; 1 a line was skipped, or there was no bundle; 2 a usage
error (bad flag, unreadable file, an extractor or pattern that cannot work, an embedding model that
cannot be loaded); 130 interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from playground import analysis
from playground.analysis import Extractor, HowMany, InvalidExtractor, SetMeasures, truncate
from playground.backends.embeddings import Embedder, EmbeddingModelError, load_embedder
from playground.bundles import BundleError, Located, parse_bundles, read_bundles
from playground.commands import exits
from playground.commands.cli import (
    HintingParser,
    check_distinct,
    check_out_path,
    note_whole_text_reference,
    say_skipped,
    usage_line,
    write_atomically,
)
from playground.errors import InvalidBundle

STDOUT = Path("-")  # as the input, stdin; as --json, --html or --graph, stdout
PROMPT_CHARS = 32
ANSWER_CHARS = 40  # a majority answer in a one-line summary


def build_parser() -> argparse.ArgumentParser:
    parser = HintingParser(prog="python app.py analyze", description=__doc__,
                           usage=usage_line("RUNS.jsonl [RUNS.jsonl ...]", engine=False),  # a sentence, not a page
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           meant={"--report": "the report is --html OUT", "--out": "--html, --json or --graph OUT",
                                  "--summary": "the summary is always printed; --json OUT writes every figure"})
    parser.add_argument("inputs", type=Path, nargs="+", metavar="RUNS.jsonl",
                        help="Run bundles: batch's JSONL, one bundle the page exported, a JSON array of runs, "
                             "or runs written by hand (lists of texts); - reads stdin. Several files are read "
                             "in turn, as one list of runs (each named by its file).")
    parser.add_argument("--answer", type=extractor_arg, default=analysis.parse_extractor(None), metavar="EXTRACTOR",
                        help="How to read a sample's answer: normalized (the whole text, default), first-line, "
                             "last-number, boxed (\\boxed{...}), or regex:PATTERN (one group).")
    parser.add_argument("--reference", metavar="ANSWER",
                        help="The right answer, read by the same extractor: adds pass@k and maj@k to what k samples "
                             "drawn from the n would give (default: each run's own, from its batch line).")
    parser.add_argument("--json", type=Path, metavar="OUT", help="Write every figure here (JSON, atomically).")
    parser.add_argument("--html", type=Path, metavar="OUT",
                        help="Write one self-contained page (no server, works offline): a run's columns, diff, "
                             "tree, charts and set figures; two runs side by side; or a sweep's chart and grid.")
    parser.add_argument("--graph", type=Path, metavar="OUT",
                        help="Write each run's sample graph here (atomically), as JSON Lines: one JSON object per "
                             "run, in the input's order, so the file of one run is one JSON object. Each has the "
                             "run (source, line, request_id, prompt), nodes (id, text, key, words, count, samples, "
                             "prob, visits: each sample's exact text and first token there), edges (source, target, "
                             "count, samples, share, prob), paths (each sample's node ids), meeting_points and "
                             "branch_points (node ids), and the normalisation words were compared by (the README "
                             "names every field). With --embedding-model, words that mean the same meet too.")
    parser.add_argument("--embedding-model", metavar="ID",
                        help="Also group the samples by meaning with this sentence-embedding model "
                             "(a Hugging Face id or a local folder; default: off).")
    parser.add_argument("--similarity", type=_threshold, default=None, metavar="T",
                        help="Cosine similarity at which two samples mean the same (default "
                             f"{analysis.DEFAULT_SIMILARITY}; with --embedding-model).")
    parser.add_argument("--download", action="store_true",
                        help="Let --embedding-model fetch the model from the Hugging Face Hub (default: offline).")
    return parser


def extractor_arg(text: str) -> Extractor:
    """--answer's argparse type: the extractor, or a usage error that names the pattern."""
    try:
        return analysis.parse_extractor(text)
    except InvalidExtractor as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


@dataclass
class Analysed:
    """One bundle and what its samples say together: the set's measures, and how many samples
    it needs (curves against k, the stopping rule, the set's uncertainty)."""

    bundle: Located
    measures: SetMeasures
    how_many: HowMany


def analyze(bundle: Located, extractor: Extractor, embedder: Embedder | None = None,
            threshold: float = analysis.DEFAULT_SIMILARITY, reference: str | None = None) -> Analysed:
    """``reference``: the right answer; None: the run's own (a batch line's ``reference``)."""
    run = bundle.run
    embeddings = embedder.embed(analysis.answer_texts(run)) if embedder is not None else None
    measures = analysis.set_measures(run, extractor, embeddings, embedder.model_name if embedder else "", threshold)
    reference = reference if reference is not None else run.request.get("reference")
    return Analysed(bundle, measures, analysis.how_many_samples(run, extractor, reference))


def describe(analysed: Analysed) -> str:
    """The bundle's measures on one line."""
    bundle, measures = analysed.bundle, analysed.measures
    run, a, d = bundle.run, measures.answers, measures.diversity
    prompt = " ".join(str(run.request.get("prompt", "")).split())
    prompt = truncate(prompt, PROMPT_CHARS)
    status = "" if run.status == "finished" else f" ({run.status})"
    if origin := analysis.origin_label(run):
        status += f" ({origin})"
    said = json.dumps(prompt, ensure_ascii=False) if prompt else "(no prompt)"  # a run written by hand may have none
    head = f"{name(bundle)} {said} n={run.n}{status}"
    if a.winner:
        majority = json.dumps(truncate(a.winner.answer, ANSWER_CHARS), ensure_ascii=False)
        answers = (f"{len(a.groups)} answer(s) ({a.extractor}), majority {majority} {a.winner.size}/{a.n} "
                   f"({analysis.percent(a.vote_share)}), entropy {a.entropy:.2f} bits")
    elif a.groups:  # a tie at the top: no answer won
        answers = (f"{len(a.groups)} answer(s) ({a.extractor}), {a.majority_text()} "
                   f"({analysis.percent(a.vote_share)} each), entropy {a.entropy:.2f} bits")
    else:
        answers = f"no answer ({a.extractor})"
    if a.unanswered and a.majority:
        answers += f", no answer in {len(a.unanswered)}"
    parts = [head, answers, _diversity(d.whole)]
    if d.common_prefix:
        parts.append(f"after token {d.common_prefix}: {_diversity(d.after_divergence)}")
    if m := measures.meaning:
        parts.append(f"meaning: {len(m.clusters)} cluster(s), entropy {m.entropy:.2f} bits")
    parts.append(analysed.how_many.headline())
    return " · ".join(parts)


def name(bundle: Located) -> str:
    """Where a run was, and what the person who made it called it: a sweep's value, or the line of
    batch's input it came from ("line 3 (temperature=0.5)", "line 2 (input line 8)")."""
    run = bundle.run
    if info := analysis.sweep_info(run):
        return f"{bundle.where} ({info.get('param')}={info.get('value')})"
    if (line := run.request.get("batch_line")) is not None and line != bundle.line:
        return f"{bundle.where} (input line {line})"
    return bundle.where


def shared_by_design(a: Located, b: Located) -> bool:
    """Two runs that share seeds on purpose, whose pair is no news: values of one sweep (the same
    seeds for every value), or cells of one QA matrix (one request on every path)."""
    sa, sb = analysis.sweep_info(a.run), analysis.sweep_info(b.run)
    if sa and sb and (sa.get("param"), sa.get("values")) == (sb.get("param"), sb.get("values")):
        return True
    return a.cell is not None and b.cell is not None


NOTES_SHOWN = 10  # pairs of runs that share seeds, named one by one


def _diversity(d: analysis.Diversity) -> str:
    distinct = "/".join(_number(x, 2) for x in (d.distinct_1, d.distinct_2, d.distinct_3))
    spread = f" ± {d.similarity_std:.2f}" if d.similarity_std is not None else ""
    return (f"distinct-1/2/3 {distinct}, similarity {_number(d.similarity_mean, 2)}{spread}, "
            f"Vendi {_number(d.vendi, 2)} of {d.samples}")


def _number(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def overlaps_by_id(analysed: list[Analysed]) -> list[dict]:
    """``seed_overlaps`` as the JSON says them: ``a`` and ``b`` index its ``runs`` (from 0), and
    each run's request id is beside its index, so no reader has to count."""
    ids = [a.bundle.run.request.get("request_id") for a in analysed]
    return [{**o, "a_request_id": ids[o["a"]], "b_request_id": ids[o["b"]]}
            for o in analysis.seed_overlaps([a.bundle.run for a in analysed])]


def to_json(args, analysed: list[Analysed], errors: list[BundleError]) -> str:
    runs = [{"source": a.bundle.where, "file": a.bundle.file, "line": a.bundle.line,
             "request_id": a.bundle.run.request.get("request_id"), "prompt": a.bundle.run.request.get("prompt"),
             "n": a.bundle.run.n, "status": a.bundle.run.status, **a.measures.to_dict(), **a.how_many.to_dict()}
            for a in analysed]
    inputs = [str(path) for path in args.inputs]
    document = {"input": ", ".join(inputs), "inputs": inputs, "answer": args.answer.spec,
                "embedding_model": args.embedding_model,
                "similarity": args.similarity if args.embedding_model else None, "reference": args.reference,
                "runs": runs, "seed_overlaps": overlaps_by_id(analysed),
                "errors": [{"source": e.where, "line": e.line, "message": e.message} for e in errors]}
    return json.dumps(document, indent=1, ensure_ascii=False)


def graph_record(bundle: Located, embedder: Embedder | None = None) -> dict:
    """One line of ``--graph``: which run, then its sample graph (words matched by meaning too
    when an embedding model is given)."""
    run = bundle.run
    synonyms, how = None, None
    if embedder is not None:
        keys = analysis.word_keys(run)
        synonyms = analysis.synonyms_by_meaning(keys, embedder.embed(keys), analysis.WORD_SIMILARITY)
        how = (f"{analysis.NORMALISATION}, and words of cosine similarity >= {analysis.WORD_SIMILARITY} by "
               f"{embedder.model_name}")
    return {"source": bundle.where, "line": bundle.line, "request_id": run.request.get("request_id"),
            "prompt": run.request.get("prompt"), **analysis.sample_graph(run, synonyms, how).to_dict()}


def write_out(path: Path, lines: list[str]) -> None:
    """``path`` written atomically, or stdout for ``-``."""
    if path == STDOUT:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    else:
        write_atomically(path, lines)


def shown(path: Path) -> str:
    return "stdout" if path == STDOUT else str(path)


def read_inputs(parser, inputs: list[Path]) -> tuple[list, list]:
    """Every input's runs and the lines that are not runs, in turn; with several files each says
    its file's name ("b.jsonl line 3"; the path as given where two share a name). A file that
    cannot be read at all, or is given twice, is a usage error."""
    seen: dict[Path, Path] = {}
    for path in inputs:
        if path != STDOUT and (same := seen.setdefault(path.resolve(), path)) is not path:
            parser.error(f"{path} is given twice ({same} and {path}): its runs would be analysed twice")
    names = [path.name for path in inputs]
    bundles, errors = [], []
    for path in inputs:
        try:
            found, wrong = (parse_bundles(sys.stdin.read(), name="stdin") if path == STDOUT else read_bundles(path))
        except InvalidBundle as e:
            parser.error(str(e))
        if len(inputs) > 1:
            named = "stdin" if path == STDOUT else path.name if names.count(path.name) == 1 else str(path)
            found = [dataclasses.replace(b, file=named) for b in found]
            wrong = [dataclasses.replace(e, file=named) for e in wrong]
        bundles += found
        errors += wrong
    return bundles, errors


@exits.as_status
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.similarity is not None and not args.embedding_model:
        parser.error("--similarity is the threshold of grouping by meaning: give --embedding-model too")
    args.similarity = analysis.DEFAULT_SIMILARITY if args.similarity is None else args.similarity
    outs = {"--json": args.json, "--html": args.html, "--graph": args.graph}
    to_stdout = [flag for flag, path in outs.items() if path == STDOUT]
    if len(to_stdout) > 1:
        parser.error(f"{' and '.join(to_stdout)} both name stdout (-): give one of them a file")
    for flag, path in outs.items():
        if path != STDOUT:
            check_out_path(parser, flag, path)
    if args.inputs.count(STDOUT) > 1:
        parser.error("- (stdin) is given more than once: it can be read once")
    for path in args.inputs:
        check_distinct(parser, {"input": path}, outs)
    lines_out = sys.stderr if to_stdout else sys.stdout  # stdout carries the one file asked for, whole
    bundles, errors = read_inputs(parser, args.inputs)
    say_skipped(errors, "is it a file of runs (bundles, or the JSONL of batch or sweep)?")
    note_whole_text_reference(args.reference if args.reference is not None else next(
        (b.run.request["reference"] for b in bundles if b.run.request.get("reference") is not None), None),
        args.answer)  # the flag's reference, else the runs' own (a batch line's)
    embedder = None
    if args.embedding_model and bundles:
        print(f"loading the embedding model {args.embedding_model}…", file=sys.stderr)
        try:
            embedder = load_embedder(args.embedding_model, offline=not args.download)
        except EmbeddingModelError as e:
            parser.error(f"{e}{'' if args.download or not e.downloadable else ' (--download lets analyze fetch it)'}")
    analysed = []
    for bundle in bundles:
        try:
            result = analyze(bundle, args.answer, embedder, args.similarity, args.reference)
        except InvalidExtractor as e:  # a pattern that takes too long: it would on every bundle
            print(f"error: {bundle.where}: {e}", file=sys.stderr)
            return exits.USAGE
        except EmbeddingModelError as e:
            errors.append(error := BundleError(bundle.line, str(e), bundle.item, bundle.cell))
            print(f"skipping {error}", file=sys.stderr)
            continue
        analysed.append(result)
        print(describe(result), file=lines_out, flush=True)
    try:  # each file checked before the runs were read; what is left to fail is the disk
        if args.json is not None and analysed:  # none read: a file of figures from before is left as it was
            write_out(args.json, [to_json(args, analysed, errors)])
            print(f"wrote the figures of {len(analysed)} run(s) to {shown(args.json)}", file=sys.stderr)
        if args.html is not None and analysed:
            runs = [analysis.with_reference(a.bundle.run, args.reference) for a in analysed]  # the flag's, or theirs
            write_out(args.html, [analysis.report_for(runs, analysis.set_measures_hook(args.answer), args.answer)])
            print(f"wrote the report of {len(runs)} run(s) to {shown(args.html)}", file=sys.stderr)
        if args.graph is not None and analysed:
            write_out(args.graph, [json.dumps(graph_record(a.bundle, embedder), ensure_ascii=False)
                                   for a in analysed])
            print(f"wrote the graphs of {len(analysed)} run(s) to {shown(args.graph)}", file=sys.stderr)
    except OSError as e:
        print(f"error: {e.filename or 'a file'} could not be written ({e.strerror or e})", file=sys.stderr)
        return exits.FAILED
    if not bundles:
        print(f"no run bundle in {', '.join('stdin' if path == STDOUT else str(path) for path in args.inputs)}",
              file=sys.stderr)
        return exits.FAILED
    names = [name(a.bundle) for a in analysed]
    overlaps = [o for o in analysis.seed_overlaps([a.bundle.run for a in analysed])
                if not shared_by_design(analysed[o["a"]].bundle, analysed[o["b"]].bundle)]
    for overlap in overlaps[:NOTES_SHOWN]:
        print(f"note: {analysis.seed_overlap_sentence(overlap, names)}", file=sys.stderr)
    if len(overlaps) > NOTES_SHOWN:
        print(f"note: and {len(overlaps) - NOTES_SHOWN} more pairs of runs share child seeds (--json lists every "
              "pair, under seed_overlaps)", file=sys.stderr)
    by_line = [e for e in errors if e.line is not None and e.item is None and e.file is None]
    skipped = ([f"line(s) {', '.join(str(e.line) for e in by_line)}"] if by_line else []) + [
        e.where for e in errors if e not in by_line]
    print(f"analysed {len(analysed)} run(s)" + (f"; skipped {' and '.join(skipped)}" if skipped else ""),
          file=sys.stderr)
    return exits.FAILED if errors else exits.OK
