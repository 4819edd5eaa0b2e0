"""Command-line plumbing shared by every entry point (the app, batch, qa, the benchmark).

Each command gets vLLM's own engine parser (``AsyncEngineArgs.add_cli_args``), so every engine
flag works everywhere, with the command's flags in a group of their own on top.
"""

from __future__ import annotations

import argparse

MAX_N_CEILING = 256


class PlaygroundParser:
    """Builds vLLM's parser with the playground's flags on top, and tells given flags apart."""

    def __init__(self, prog: str, description: str, add_own):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        class Parser(FlexibleArgumentParser):
            def format_help(self):  # vLLM's short help lists only group names; list every flag
                return argparse.ArgumentParser.format_help(self)

        self.parser = Parser(prog=prog, description=description)
        add_own(self.parser.add_argument_group("playground"))
        AsyncEngineArgs.add_cli_args(self.parser)
        for action in self.parser._actions:
            if action.dest == "model":
                action.default = None
                action.help = "Hugging Face id or local folder (default: SmolLM2-135M-Instruct, prepared offline)."

    def parse(self, argv: list[str]) -> tuple[argparse.Namespace, dict]:
        """Return all values, and the engine kwargs the user gave explicitly (our defaults apply
        to the rest, and vLLM's apply to everything else)."""
        from playground.engine import engine_kwargs_from_cli

        args = self.parser.parse_args(argv)
        saved = {a: a.default for a in self.parser._actions}
        try:
            for action in saved:
                action.default = argparse.SUPPRESS
            given = vars(self.parser.parse_args(argv))
        finally:
            for action, default in saved.items():
                action.default = default
        return args, engine_kwargs_from_cli(given)


def positive_int(name: str, ceiling: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number, got {text!r}") from None
        if not 1 <= value <= ceiling:
            raise argparse.ArgumentTypeError(f"{name} must be between 1 and {ceiling}, got {value}")
        return value

    return parse


