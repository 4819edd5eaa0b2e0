"""``python app.py``: open the playground in a browser, on the embedded engine or a vLLM server."""

from __future__ import annotations

import os
import sys

from playground.commands.cli import (
    MAX_N_CEILING,
    PlaygroundParser,
    add_remote_flags,
    create_remote_backend,
    positive_int,
)
from playground.errors import PlaygroundError

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
    group.add_argument("--embedding-model", default=None, metavar="MODEL",
                       help="A sentence-embedding model (a folder, or a Hugging Face id already in the local cache) "
                            "the Set tab may group samples by meaning with. Off by default; loaded on first use, "
                            "never downloaded.")
    add_remote_flags(group)


def parse_auth(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise SystemExit("error: --auth must look like user:password")
    return user, password


def main(argv: list[str]) -> int:
    parser = PlaygroundParser("python app.py", "Parallel-sampling playground for vLLM.", add_serve_flags)
    args, engine_kwargs = parser.parse(argv)
    auth = parse_auth(args.auth)
    if args.host not in LOOPBACK and auth is None:
        print(f"WARNING: binding to {args.host} without --auth: anyone who can reach this port can use the "
              "engine. Pass --auth user:password (or set PLAYGROUND_AUTH).", file=sys.stderr)

    from playground.ui import build_app, launch_app

    host = None
    if args.backend == "openai":
        try:
            backend = create_remote_backend(args, max_n=args.max_n)
        except PlaygroundError as e:
            parser.parser.error(str(e))
    else:
        from playground.backends.embedded import EmbeddedBackend
        from playground.backends.engine import EngineHost

        host = EngineHost.start(args.model, **engine_kwargs)
        backend = EmbeddedBackend(host, max_n=args.max_n)
    demo = build_app(backend, embedding_model=args.embedding_model)
    try:
        launch_app(demo, concurrency=args.concurrency, queue_size=args.queue_size, server_name=args.host,
                   server_port=args.port, share=args.share, auth=auth)
    finally:
        if host is not None:
            host.shutdown()
    return 0
