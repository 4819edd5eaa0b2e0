"""Sample a file of prompts with no browser: ``python app.py batch INPUT.jsonl [--out runs.jsonl] ...``

Each input line is a JSON object with a "prompt" and, optionally, any setting of the request schema
(``playground/request.py``: n, seed, output_kind, mode, the sampler settings, ...). The
command-line settings are the defaults; a line's own settings win. Blank lines are skipped. A
file that is one JSON array of such objects is read item by item, and one object spread over lines
(pretty-printed) is one prompt.

    {"prompt": "Write a haiku about rain.", "n": 8, "seed": 1}
    {"prompt": "Name a colour.", "temperature": 0.7, "output_kind": "FINAL_ONLY"}
    {"prompt": "What is 17 * 23? End with the number.", "n": 16, "reference": "391"}

A line's "reference" is its right answer (``--reference`` gives one to the lines without): it is
kept in the bundle (``request.reference``) and ``--summary`` and ``analyze`` read pass@k from it.

Each output line is a run bundle (``Run.to_json()``), in input order, the same record the browser
exports; its ``request.batch_line`` is the input line it came from. Without ``--out`` the bundles
go to stdout (vLLM's log is sent to stderr, so stdout carries bundles only).

One request at a time, by default: each prompt runs alone on an otherwise idle engine, the
conditions of the UI and of a replay, so seeded results reproduce. ``--max-in-flight K`` keeps K
prompts in the engine at once for better throughput, but the batch a request shares changes its
seeded results (floating-point order; there is no batch-invariant mode on the CPU), so the same
file can give other tokens at another K.

``--backend openai --base-url http://HOST:8000/v1`` runs the lines on a vLLM server (``vllm serve``)
instead of an engine started here: the same requests, seeds and bundles; a line the server refuses
is skipped with its message, and a server that stops answering ends the batch as a failed engine does.

A bad line (not JSON, no prompt, an invalid setting) is reported with its line number and skipped;
the rest go on. Ctrl-C aborts what is running and writes the runs that finished.

Exit status: 0 every line ran; 1 a line was skipped, the file had no line to run, or the engine
failed (the runs that finished are still written); 2 a usage error (bad flag, unreadable input);
130 interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from playground import analysis
from playground.backends.resources import Workload
from playground.bundles import csv_header
from playground.commands import exits
from playground.commands.analyze import ANSWER_CHARS, extractor_arg
from playground.commands.cli import (
    PlaygroundParser,
    add_max_n_flag,
    add_remote_flags,
    check_distinct,
    check_out_path,
    check_remote_flags,
    limits_before_engine,
    note_whole_text_reference,
    positive_int,
    say_skipped,
)
from playground.commands.progress import Ending, print_summary, run_all, start_runner, write_bundles
from playground.errors import InvalidRequest, json_problem
from playground.request import SETTINGS, Limits, SampleRequest, did_you_mean
from playground.run import Run

ONE_PER_LINE = 'one JSON object per line, {"prompt": ...}'
SUMMARY_COLUMNS = ["line", "prompt", "mode", "n", "tokens", "seconds", "tokens_per_s", "identical", "identical_samples",
                   "answers", "majority", "vote_share", "answer_entropy", "distinct_2", "similarity", "vendi",
                   "settled_at", "pass_at_1", "pass_at_n", "eigv"]

@dataclass
class Line:
    number: int  # 1-based line number in the input file
    request: SampleRequest
    reference: str | None = None  # the line's right answer, kept in its bundle
    unit: str = "line"  # "item" in a file that is one JSON array


@dataclass
class LineError:
    number: int
    message: str
    unit: str = "line"  # "item" in a file that is one JSON array

    def __str__(self) -> str:
        return f"{self.unit} {self.number}: {self.message}"


@dataclass
class BatchResult(Ending):
    runs: dict[int, Run] = field(default_factory=dict)  # line number -> finished Run
    errors: list[LineError] = field(default_factory=list)


def build_parser() -> PlaygroundParser:
    def add_own(group) -> None:
        group.add_argument("input", metavar="INPUT.jsonl", help="One JSON object per line, each with a \"prompt\".")
        group.add_argument("--out", type=Path, metavar="PATH",
                           help="Write the run bundles here (atomically), not to stdout.")
        group.add_argument("--summary", action="store_true",
                           help="Print a table: per prompt, n, tokens, tokens per second, identical samples, "
                                "and what the n samples say together (answers, vote share, diversity).")
        group.add_argument("--answer", type=extractor_arg, default=None, metavar="EXTRACTOR",
                           help="How --summary reads a sample's answer: normalized (default), first-line, "
                                "last-number, boxed, or regex:PATTERN (one group).")
        group.add_argument("--reference", metavar="ANSWER",
                           help="The right answer of the lines that give none (a line's \"reference\" wins): kept in "
                                "the bundles; --summary adds pass@1 and pass@n.")
        group.add_argument("--max-in-flight", type=positive_int(1024), default=1, metavar="K",
                           help="Prompts in the engine at once (default 1: each alone, so seeded results "
                                "reproduce; more is faster but changes seeded results).")
        add_max_n_flag(group, "prompt")
        add_remote_flags(group)

    parser = PlaygroundParser("python app.py batch", __doc__, add_own, sampling=True, arguments="INPUT.jsonl")
    return parser


def read_lines(path: Path, defaults: dict, max_n: int, reference: str | None = None,
               relaxed: Limits | None = None) -> tuple[list[Line], list[LineError]]:
    """Parse and check every line before an engine starts, so a typo costs no engine start
    (``relaxed``: the limits known then, ``cli.limits_before_engine``; by default --max-n's and
    vLLM's default logprobs cap).

    A file that is one JSON array of such objects (as a script may write them) is read item by
    item. Checks that need the engine (the context length) run again at submission.
    """
    relaxed = relaxed or Limits.before_engine(max_n)
    lines, errors = [], []
    unit, entries = _entries(Path(path).read_text(encoding="utf-8", errors="surrogateescape"))
    for number, data in entries:
        if isinstance(data, json.JSONDecodeError):
            errors.append(LineError(number, f"not valid JSON ({json_problem(data)})", unit))
            continue
        if not isinstance(data, dict):
            errors.append(LineError(number, f'must be a JSON object with a "prompt", got {type(data).__name__}',
                                    unit))
            continue
        answer = data.pop("reference", reference)
        try:
            if answer is not None and not isinstance(answer, str | int | float):
                raise InvalidRequest(f"reference must be text or a number, got {answer!r}")
            request = SampleRequest.from_user(**{**defaults, **data})
            request.check(relaxed)
        except InvalidRequest as e:
            errors.append(LineError(number, str(e), unit))
            continue
        lines.append(Line(number, request, None if answer is None else str(answer), unit))
    return lines, errors


def _entries(text: str) -> tuple[str, list[tuple[int, object]]]:
    """The file's entries by number, each parsed (or its JSONDecodeError): its non-blank lines; the
    items of a file that is one JSON array; or the one object of a file that is one object spread
    over lines (pretty-printed), numbered by the line it starts on."""
    whole = _document(text)
    if isinstance(whole, list) and whole:
        return "item", list(enumerate(whole, 1))
    if whole is not NOT_ONE:
        return "line", [(1 + text[:len(text) - len(text.lstrip())].count("\n"), whole)]
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                entries.append((number, json.loads(line)))
            except json.JSONDecodeError as e:
                entries.append((number, e))
    return "line", entries


NOT_ONE = object()  # _document's answer for a file that is not one JSON document over several lines


def _document(text: str) -> object:
    """The file as one JSON document: an array (on one line or many), or any value spread over
    lines (an object pretty-printed); else NOT_ONE (JSONL, a value on one line, broken JSON). Cheap
    for JSONL: the parse stops at the end of its first value."""
    if not text.lstrip().startswith(("{", "[")):
        return NOT_ONE
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return NOT_ONE
    return whole if isinstance(whole, list) or "\n" in text.strip() else NOT_ONE


def not_prompts(path: Path) -> str | None:
    """What a file none of whose lines is a prompt is instead, or None: one sentence with the
    command that reads it, where a line each would only repeat "unknown settings". Said when the
    file says so plainly (run bundles, a QA matrix, analyze's figures or sample graphs, an HTML
    page), or when it is one JSON document that is not a prompt's try at all (no "prompt", no
    setting: someone else's JSON)."""
    text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    if text.lstrip().startswith("<"):
        return f"{path} is an HTML page (a report?), not prompts: open it in a browser"
    whole = _document(text)
    if whole is NOT_ONE:
        try:
            whole = json.loads(text)  # one line, or a value over lines that is neither object nor array
        except json.JSONDecodeError:
            if header := csv_header(text):
                return (f"{path} is a table of comma-separated values (its columns: {header}), not prompts as batch "
                        "reads them: write each row as a JSON object, for example with python -c \"import csv, json, "
                        f"sys; [print(json.dumps(row)) for row in csv.DictReader(open(sys.argv[1]))]\" {path} > "
                        "prompts.jsonl (a \"prompt\" column, and any setting as a column of its own)")
            entries = _entries(text)[1]
            if entries and all(isinstance(data, json.JSONDecodeError) and not _looks_like_json(data)
                               for _, data in entries):
                return (f"{path} is plain text ({analysis.counted(len(entries), 'line')}, none of them "
                        f"JSON), not prompts as batch reads them: write each line as {{\"prompt\": TEXT}}, for "
                        f"example with jq -R 'select(length > 0) | {{prompt: .}}' {path} > prompts.jsonl")
            first = next((data for _, data in entries if isinstance(data, dict)), None)
            return _kind(first, path)
    first = whole[0] if isinstance(whole, list) and whole else whole
    if said := _kind(first, path):
        return said
    if _tried(whole):  # a prompt with a typo, or items that are: each said by its number
        return None
    texts = isinstance(whole, list) and bool(whole) and all(isinstance(item, str) for item in whole)
    return f"{path} is {_described(whole)}, not prompts" + (': write each as {"prompt": TEXT}' if texts else "")


def _looks_like_json(error: json.JSONDecodeError) -> bool:
    """A line that meant to be JSON (an object or array cut short, a typo): each said by its number."""
    return error.doc.lstrip().startswith(("{", "[", '"'))


def _kind(data: object, path: Path) -> str | None:
    """The sentence for a file whose (first) object is another command's output, or None."""
    if not isinstance(data, dict):
        return None
    if "matrix_version" in data:
        return f"{path} is a QA matrix (qa --json), not prompts: `python app.py analyze {path}` reads its runs"
    if "runs" in data and "seed_overlaps" in data:
        return f"{path} is analyze's figures (analyze --json's output), not prompts"
    if "nodes" in data and "edges" in data:
        return f"{path} is a sample graph (analyze --graph's output), not prompts"
    if isinstance(data.get("samples"), list) and ("request" in data or "bundle_version" in data):
        return (f"{path} holds run bundles (what batch and sweep write, or the page exports), not prompts: "
                f"`python app.py analyze {path}` reads them, and `python app.py --replay {path}` plays them")
    if isinstance(data.get("samples"), list):
        return (f"{path} holds runs written by hand (their samples), not prompts: "
                f"`python app.py analyze {path}` reads them")
    return None


LINE_KEYS = frozenset(SETTINGS) | {"reference"}  # what a line of prompts may hold besides its prompt


def _tried(document: object) -> bool:
    """``document`` (or an item of it) is a try at a prompt: it has a "prompt", a setting, or a
    name close to "prompt" (a typo each line's error names better than one sentence)."""
    if isinstance(document, list):
        return any(_tried(item) for item in document if isinstance(item, dict))
    return isinstance(document, dict) and any(
        name in LINE_KEYS or did_you_mean(name, ["prompt"]) for name in map(str, document))


def _described(document: object) -> str:
    """A JSON document in a few words: "one JSON object (with model, messages)", "a JSON array of
    3 texts"."""
    if isinstance(document, dict):
        return f"one JSON object ({_names(document)})"
    if not isinstance(document, list):
        return f"one JSON {_JSON_KINDS.get(type(document), 'value')}"
    if not document:
        return "an empty JSON array"
    kinds = {_JSON_KINDS.get(type(item), "value") for item in document}
    kind = kinds.pop() if len(kinds) == 1 else "value"
    said = f"a JSON array of {len(document)} {kind}{'s' if len(document) > 1 else ''}"
    if kind == "object":
        return f"{said} (the first {_names(document[0])})"
    return said


def _names(data: dict) -> str:
    names = list(map(str, data))
    return "with " + ", ".join(names[:4]) + (", …" if len(names) > 4 else "") if names else "empty"


_JSON_KINDS = {dict: "object", list: "array", str: "text", int: "number", float: "number", bool: "true/false"}


def not_text(path: Path) -> str | None:
    """Why a file is not text (its first bad UTF-8 byte), or None: said once for a file none of
    whose lines could be read, where a line each would only repeat it."""
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        return f"bad UTF-8 at byte {e.start}"
    except OSError:
        return None
    return None


def run_batch(runner, lines: list[Line], max_in_flight: int = 1, progress: bool = True) -> BatchResult:
    """Run every line on ``runner``; Ctrl-C or an engine failure ends it with what finished.

    Whatever ends it, no request is left running in the engine (the runner aborts them).
    """
    result = BatchResult()
    tokens = 0

    def take(position: int, outcome: Run | InvalidRequest, bar) -> None:
        nonlocal tokens
        number, reference = lines[position].number, lines[position].reference
        if isinstance(outcome, InvalidRequest):
            result.errors.append(error := LineError(number, str(outcome), lines[position].unit))
            bar.write(f"skipping {error}", file=sys.stderr)
        else:
            outcome.request["batch_line"] = number
            if reference is not None:
                outcome.request["reference"] = reference
            result.runs[number] = outcome
            tokens += sum(len(s.token_ids) for s in outcome.samples)
            bar.set_postfix(tokens=tokens, refresh=False)

    run_all(runner, [line.request for line in lines], take, result, unit="prompt", desc="batch",
            max_in_flight=max_in_flight, progress=progress)
    return result


def summary_frame(runs: dict[int, Run], answer: analysis.Extractor | str | None = None):
    """Per prompt: n, tokens, tokens per second, which samples came out identical, and what the set
    says (answer groups by ``answer``, majority vote share, answer entropy, distinct-2, mean pairwise
    similarity, Vendi score; see ``python app.py analyze`` for every measure)."""
    import pandas as pd

    rows = []
    for number, run in sorted(runs.items()):
        tokens = sum(len(s.token_ids) for s in run.samples)
        groups = analysis.identical_groups(run)
        prompt = run.request["prompt"]
        measures = analysis.set_measures(run, answer).row()
        how_many = analysis.how_many_samples(run, answer, run.request.get("reference"))
        passing = how_many.convergence.pass_at_k
        rows.append({
            "line": number,
            "prompt": analysis.truncate(prompt, 40),
            "mode": run.request["mode"],
            "n": run.n,
            "tokens": tokens,
            "seconds": round(run.wall_time or 0.0, 2),
            "tokens_per_s": round(tokens / run.wall_time, 1) if run.wall_time else None,
            "identical": bool(groups),
            "identical_samples": ", ".join("=".join(map(str, g)) for g in groups),
            "answers": measures["groups"],
            "majority": analysis.majority_text(measures["majority"], measures["majority_size"],
                                               measures["tied_answers"], ANSWER_CHARS),
            "vote_share": _rounded(measures["vote_share"], 2),
            "answer_entropy": _rounded(measures["answer_entropy_bits"], 2),
            "distinct_2": _rounded(measures["distinct_2"], 2),
            "similarity": _rounded(measures["similarity_mean"], 2),
            "vendi": _rounded(measures["vendi"], 2),
            "settled_at": analysis.settled_cell(how_many.convergence.settled.at, run.n),
            "pass_at_1": _rounded(passing.at(1), 2) if passing else None,
            "pass_at_n": _rounded(passing.at(run.n), 2) if passing else None,
            "eigv": _rounded(how_many.confidence.eigv_jaccard, 2),
        })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def execute(runner, lines: list[Line], errors: list[LineError], out: Path | None = None,
            summary: bool = False, max_in_flight: int = 1, progress: bool = True,
            answer: analysis.Extractor | str | None = None) -> int:
    """Run the lines, write the bundles (what finished, in input order), print the summary, and
    return the exit status."""
    result = run_batch(runner, lines, max_in_flight, progress)
    write_bundles(out, (result.runs[number].to_json() for number in sorted(result.runs)))
    # Each bad line was reported as it was found; the recap names them again, for long runs.
    skipped = sorted(e.number for e in errors + result.errors)
    where = f" to {out}" if out is not None else ""
    unit = (errors + result.errors)[0].unit if skipped else "line"
    recap = f"; skipped {unit}(s) {', '.join(map(str, skipped))}" if skipped else ""
    print(f"wrote {len(result.runs)} run(s){where}{recap}", file=sys.stderr)
    if summary and result.runs:
        refused = print_summary(lambda: summary_frame(result.runs, answer), out)
        if refused is not None:
            return refused
    ended = result.told(len(lines) - len(result.runs) - len(result.errors), "prompt(s)")
    if ended is not None:
        return ended
    return exits.FAILED if skipped else exits.OK


def checked_lines(args, parser: argparse.ArgumentParser) -> tuple[list[Line], list[LineError]]:
    """The flags and the file's lines, checked before any engine starts (``PlaygroundParser.parse``
    runs this before vLLM's import when it can): a usage error names what is wrong at once."""
    try:
        defaults = PlaygroundParser.sampling_settings(args)
    except InvalidRequest as e:
        parser.error(str(e))
    check_out_path(parser, "--out", args.out)
    check_remote_flags(parser, args)
    check_distinct(parser, {"input": Path(args.input)}, {"--out": args.out})
    try:
        lines, errors = read_lines(Path(args.input), defaults, args.max_n, args.reference, limits_before_engine(args))
        # a line's own reference too, not only --reference's
        note_whole_text_reference(next((line.reference for line in lines if line.reference is not None), None),
                                  args.answer)
    except OSError as e:
        parser.error(f"cannot read {args.input}: {e.strerror or e}")
    if not lines and errors:  # a whole file of something else: said once, as a usage error
        if binary := not_text(Path(args.input)):
            parser.error(f"{args.input} is not text ({binary}), so not prompts: {ONE_PER_LINE}")
        if other := not_prompts(Path(args.input)):
            parser.error(f"{other}. batch reads {ONE_PER_LINE}")
        if len(errors) > 1 and len({e.message for e in errors}) == 1:  # a flag every line takes, most often
            parser.error(f"every {errors[0].unit} of {args.input} is refused the same way: {errors[0].message} "
                         "(the command line's settings apply to each line that does not set its own)")
    return lines, errors


@exits.as_status
def main(argv: list[str] | None = None) -> int:
    # Before vLLM is imported (by the parser): its log goes to stdout by default, where bundles go.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, engine_kwargs, (lines, errors) = parser.parse_checked(argv, checked_lines)
    say_skipped(errors, f"is {args.input} a file of prompts, {ONE_PER_LINE}?")
    if not lines:  # --out, if there is one, keeps what an earlier batch wrote there
        kept = f"; {args.out} is left as it was" if args.out is not None else ""
        print("no line to run" + ("" if errors else f": {args.input} has no line but blank ones (batch reads "
                                  f"{ONE_PER_LINE})") + kept, file=sys.stderr)
        return exits.FAILED  # nothing ran: a script must not go on to read an --out from before

    # KV cache for the prompts in flight at once (--max-in-flight), each with up to --max-n samples.
    workload = Workload(max_n=args.max_n, concurrency=args.max_in_flight)
    with start_runner(args, engine_kwargs, parser.parser.error, workload) as runner:
        return execute(runner, lines, errors, args.out, args.summary, args.max_in_flight, answer=args.answer)
