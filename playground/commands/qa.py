"""The command ``python app.py qa``: runs the QA matrix (playground.qa.matrix) and prints its table and
report, and with --json writes the whole matrix to a file.

The matrix runs one request under every output_kind (CUMULATIVE, DELTA, FINAL_ONLY), through the
playground's fan-out (wrapper) and vLLM's own n > 1 (native), on the async front end (AsyncLLM),
the sync one (LLMEngine) and, with --backend openai, a vLLM server; each cell is held to the
contract of its output_kind (what each event carries, the final samples the same whatever the
kind), to the path's conduct (no output changed after it was yielded, the parent's id on every
output, the engine's request count back to 0 after the run and after a stopped one), and the
cells' tokens are compared. Seeded results depend on the batch, so a divergence is reported with
its first token, not counted as a broken rule.

    python app.py qa --prompt "Once upon a time" --n 4 --seed 1 [sampling flags] [vLLM engine flags]
                     [--paths async,sync,remote] [--backend openai --base-url URL] [--json PATH]

Exit status: 0 every cell holds every rule; 1 a rule broke in some cell (or a cell failed to run);
2 a usage error (bad flag, invalid setting, unreachable server); 130 interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import sys
from collections.abc import Sequence

from playground.commands import exits
from playground.commands.cli import (
    PlaygroundParser,
    add_max_n_flag,
    add_remote_flags,
    check_out_path,
    check_remote_flags,
    create_remote_backend,
    limits_before_engine,
    write_atomically,
)
from playground.errors import InvalidRequest, PlaygroundError
from playground.qa import matrix as qa
from playground.request import SampleRequest

FRONT_ENDS = ("async", "sync", "remote")
TABLE_WIDTH = 60  # characters per printed cell


# --- the command ---------------------------------------------------------------------------------

def build_parser():
    def add_own(group) -> None:
        group.add_argument("--prompt", required=True, help="The prompt every cell samples from.")
        group.add_argument("--paths", type=_front_ends, default=None, metavar="LIST",
                           help="Front ends to check, comma-separated, of async, sync, remote (default: "
                                "async,sync, plus remote with --backend openai).")
        group.add_argument("--json", type=pathlib.Path, metavar="PATH",
                           help="Write the whole matrix (every cell's run bundle, verdicts, comparisons) here.")
        add_max_n_flag(group, "request")
        add_remote_flags(group)

    parser = PlaygroundParser("python app.py qa", __doc__, add_own, sampling=True, arguments="--prompt TEXT",
                              not_sampling=("output_kind", "mode"))  # the matrix runs every one of each
    return parser


def _front_ends(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in FRONT_ENDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"takes a comma-separated list of {', '.join(FRONT_ENDS)}, "
                                         f"got {text!r}")
    return list(dict.fromkeys(names))


def build_paths(args, engine_kwargs: dict, front_ends: list[str], owner: contextlib.ExitStack) -> list[qa.SamplingPath]:
    """Start the engines the front ends need and return their paths; ``owner`` shuts each engine
    down however the command ends.

    This is the seam a test replaces (engine starts take a minute or more here): ``main`` calls it
    only when no paths are handed to it.
    """
    from playground.backends.embedded import EmbeddedBackend
    from playground.backends.sync import SyncRunner

    paths: list[qa.SamplingPath] = []
    if "remote" in front_ends:
        # RemoteError: a usage error. Nothing to shut down: each operation opens its own HTTP client.
        paths += qa.backend_paths(create_remote_backend(args, max_n=args.max_n), "remote")
    # Each engine's KV cache is sized to the matrix's work (one cell at a time), so two fit.
    if "async" in front_ends:
        print("starting the async engine (AsyncLLM)…", file=sys.stderr)
        backend = owner.enter_context(EmbeddedBackend.start(args.model, max_n=args.max_n, **engine_kwargs))
        paths += qa.backend_paths(backend, "async")
    if "sync" in front_ends:
        print("starting the sync engine (LLMEngine)…", file=sys.stderr)
        runner = owner.enter_context(SyncRunner.start(args.model, max_n=args.max_n, **engine_kwargs))
        paths += qa.sync_paths(runner, "sync")
    order = {name: k for k, name in enumerate(FRONT_ENDS)}
    paths.sort(key=lambda p: order[p.name.split()[0]])  # async, sync, remote: the table's column order
    return paths


@exits.as_status
def main(argv: list[str] | None = None, paths: Sequence[qa.SamplingPath] | None = None) -> int:
    """``python app.py qa``. ``paths``: already-running paths to use instead of starting engines
    (tests: an engine start costs a minute or more); they are left running."""
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries the table only
    with contextlib.ExitStack() as owner:
        return _main(argv, paths, owner)


def checked_request(args, parser: argparse.ArgumentParser) -> tuple[SampleRequest, list[str]]:
    """The request and the front ends the flags ask for, checked before any engine starts
    (``PlaygroundParser.parse_checked`` runs this before vLLM's import when it can)."""
    try:
        settings = PlaygroundParser.sampling_settings(args)
        request = SampleRequest.from_user(prompt=args.prompt, **settings)
        request.check(limits_before_engine(args))
    except InvalidRequest as e:
        parser.error(str(e))
    if given := [name for name in ("output_kind", "mode") if name in settings]:
        parser.error(f"--{given[0].replace('_', '-')}: the matrix runs every output_kind, in wrapper and "
                     "native mode: leave it out")
    check_out_path(parser, "--json", args.json)
    check_remote_flags(parser, args)
    front_ends = args.paths or ["async", "sync"] + (["remote"] if args.backend == "openai" else [])
    if "remote" in front_ends and args.backend != "openai":
        parser.error("--paths remote needs --backend openai --base-url URL")
    return request, front_ends


def _main(argv: list[str] | None, paths: Sequence[qa.SamplingPath] | None, owner: contextlib.ExitStack) -> int:
    """The command, with the engines it starts owned by ``owner``."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, engine_kwargs, (request, front_ends) = parser.parse_checked(argv, checked_request)
    if paths is None:
        try:
            paths = build_paths(args, engine_kwargs, front_ends, owner)
        except PlaygroundError as e:
            parser.parser.error(str(e))

    def progress(done: int, total: int, label: str) -> None:
        print(f"cell {done + 1}/{total}: {label}", file=sys.stderr, flush=True)

    try:
        matrix = asyncio.run(qa.run_matrix(request, paths, on_cell=progress))
    except InvalidRequest as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.USAGE
    print(matrix.table().to_string(max_colwidth=TABLE_WIDTH))  # full messages follow under "Broken rules"
    print()
    print(matrix.report())
    sys.stdout.flush()
    if args.json is not None:
        write_atomically(args.json, [matrix.to_json(indent=1)])
        print(f"wrote the matrix to {args.json}", file=sys.stderr)
    return exits.OK if matrix.ok else exits.FAILED
