"""The playground's command line.

    python app.py [playground flags] [any vLLM engine flag]     open the playground in a browser
    python app.py batch INPUT.jsonl [--out runs.jsonl] ...      sample a file of prompts, no browser
    python app.py qa --prompt ... --n 4 --seed 1                check output_kind rules, as a table
    python app.py analyze RUNS.jsonl [--answer ...] [--json OUT] what the n samples say together (no engine)

Every vLLM engine flag works (``--enforce-eager``, ``--dtype``, ``--max-model-len``, ...): the
parser is vLLM's own ``AsyncEngineArgs.add_cli_args``. Without ``--model`` the default model
(SmolLM2-135M-Instruct, prepared offline from a PyPI wheel) is used.
"""

from __future__ import annotations

import importlib
import os
import sys

from playground import commands, terminal
from playground.commands import COMMANDS
from playground.errors import ModelUnavailable

# Before anything imports vLLM or torch; this runs in the engine core process too (a spawned
# process imports the main module again), so its start-up noise is silenced as well.
terminal.quiet()

# The first argument names a command; anything else is the app's own flags (serve).
SERVE = "playground.commands.serve"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(commands.module(argv[0])).main(argv[1:])
    if argv and not argv[0].startswith("-"):  # the page takes no word before its flags: a command, mistyped
        from playground.request import did_you_mean

        print(f"python app.py: {argv[0]!r} is not a command{did_you_mean(argv[0], COMMANDS)}. "
              f"Commands: {', '.join(COMMANDS)}, each with --help; without one, python app.py serves the page.",
              file=sys.stderr)
        return 2
    return importlib.import_module(SERVE).main(argv)


if __name__ == "__main__":
    try:
        status = main()
    except KeyboardInterrupt:  # Ctrl-C outside the server (a command's own stop says what it kept)
        status = 130
    except BrokenPipeError:  # the reader of its output went away (`| head`): stop, as a shell's tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the last flush says nothing
        status = 141  # 128 + SIGPIPE
    except ModelUnavailable as e:  # a flag's model that is not there: a usage error, in a sentence
        print(f"error: {e}", file=sys.stderr)
        status = 2
    except SystemExit as e:  # a usage error, or `kill`
        status = e.code
        if status is not None and not isinstance(status, int):  # sys.exit("a sentence"): said now
            print(status, file=sys.stderr)
            status = 1
    terminal.quiet_exit()  # after the last line: not the interpreter's finalization noise (any other error
    sys.exit(status)       # is not caught here, and prints its traceback as usual)
