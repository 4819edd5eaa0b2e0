"""How one setting changes the n samples: ``python app.py sweep --prompt TEXT --param P --values V ...``

    python app.py sweep --prompt "Once upon a time" --param temperature --values 0.3 0.7 1.0 1.3 \\
        --n 8 --seed 1 --out sweep.jsonl
    python app.py sweep --prompt "Name a colour:" --param seed --values 1 100 1000 --n 4
    python app.py sweep --prompt "What is 17 * 23?" --param temperature --values 0.3 1.0 --n 8 --answer last-number

One full run per value (temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty,
frequency_penalty; or ``--param seed``: a list of base seeds, or FROM:COUNT for COUNT seeds n apart,
so no two runs share a child seed), all with the same prompt, n and base
seed (sample i uses seed + i in every run), one after another on an otherwise idle engine, so what
differs between the runs comes from the setting alone. Without ``--seed`` one random base seed is
drawn for the whole sweep (and recorded).

Each output line is a run bundle (``Run.to_json()``), in the order of the values; its
``request.sweep`` says which sweep it belongs to (param, value, position, values). Without
``--out`` the bundles go to stdout and the summary table to stderr. With ``--answer`` the table has
each value's majority answer and its vote share (self-consistency). ``python app.py analyze --html``
(or the page's upload) turns the file into a report.

``--backend openai --base-url http://HOST:8000/v1`` runs the sweep on a vLLM server (``vllm serve``)
instead of an engine started here: the same requests, seeds and bundles.

At most 12 values, and n up to --max-n. Ctrl-C aborts the run in progress and writes the runs that
finished.

Exit status: 0 every value ran; 1 the engine refused a value or failed (the runs that finished are
still written); 2 a usage error (bad flag, a value or a sweep that breaks a limit); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from playground import analysis
from playground.commands import exits
from playground.commands.analyze import ANSWER_CHARS, extractor_arg
from playground.commands.cli import (
    PlaygroundParser,
    add_max_n_flag,
    add_remote_flags,
    check_out_path,
    check_remote_flags,
    limits_before_engine,
    note_whole_text_reference,
)
from playground.commands.progress import Ending, print_summary, run_all, start_runner, write_bundles
from playground.errors import InvalidRequest
from playground.run import Run
from playground.sampling.sweep_request import SWEEP_SETTINGS, SweepRequest, seed_overlap_note

NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
SUMMARY_COLUMNS = ["value", "status", "seeds", "tokens", "mean_tokens", "mean_prob", "distinct_samples",
                   "identical_samples"]


@dataclass
class SweepResult(Ending):
    runs: list[Run] = field(default_factory=list)  # finished runs, in value order
    refused: list[str] = field(default_factory=list)  # a sentence per value the engine refused


def build_parser() -> PlaygroundParser:
    def add_own(group) -> None:
        group.add_argument("--prompt", required=True, help="The prompt every run samples.")
        group.add_argument("--param", required=True, choices=SWEEP_SETTINGS, metavar="SETTING",
                           help=f"The setting to vary: {', '.join(SWEEP_SETTINGS)} (seed: a list of base seeds).")
        group.add_argument("--values", required=True, nargs="+", metavar="V",
                           help="The values, one full run each, in this order (at most 12).")
        group.add_argument("--out", type=Path, metavar="PATH",
                           help="Write the run bundles here (atomically), not to stdout.")
        add_max_n_flag(group, "run")
        group.add_argument("--answer", type=extractor_arg, default=None, metavar="EXTRACTOR",
                           help="Add each value's majority answer, vote share and when it settled to the table, "
                                "answers read as: normalized, first-line, last-number, boxed or regex:PATTERN "
                                "(one group).")
        group.add_argument("--reference", metavar="ANSWER",
                           help="The right answer (kept in every bundle): with --answer the table adds pass@1 and "
                                "pass@n per value.")
        add_remote_flags(group)

    parser = PlaygroundParser("python app.py sweep", __doc__, add_own, sampling=True,
                              arguments="--prompt TEXT --param SETTING --values V [V ...]")
    return parser


def join_values(argv: list[str]) -> list[str]:
    """``--values -0.5 0 0.5`` as ``--values=-0.5,0,0.5``: vLLM's parser reads any token like
    ``-0.5`` as a dotted config flag (``-0`` . ``5``), and penalties sweep negative values."""
    out, i = [], 0
    while i < len(argv):
        j = i + 1
        if argv[i] == "--values":
            while j < len(argv) and (not argv[j].startswith("-") or NUMBER.match(argv[j])):
                j += 1
        out.append(f"--values={','.join(argv[i + 1:j])}" if j > i + 1 else argv[i])
        i = j
    return out


def sweep_from_args(args: argparse.Namespace) -> SweepRequest:
    """The checked sweep the flags ask for (before any engine starts); InvalidRequest says why not."""
    settings = PlaygroundParser.sampling_settings(args)
    if args.param in settings:
        flag = "--seed" if args.param == "seed" else f"--{args.param.replace('_', '-')}"
        raise InvalidRequest(f"--param {args.param} sweeps {args.param} over --values: leave out {flag}")
    sweep = SweepRequest.from_user(args.param, args.values, prompt=args.prompt, **settings)
    sweep.reference = args.reference
    note_whole_text_reference(args.reference, args.answer)
    sweep.check(limits_before_engine(args))  # the engine's context comes later
    if note := seed_overlap_note(sweep):
        print(f"note: {note}", file=sys.stderr)
    return sweep


def checked_sweep(args, parser: argparse.ArgumentParser) -> SweepRequest:
    """The sweep and --out, checked before any engine starts (``PlaygroundParser.parse`` runs this
    before vLLM's import when it can): a usage error names what is wrong at once."""
    try:
        sweep = sweep_from_args(args)
    except InvalidRequest as e:
        parser.error(str(e))
    check_out_path(parser, "--out", args.out)
    check_remote_flags(parser, args)
    return sweep


def run_sweep(runner, sweep: SweepRequest, progress: bool = True) -> SweepResult:
    """Run every value on ``runner``, one at a time; Ctrl-C or an engine failure ends it with
    what finished, and leaves nothing running in the engine (the runner aborts it)."""
    sweep.fix_seed()
    result = SweepResult()

    def take(position: int, outcome: Run | InvalidRequest, bar) -> None:
        value = sweep.values[position]
        if isinstance(outcome, InvalidRequest):
            result.refused.append(message := f"{sweep.param}={value}: {outcome}")
            bar.write(f"skipping {message}", file=sys.stderr)
        else:
            result.runs.append(sweep.mark(outcome, position))
            bar.set_postfix({sweep.param: value}, refresh=False)

    run_all(runner, sweep.requests(), take, result, unit="run", desc=f"sweep {sweep.param}", progress=progress)
    return result


def summary_frame(runs: list[Run], answer: analysis.Extractor | None = None):
    """Per value: the run's status, seeds, tokens, mean length and probability, distinct samples;
    with ``answer``, the majority answer and its vote share."""
    table = analysis.sweep_table(runs, analysis.with_answers(None, answer, chars=ANSWER_CHARS))
    if table.empty:
        return table
    table = analysis.sweep_table_for_people(table)
    answered = ["majority", "vote_share", "settled_at"] + (["pass_at_1", "pass_at_n"] if "pass_at_1" in table else [])
    table = table.reindex(columns=SUMMARY_COLUMNS + (answered if answer is not None else []))
    table = table.round({"mean_tokens": 1, "mean_prob": 3, "vote_share": 2, "pass_at_1": 2, "pass_at_n": 2})
    return table.rename(columns={"value": runs[0].request["sweep"]["param"]})


def execute(runner, sweep: SweepRequest, out: Path | None = None, progress: bool = True,
            answer: analysis.Extractor | None = None) -> int:
    """Run the sweep, write the bundles of the runs that finished, print the summary, and return
    the exit status."""
    result = run_sweep(runner, sweep, progress)
    write_bundles(out, (run.to_json() for run in result.runs))
    where = f" to {out}" if out is not None else ""
    seeds = (f"base seeds {', '.join(map(str, sweep.values))}" if sweep.param == "seed"
             else f"base seed {sweep.base.seed}")
    print(f"wrote {len(result.runs)} of {len(sweep.values)} run(s){where} ({seeds})", file=sys.stderr)
    if result.runs:
        refused = print_summary(lambda: summary_frame(result.runs, answer), out)
        if refused is not None:
            return refused
    ended = result.told(len(sweep.values) - len(result.runs) - len(result.refused), "value(s)")
    if ended is not None:
        return ended
    return exits.FAILED if result.refused else exits.OK


@exits.as_status
def main(argv: list[str] | None = None) -> int:
    # Before vLLM is imported (by the parser): its log goes to stdout by default, where bundles go.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    parser = build_parser()
    argv = join_values(list(sys.argv[1:] if argv is None else argv))
    args, engine_kwargs, sweep = parser.parse_checked(argv, checked_sweep)

    with start_runner(args, engine_kwargs, parser.parser.error) as runner:
        try:
            sweep.check(runner.limits)  # the engine's own limits: its context, its logprobs cap
        except InvalidRequest as e:
            print(f"error: {e}", file=sys.stderr)
            return exits.USAGE
        return execute(runner, sweep, args.out, answer=args.answer)
