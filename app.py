"""The playground's command line.

    python app.py [playground flags] [any vLLM engine flag]     open the playground in a browser
    python app.py batch INPUT.jsonl [--out runs.jsonl] ...      sample a file of prompts, no browser
    python app.py qa --prompt ... --n 4 --seed 1                check output_kind rules, as a table

Every vLLM engine flag works (``--enforce-eager``, ``--dtype``, ``--max-model-len``, ...): the
parser is vLLM's own ``AsyncEngineArgs.add_cli_args``. Without ``--model`` the default model
(SmolLM2-135M-Instruct, prepared offline from a PyPI wheel) is used.
"""

from __future__ import annotations

import sys

from playground.cli import MAX_N_CEILING, PlaygroundParser, positive_int

COMMANDS = ("batch", "qa")


def add_serve_flags(group) -> None:
    group.add_argument("--host", default="127.0.0.1",
                       help="Address to bind (default 127.0.0.1: only this machine can connect).")
    group.add_argument("--port", type=positive_int("--port", 65535), default=7860, help="Port (default 7860).")
    group.add_argument("--max-n", type=positive_int("--max-n", MAX_N_CEILING), default=32,
                       help="Most samples per request (default 32); enforced on the server.")


def serve(argv: list[str]) -> int:
    parser = PlaygroundParser("python app.py", "Parallel-sampling playground for vLLM.", add_serve_flags)
    args, engine_kwargs = parser.parse(argv)

    from playground.embedded import EmbeddedBackend
    from playground.engine import EngineHost
    from playground.ui import build_app

    host = EngineHost.start(args.model, **engine_kwargs)
    backend = EmbeddedBackend(host, max_n=args.max_n)
    demo = build_app(backend)
    try:
        demo.queue().launch(server_name=args.host, server_port=args.port, share=False)
    finally:
        host.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        import importlib

        return importlib.import_module(f"playground.{argv[0]}").main(argv[1:])
    return serve(argv)


if __name__ == "__main__":
    sys.exit(main())
