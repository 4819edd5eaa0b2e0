"""``python -m playground.bench``: run the benchmark (see playground.bench)."""

import sys

from playground.bench.command import main

if __name__ == "__main__":
    sys.exit(main())
