"""``python -m playground.bench``: run the benchmark (see playground.bench). Its terminal is quiet as
the app's (playground/terminal.py): the quieting comes before anything imports vLLM or torch."""

import sys

from playground import terminal

terminal.quiet()

from playground.bench.command import main  # noqa: E402 (after the quieting)

if __name__ == "__main__":
    sys.exit(main())
