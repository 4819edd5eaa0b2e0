"""``python app.py``: open the playground in a browser, on the embedded engine or a vLLM server."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from playground import terminal
from playground.bundles import PAGE_MAX_MB
from playground.commands import listing
from playground.commands.cli import (
    PlaygroundParser,
    add_max_n_flag,
    add_remote_flags,
    check_remote_flags,
    connect_remote,
    positive_int,
    usage_line,
)
from playground.commands.exits import USAGE
from playground.commands.replaying import add_replay_flags, read_replay, replay_backend
from playground.store import RunStore, StoreError, StoreLimits, default_path

DESCRIPTION = ("Parallel-sampling playground for vLLM. Without a command it serves the page (its flags below,\n"
               "then vLLM's engine flags). Commands, each with its own --help:\n" + listing())
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_CONCURRENCY = 8


def add_serve_flags(group) -> None:
    group.add_argument("--host", default="127.0.0.1",
                       help="Address to bind (default 127.0.0.1: only this machine can connect).")
    group.add_argument("--port", type=positive_int(65535), default=7860, help="Port (default 7860).")
    add_max_n_flag(group, "request", "; enforced on the server")
    group.add_argument("--auth", default=os.environ.get("PLAYGROUND_AUTH"),
                       help="user:password required to open the page and call the API "
                            "(or set PLAYGROUND_AUTH). Off by default.")
    group.add_argument("--root-path", type=_root_path, default=os.environ.get("GRADIO_ROOT_PATH", ""),
                       metavar="PATH", help="The path a reverse proxy serves the app under, e.g. /playground (or "
                                            "GRADIO_ROOT_PATH): the page's own addresses, its login and its links "
                                            "then carry it.")
    group.add_argument("--quiet-runs", action="store_true",
                       help="No line per run in the terminal (by default each run's end is logged: its id, who asked, "
                            "its shape and tokens, never its prompt or text).")
    group.add_argument("--share", action="store_true",
                       help="Create a public gradio.live link. Off unless asked for.")
    group.add_argument("--concurrency", type=positive_int(256), default=DEFAULT_CONCURRENCY,
                       help=f"Runs sampled at once (default {DEFAULT_CONCURRENCY}); the engine batches them.")
    group.add_argument("--queue-size", type=positive_int(10_000), default=64,
                       help="Runs that may wait in the queue before new ones are refused (default 64).")
    group.add_argument("--max-file-mb", type=positive_int(10_000), default=PAGE_MAX_MB,
                       metavar="MB", help=f"The largest saved run (bundle or JSONL) the page opens, in MB (default "
                                          f"{PAGE_MAX_MB}): an upload is read whole by the server.")
    group.add_argument("--embedding-model", default=None, metavar="MODEL",
                       help="A sentence-embedding model (a folder, or a Hugging Face id already in the local cache) "
                            "the Set tab may group samples by meaning with. Off by default; loaded on first use, "
                            "never downloaded.")
    add_store_flags(group)
    add_remote_flags(group)
    add_replay_flags(group)


def add_store_flags(group) -> None:
    group.add_argument("--runs-db", type=_store_path, default=None, metavar="PATH",
                       help=f"The run store: a SQLite file where the page keeps its runs, for History and links "
                            f"(default {default_path()}; $XDG_DATA_HOME moves it).")
    group.add_argument("--no-store", action="store_true",
                       help="Keep runs in each tab's memory only: nothing written, no run links.")
    limits = StoreLimits()
    group.add_argument("--store-max-runs", type=positive_int(10**7), default=limits.max_runs,
                       metavar="N", help=f"Runs the store keeps, the oldest removed first (default {limits.max_runs}).")
    group.add_argument("--store-max-mb", type=positive_int(10**7), default=limits.max_bytes >> 20,
                       metavar="MB", help=f"Megabytes of (compressed) runs the store keeps (default "
                                          f"{limits.max_bytes >> 20}).")


def _store_path(text: str) -> str:
    """A path, not an empty one: `--runs-db "$DB"` with $DB unset must not mean the default store."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file's path, and was given an empty one")
    return text


PACE_WITHOUT_RUNS = "--replay-pace is the pace of --replay: give the runs to play with --replay FILE"
STORE_FLAGS = ("runs_db", "no_store", "store_max_runs", "store_max_mb")


def early_flags(argv: list[str]) -> argparse.Namespace | None:
    """The store, replay and server flags alone, read before vLLM is imported (its argument parser
    takes seconds to import): a file that is not a run store, a pace without runs to play, or a
    server's flag without --backend openai, is named at once. None when they cannot be read so (a
    value that is not one: the full parser then says what is wrong), and when help is asked (no
    store is opened for that)."""
    if any(arg == "-h" or arg.split("=")[0] == "--help" for arg in argv):
        return None
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_store_flags(parser)
    add_replay_flags(parser)
    add_remote_flags(parser)
    try:
        return parser.parse_known_args(argv)[0]
    except (argparse.ArgumentError, SystemExit):
        return None


def open_store(args) -> RunStore | None:
    """The run store the flags name, or None with --no-store. A file that cannot be one ends the
    start with a sentence that names it and the flags (StoreError)."""
    if args.no_store:
        if args.runs_db:  # --no-store wins: the way on when the file named is refused
            print(f"note: --no-store keeps runs in each tab's memory only: --runs-db {args.runs_db} is not opened",
                  file=sys.stderr)
        return None
    path = args.runs_db or default_path()
    try:
        return RunStore(path, StoreLimits(args.store_max_runs, args.store_max_mb * 2**20))
    except StoreError as e:
        raise StoreError(f"error: cannot keep runs in {path}: {e}. Choose another file with --runs-db PATH, or "
                         "start with --no-store to keep runs in each tab's memory only.") from None
    except OSError as e:
        raise StoreError(f"error: cannot keep runs in {path}: {e.strerror or e}. Choose another file with "
                         "--runs-db PATH, or start with --no-store to keep runs in each tab's memory only.") from None


def _root_path(value: str) -> str:
    """A path from the proxy's root ("/playground"), or the public address it ends ("https://host/playground")."""
    if value and not value.startswith(("/", "http://", "https://")):
        raise argparse.ArgumentTypeError(f"must start with / (a path such as /playground) or http(s)://, got {value!r}")
    return value.rstrip("/")


def parse_auth(value: str | None, parser: argparse.ArgumentParser) -> tuple[str, str] | None:
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        parser.error("--auth must look like user:password")
    return user, password


class StartClock:
    """Each phase of the start, printed as it ends, so a slow start says where its time went."""

    def __init__(self):
        import psutil

        self.began = psutil.Process().create_time()  # the interpreter's start: imports included
        self.last = time.time()

    def phase(self, name: str, since: float | None = None) -> None:
        now = time.time()
        print(f"start: {name} {now - (self.last if since is None else since):.1f} s "
              f"(ready in {now - self.began:.1f} s so far)", file=sys.stderr, flush=True)
        self.last = now


def stopping_on(signum: int, backend) -> None:
    """On ``signum`` the backend stops rebuilding its engine, then the signal does what it did."""
    previous = signal.getsignal(signum)

    def stop(number, frame):
        terminal.stopping()
        if hasattr(backend, "stop_watching"):
            backend.stop_watching()
        if callable(previous):
            previous(number, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signum, stop)


def main(argv: list[str]) -> int:
    clock = StartClock()
    # `kill` (SIGTERM) ends the app like Ctrl-C: the engine-core process is shut down with it,
    # rather than left running without its parent.
    signal.signal(signal.SIGTERM, lambda *_: (terminal.stopping(), sys.exit(128 + signal.SIGTERM)))
    early = early_flags(argv)
    early_parser = argparse.ArgumentParser(prog="python app.py", usage=usage_line())
    if early is not None and early.replay_pace != "recorded" and not early.replay:
        early_parser.error(PACE_WITHOUT_RUNS)
    if early is not None:
        check_remote_flags(early_parser, early)
    # Runs to replay read before vLLM's import too: a missing or unreadable file costs no seconds.
    replayed = None
    if early is not None and early.replay:
        replayed = read_replay(early.replay, early.replay_pace, early_parser)
    try:  # the store first, before vLLM's import and any engine start: a file that is not one costs neither
        store = open_store(early) if early is not None else None
        parser = PlaygroundParser("python app.py", DESCRIPTION, add_serve_flags)
        args, engine_kwargs = parser.parse(argv)
        if early is None or any(getattr(early, name) != getattr(args, name) for name in STORE_FLAGS):
            if store is not None:  # vLLM's parser read the flags otherwise (`--runs_db`, an abbreviation): it counts
                store.close()
            store = open_store(args)
    except StoreError as e:
        print(e, file=sys.stderr)
        return USAGE
    auth = parse_auth(args.auth, parser.parser)
    if args.host not in LOOPBACK and auth is None:
        print(f"WARNING: binding to {args.host} without --auth: anyone who can reach this port can use the "
              "engine. Pass --auth user:password (or set PLAYGROUND_AUTH).", file=sys.stderr)
    clock.phase("python and vLLM imports")

    if args.replay_pace != "recorded" and not args.replay:
        parser.parser.error(PACE_WITHOUT_RUNS)
    if args.replay:
        backend = replay_backend(args, parser.parser, replayed)
        from playground.ui import build_app, launch_app

        clock.phase("runs read and Gradio imports (no engine)")
    elif args.backend == "openai":
        from playground.ui import build_app, launch_app

        backend = connect_remote(args, engine_kwargs, parser.parser.error)
    else:
        from playground.backends.embedded import EmbeddedBackend
        from playground.backends.resources import Workload

        # The engine's processes start on their own cores while this thread imports Gradio.
        workload = Workload(max_n=args.max_n, concurrency=args.concurrency)
        with ThreadPoolExecutor(1, thread_name_prefix="engine-start") as pool:
            began = time.time()
            starting = pool.submit(EmbeddedBackend.start, args.model, max_n=args.max_n, workload=workload,
                                   **engine_kwargs)
            from playground.ui import build_app, launch_app

            clock.phase("Gradio imports (while the engine starts)")
            backend = starting.result()
        clock.phase("engine start (spawn, imports, weights, KV cache)", since=began)
    stopping_on(signal.SIGINT, backend)
    with backend, store or contextlib.nullcontext():  # the engine's core process ends with the app, however it ends
        demo = build_app(backend, embedding_model=args.embedding_model, max_file_mb=args.max_file_mb, store=store)
        clock.phase("page built")
        if not args.replay and args.backend != "openai":  # vLLM's front end runs in this process
            from playground.backends.engine import settle

            settle()
        if store is not None:  # said here, not on the page, which may be open to others
            print(f"runs: kept in {store.path} (--runs-db moves them; --no-store keeps each tab's in memory only)",
                  file=sys.stderr)
        terminal.quiet_gone_streams()
        if not args.quiet_runs:
            log_runs()
        # Gradio's own lines would end with its advice for a public link, `share=True` in `launch()`:
        # here that is --share, so the address is said by the app (Gradio's, with --share).
        launch_app(demo, concurrency=args.concurrency, queue_size=args.queue_size, server_name=args.host,
                   server_port=args.port, share=args.share, auth=auth, prevent_thread_lock=True, quiet=not args.share,
                   root_path=args.root_path)
        if not args.share:
            print(f"* Running on local URL:  {demo.local_url}  (--share adds a public gradio.live link)", flush=True)
        if args.root_path:
            print(f"* Served under {args.root_path} by your proxy (--root-path): the page, its login and its links "
                  "use that path", flush=True)
        clock.phase(f"answering on port {args.port}")
        demo.block_thread()
    return 0


def log_runs() -> None:
    """Each run's end on stderr, one line with the time, as a server's access log has: for whoever
    runs a shared app, the only sign of what its people do (``backends/live.runs_log``)."""
    from playground.backends.live import RUNS_LOG, log_cut_short

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    runs = logging.getLogger(RUNS_LOG)
    runs.addHandler(handler)
    runs.setLevel(logging.INFO)
    runs.propagate = False
    terminal.at_stop(log_cut_short)
