"""The playground's command line.

    python app.py [playground flags] [any vLLM engine flag]     open the playground in a browser
    python app.py batch INPUT.jsonl [--out runs.jsonl] ...      sample a file of prompts, no browser
    python app.py qa --prompt ... --n 4 --seed 1                check output_kind rules, as a table

Every vLLM engine flag works (``--enforce-eager``, ``--dtype``, ``--max-model-len``, ...): the
parser is vLLM's own ``AsyncEngineArgs.add_cli_args``. Without ``--model`` the default model
(SmolLM2-135M-Instruct, prepared offline from a PyPI wheel) is used.
"""

from __future__ import annotations

import os
import sys

from playground.cli import MAX_N_CEILING, PlaygroundParser, positive_int
from playground.remote import add_remote_flags

COMMANDS = {"batch": "playground.batch", "qa": "playground.qa_cli"}  # command: the module whose main runs it
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_serve_flags(group) -> None:
    group.add_argument("--host", default="127.0.0.1",
                       help="Address to bind (default 127.0.0.1: only this machine can connect).")
    group.add_argument("--port", type=positive_int("--port", 65535), default=7860, help="Port (default 7860).")
    group.add_argument("--max-n", type=positive_int("--max-n", MAX_N_CEILING), default=32,
                       help="Most samples per request (default 32); enforced on the server.")
    group.add_argument("--auth", default=os.environ.get("PLAYGROUND_AUTH"),
                       help="user:password required to open the page and call the API "
                            "(or set PLAYGROUND_AUTH). Off by default.")
    group.add_argument("--share", action="store_true",
                       help="Create a public gradio.live link. Off unless asked for.")
    group.add_argument("--concurrency", type=positive_int("--concurrency", 256), default=8,
                       help="Runs sampled at once (default 8); the engine batches them.")
    group.add_argument("--queue-size", type=positive_int("--queue-size", 10_000), default=64,
                       help="Runs that may wait in the queue before new ones are refused (default 64).")
    add_remote_flags(group)


def parse_auth(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise SystemExit("error: --auth must look like user:password")
    return user, password


def serve(argv: list[str]) -> int:
    parser = PlaygroundParser("python app.py", "Parallel-sampling playground for vLLM.", add_serve_flags)
    args, engine_kwargs = parser.parse(argv)
    auth = parse_auth(args.auth)
    if args.host not in LOOPBACK and auth is None:
        print(f"WARNING: binding to {args.host} without --auth: anyone who can reach this port can use the "
              "engine. Pass --auth user:password (or set PLAYGROUND_AUTH).", file=sys.stderr)

    from playground.ui import build_app, launch_app

    host = None
    if args.backend == "openai":
        from playground.errors import PlaygroundError
        from playground.remote import create_remote_backend

        try:
            backend = create_remote_backend(args, max_n=args.max_n)
        except PlaygroundError as e:
            parser.parser.error(str(e))
    else:
        from playground.embedded import EmbeddedBackend
        from playground.engine import EngineHost

        host = EngineHost.start(args.model, **engine_kwargs)
        backend = EmbeddedBackend(host, max_n=args.max_n)
    demo = build_app(backend)
    try:
        launch_app(demo, concurrency=args.concurrency, queue_size=args.queue_size, server_name=args.host,
                   server_port=args.port, share=args.share, auth=auth)
    finally:
        if host is not None:
            host.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        import importlib

        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    return serve(argv)


if __name__ == "__main__":
    sys.exit(main())
