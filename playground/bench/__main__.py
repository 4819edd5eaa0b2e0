"""``python -m playground.bench``: run the benchmark (see playground.bench). Its terminal is quiet as
the app's (playground/terminal.py): the quieting comes before anything imports vLLM or torch."""

import importlib.util
import sys

from playground import terminal

terminal.quiet()
# The processes it spawns quiet themselves too (see spawned.py).
sys.modules["__main__"].__spec__ = importlib.util.find_spec("playground.bench.spawned")

from playground.bench.command import main  # noqa: E402 (after the quieting)

if __name__ == "__main__":
    sys.exit(main())
