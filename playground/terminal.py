"""What the terminal shows: the playground's own lines, and real warnings, not vLLM's and torch's
start-up noise.

A newcomer's first screen (``make run``) used to be a hundred lines of engine configuration, Triton
and deprecation messages before the page's address. They are silenced at their source, in every
process (the app and the engine core it spawns), by what each library offers: vLLM's log level and
a filter on its log handler (``VLLM_LOGGING_CONFIG_PATH``), Python's warning filters
(``PYTHONWARNINGS`` reaches the spawned process), and torch's C++ log level. Each silenced message
is listed below with why it is harmless here; everything else, warnings included, still shows.
``VLLM_LOGGING_LEVEL=INFO`` (or any of these variables set by hand) brings vLLM's own lines back.
The last screen, after Ctrl-C, is kept as clean: the engine core's end on the same signal is not
reported as an error (``STOPPING_NOISE``), nor are the objects alive when the interpreter ends
(``quiet_exit``), nor a progress bar's semaphore (``_no_process_lock_for_progress_bars``).

``quiet()`` must run before vLLM or torch is imported: app.py calls it at its top, which the
engine core process runs too (a spawned process imports the main module again).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable

# Messages that say nothing a person of the playground can act on, with why.
NOISE = {
    r"Triton is installed, but doesn't include CPU backend": "the CPU build runs without Triton",
    r"Triton is not installed\. triton-cpu is expected": "the CPU build runs without Triton",
    r"Model Runner V2 requires Triton": "the V1 model runner is the CPU's",
    r"Enforce eager set, disabling torch\.compile": "eager mode is the playground's CPU default (fast start)",
    r"Inductor compilation was disabled by user settings": "follows from eager mode",
    r"is not found in LD_PRELOAD": "measured: preloading tcmalloc or libiomp does not speed this model up",
    r"OMP_NUM_THREADS=\d+ is set; leaving Torch threads": "the playground sets the engine's threads itself",
    r"Reset SSM cache type to float32 for accelerated GDN mamba backend":
        "said for every model on a CPU with AVX512-BF16; the default model has no SSM state to keep",
    r"\[shutdown\] Process manager: force killing remaining process":
        "on the CPU a stopped engine core is not waited for while it collects its heap (backends/engine.exit_wait_s)",
}
_NOISE = re.compile("|".join(NOISE))
# Said while the app stops on Ctrl-C or `kill`: a terminal sends Ctrl-C to the whole process
# group, so the engine core gets it too and may end first, and vLLM then reports its end as an
# error (with a traceback) though it is the stop that was asked for. Any other time they show.
STOPPING_NOISE = {
    r"AsyncLLM output_handler failed": "the engine core ended on the same Ctrl-C",
    r"MPClient: engine core exited unexpectedly": "the engine core ended on the same Ctrl-C",
}
_STOPPING_NOISE = re.compile("|".join(STOPPING_NOISE))
_stopping = False
_at_stop: list[Callable[[], None]] = []
# torch's deprecation of an alias that vLLM's CPU Triton shim reads when it is imported.
FUTURE_WARNINGS = ("vllm.triton_utils.dispatcher",)
LOG_FORMAT = "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"


class Quiet(logging.Filter):
    """Drops the records of ``NOISE`` (and of ``STOPPING_NOISE`` once the app is stopping); lets
    everything else through."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format: not ours to judge
            return True
        return not (_NOISE.search(message) or (_stopping and _STOPPING_NOISE.search(message)))


class GoneStreams(logging.Filter):
    """Drops the traceback of a page's event stream that Gradio ends after its page went away: a
    reload just as a run ends makes Gradio's ``sse_stream`` raise a 404 (or a KeyError of the
    session it forgot) after the response began, and the server prints it as an error. Nothing was
    lost: the run was kept as it ended, and the reloaded page shows it. Any other error shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, KeyError) or getattr(error, "status_code", None) == 404:
                frames = traceback.extract_tb(error.__traceback__)
                if any(f.name == "sse_stream" and os.path.join("gradio", "routes.py") in f.filename for f in frames):
                    return False
            error = error.__cause__ or error.__context__
        return True


def quiet_gone_streams() -> None:
    """``GoneStreams`` on the server's error log (uvicorn's)."""
    logging.getLogger("uvicorn.error").addFilter(GoneStreams())


def logging_config(level: str) -> dict:
    """vLLM's own logging setup (its format, handler and logger), with the ``Quiet`` filter, on
    stderr: the commands' stdout is data (a sweep's table, a batch's summary), never log lines."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"quiet": {"()": f"{__name__}.Quiet"}},
        "formatters": {"vllm": {"()": "vllm.logging_utils.NewLineFormatter", "datefmt": "%m-%d %H:%M:%S",
                                "format": LOG_FORMAT, "log_level": level}},
        "handlers": {"vllm": {"class": "logging.StreamHandler", "formatter": "vllm", "level": level,
                              "stream": "ext://sys.stderr", "filters": ["quiet"]}},
        "loggers": {"vllm": {"handlers": ["vllm"], "level": level, "propagate": False}},
    }


def quiet() -> None:
    """Silence the noise in this process and in the processes it starts; a setting already in the
    environment wins. Before vLLM configures its logging, its early messages meet the filter too."""
    level = os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        path = os.path.join(tempfile.gettempdir(), f"vllm-playground-logging-{level}.json")
        with open(path, "w", encoding="utf-8") as file:
            json.dump(logging_config(level), file)
        os.environ["VLLM_LOGGING_CONFIG_PATH"] = path
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # torch's C++ notes, e.g. "NUMA binding: ..."
    given = [f for f in os.environ.get("PYTHONWARNINGS", "").split(",") if f]
    wanted = [f"ignore::FutureWarning:{module}" for module in FUTURE_WARNINGS]
    os.environ["PYTHONWARNINGS"] = ",".join(given + [f for f in wanted if f not in given])
    for module in FUTURE_WARNINGS:
        warnings.filterwarnings("ignore", category=FutureWarning, module=re.escape(module))
    _no_process_lock_for_progress_bars()
    early = logging.getLogger("vllm")
    if not early.handlers:  # vLLM replaces this handler with its own (filtered) when it configures logging
        handler = logging.StreamHandler()
        handler.addFilter(Quiet())
        early.addHandler(handler)


def stopping() -> None:
    """The app is stopping on a signal: from now on, the engine's end is no news (``STOPPING_NOISE``),
    and what asked to hear of the stop (``at_stop``) says its last."""
    global _stopping
    _stopping = True
    while _at_stop:
        _at_stop.pop()()


def at_stop(said: Callable[[], None]) -> None:
    """``said`` is called once when the app is stopping on a signal (the runs' log: the runs it cuts short)."""
    _at_stop.append(said)


def _no_process_lock_for_progress_bars() -> None:
    """tqdm guards its bars with a lock shared between processes, a POSIX semaphore that Python's
    resource tracker watches. The engine core draws one bar (loading weights) and is stopped without
    finalizing (``backends/engine.exit_wait_s``), so the tracker said "1 leaked semaphore objects"
    at every exit. Our processes draw their bars from one process each: a thread lock is enough."""
    import threading

    with contextlib.suppress(ImportError):
        from tqdm import tqdm

        tqdm.set_lock(threading.RLock())


def quiet_exit() -> None:
    """Silence what the interpreter prints while it finalizes, once a command has ended and said
    its last line. Triton's bindings, imported through vLLM (xgrammar) and unused on a CPU, list
    hundreds of their objects as "leaked" when the process ends: nanobind's check at unload, which
    only means they were still alive at exit, thirty lines of it after every Ctrl-C. Everything
    the command wrote is flushed first; an error that ends a command is printed before this runs."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
