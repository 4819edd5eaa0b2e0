"""``python app.py --replay runs.jsonl``: the page over saved runs instead of an engine.

The runs play as they streamed (``--replay-pace``: at their recorded pace, k times faster, or at a
rate of tokens per second), through the same seam as an engine's, so every tab is live: a GPU run
demoed on a laptop, a bug report replayed. No engine starts. Run plays the run of the form's
prompt whose settings are closest to the form's, else the file's next run, and the page says which
(``playground.backends.replay_library``). ``synthetic:NxTOKENS`` stands for a made-up run of that
size (the benchmark plays one at a GPU's pace).
"""

from __future__ import annotations

import argparse
import sys

from playground.errors import InvalidBundle, InvalidRequest


def add_replay_flags(group) -> None:
    group.add_argument("--replay", nargs="+", default=None, metavar="FILE",
                       help="Serve these saved runs (bundles, or the JSONL of batch or sweep; synthetic:NxTOKENS for "
                            "a made-up run with top-5 logprobs, synthetic:NxTOKENS:K with top-K, :0 without) "
                            "instead of an engine: Run plays them as they streamed. No engine starts.")
    group.add_argument("--replay-pace", default="recorded", metavar="PACE",
                       help='The pace of --replay: "recorded" (default), a speed-up like x4, or a rate like '
                            '"10000 tok/s".')


def read_replay(sources: list[str], pace_text: str, parser: argparse.ArgumentParser):
    """``((sources, pace_text), library, pace)`` read from the flags, before vLLM is imported: a file that is
    missing or cannot be replayed, or a pace that is not one, is a usage error (exit 2) at once."""
    from playground.backends.pace import Pace
    from playground.backends.replay_library import Library

    try:
        return (sources, pace_text), Library.read(sources), Pace.parse(pace_text)
    except (InvalidBundle, InvalidRequest) as e:
        parser.error(f"--replay: {e}")


def replay_backend(args, parser: argparse.ArgumentParser, read=None):
    """The ReplayBackend the flags ask for, over the runs ``read_replay`` read (read again when
    the full parser saw other files: an abbreviated flag)."""
    from playground.backends.replay import RUN_RULE, ReplayBackend

    if args.backend != "embedded":
        parser.error("--replay serves saved runs without an engine: leave out --backend openai")
    if read is None or read[0] != (args.replay, args.replay_pace):
        read = read_replay(args.replay, args.replay_pace, parser)
    _, library, pace = read
    print(f"replaying {library.name}: {len(library.by_id)} run(s) at {pace.label}; no engine", file=sys.stderr)
    return ReplayBackend(library, pace, max_n=args.max_n, report=_say,
                         note=f"saved runs replayed at {pace.label}: {RUN_RULE}")


def _say(played) -> None:
    print(played.line(), file=sys.stderr, flush=True)
