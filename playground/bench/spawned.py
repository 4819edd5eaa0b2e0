"""What a process the benchmark spawns (vLLM's engine core) runs first, as its main module: the
terminal's quieting, as app.py gives the app's engine core. Python's multiprocessing runs the
parent's main module again in a spawned process, but never a package's ``__main__``, so
``python -m playground.bench`` names this module as its main one for them (bench/__main__.py)."""

from playground import terminal

terminal.quiet()
