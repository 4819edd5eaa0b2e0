"""The exit statuses of every command (``python app.py batch | qa | analyze | sweep`` and
``python -m playground.bench``), one meaning each, so a script can tell a finding from a mistake:

- ``OK`` (0): all of it ran and held: every line (batch), every rule in every cell (qa), every
  bundle analysed (analyze), every value (sweep), the benchmark, or every goal of its soak (bench);
- ``FAILED`` (1): it ran, and part of it failed: a line skipped or the engine failed (batch), a
  rule broke or a cell could not run (qa), a line skipped or no bundle at all (analyze), a value
  refused or the engine failed (sweep), a goal of the soak missed (bench). batch and sweep still
  write the runs that finished;
- ``USAGE`` (2): it could not run as asked: a bad flag, an unreadable input, an invalid setting, an
  unreachable server (argparse's own status for a bad flag);
- ``INTERRUPTED`` (130): stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130


def as_status(main: Callable[..., int]) -> Callable[..., int]:
    """A command's ``main`` that returns its exit status however it ends, so in-process callers
    (``app.py``, tests) get a number: argparse's own exits (2 for a bad flag, 0 for --help) and
    Ctrl-C (said on stderr) included."""

    @functools.wraps(main)
    def status(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else USAGE
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return INTERRUPTED

    return status
