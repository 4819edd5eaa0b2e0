"""Command-line plumbing shared by every entry point (the app, batch, qa, the benchmark).

Each command gets vLLM's own engine parser (``AsyncEngineArgs.add_cli_args``), so every engine
flag works everywhere, with the command's flags in a group of their own on top. The flags that
reach a remote vLLM server, and atomic file writing, are shared here too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import functools
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from playground.errors import RemoteError
from playground.request import DEFAULT_MAX_N, VLLM_MAX_LOGPROBS, Limits, SampleRequest, did_you_mean, fields

if TYPE_CHECKING:  # imported where used: `analyze` (no engine) loads this module, not openai or the engine
    from playground.backends.remote import RemoteBackend

MAX_N_CEILING = 1024


def mistyped_flags(words: list[str], actions, meant: dict[str, str] | None = None) -> str:
    """" (--temprature: did you mean --temperature?)" for the unknown flags close to a known one
    (compared without their dashes, which every flag shares); ``meant``: flags a person guesses
    that are spelt nothing like the command's own, and what to say for each."""
    flags = {flag[2:]: flag for action in actions for flag in action.option_strings if flag.startswith("--")}
    hints = []
    for word in (w.split("=", 1)[0] for w in words if w.startswith("--")):
        if meant and word.lower() in meant:
            hints.append(f"{word}: {meant[word.lower()]}")
        elif close := difflib.get_close_matches(word[2:].replace("_", "-").lower(), list(flags), n=1):
            hints.append(f"{word}: did you mean {flags[close[0]]}?")
    return f" ({'; '.join(hints)})" if hints else ""


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


def hinted(message: str, actions, meant: dict[str, str] | None = None) -> str:
    """argparse's error ``message`` with the flag or choice a mistyped one was meant to be."""
    if message.startswith("unrecognized arguments: "):
        return message + mistyped_flags(message.split(": ", 1)[1].split(), actions, meant)
    if (wrong := _INVALID_CHOICE.search(message)) and (
            close := did_you_mean(wrong["word"], [c.strip(" '") for c in wrong["choices"].split(",")])):
        return message + close
    return message


def usage_line(arguments: str = "", engine: bool = True) -> str:
    """A command's usage line: its arguments and "[flags]", not every flag (of vLLM's, when the
    command starts an ``engine``)."""
    listed = "--help lists them, vLLM's engine flags too" if engine else "--help lists them"
    return f"%(prog)s {arguments + ' ' if arguments else ''}[flags] ({listed})"


class HintingParser(argparse.ArgumentParser):
    """argparse, naming the flag or choice a mistyped one was meant to be (for a command that has
    no engine flags: ``analyze``); ``meant``: guesses spelt nothing like a flag, and their answers."""

    def __init__(self, *args, meant: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.meant = meant or {}

    def error(self, message):
        super().error(hinted(message, self._actions, self.meant))


_NEGATIVE = re.compile(r"^-\.?\d")  # a value, not a flag: argparse reads "-0.5" so


class PlaygroundParser:
    """Builds vLLM's parser with the playground's flags on top, and tells given flags apart.

    vLLM's parser takes seconds to import, so a command's own flags are read first without it
    (``own_parser``): when every flag given is the command's own, a usage error in them, and the
    command's checks of what it is given (``parse``'s ``check``), come at once."""

    def __init__(self, prog: str, description: str, add_own, sampling: bool = False, arguments: str = "",
                 not_sampling: tuple[str, ...] = ()):
        """``sampling``: the request's settings as flags; those in ``not_sampling`` are left out of
        --help (the QA matrix sets output_kind and mode itself, and refuses them)."""
        # argparse's own usage line lists every flag, vLLM's hundreds included (250 lines before an error).
        self.prog, self.description, self.usage = prog, description, usage_line(arguments)
        self.add_own, self.sampling, self.not_sampling = add_own, sampling, not_sampling

    def _add_groups(self, parser: argparse.ArgumentParser):
        """The command's own groups, in --help's order; the sampling group (None without one) is
        returned empty: the full parser fills it after vLLM's flags (its --seed is vLLM's renamed)."""
        self.add_own(parser.add_argument_group("playground"))
        sampling_group = parser.add_argument_group("sampling") if self.sampling else None
        add_cpu_flags(parser.add_argument_group("engine on a CPU"))
        return sampling_group

    def own_parser(self) -> argparse.ArgumentParser:
        """The command's own flags alone (no --help, no abbreviations: those are the full parser's)."""
        parser = HintingParser(prog=self.prog, usage=self.usage, add_help=False, allow_abbrev=False)
        if (sampling_group := self._add_groups(parser)) is not None:
            _add_sampling_flags(parser, sampling_group, self.not_sampling)
        return parser

    @functools.cached_property
    def parser(self) -> argparse.ArgumentParser:
        """The full parser: the command's flags, then vLLM's engine flags."""
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        class Parser(FlexibleArgumentParser):
            def format_help(self):  # vLLM's short help lists only group names; list every flag
                return argparse.ArgumentParser.format_help(self)

            def error(self, message):  # a mistyped flag or choice: what it was meant to be
                super().error(hinted(message, self._actions))

        # The description's own layout kept; each flag's help says its default itself, once.
        parser = Parser(prog=self.prog, description=self.description, usage=self.usage,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
        sampling_group = self._add_groups(parser)  # before vLLM's groups, so --help shows them first
        AsyncEngineArgs.add_cli_args(parser)
        for action in parser._actions:
            if action.dest == "model":
                action.default = None
                action.help = "Hugging Face id or local folder (default: SmolLM2-135M-Instruct, prepared offline)."
        if sampling_group is not None:
            _add_sampling_flags(parser, sampling_group, self.not_sampling)
        # --help: the command's own groups first, then argparse's "options" (vLLM puts some there) and vLLM's.
        ours = [g for g in parser._action_groups if g.title in ("playground", "sampling", "engine on a CPU")]
        parser._action_groups = ours + [g for g in parser._action_groups if g not in ours]
        return parser

    def parse(self, argv: list[str]) -> tuple[argparse.Namespace, dict]:
        """Return all values, and the engine kwargs the user gave explicitly (our defaults apply
        to the rest, and vLLM's apply to everything else)."""
        args, engine_kwargs, _ = self.parse_checked(argv)
        return args, engine_kwargs

    def parse_checked(self, argv: list[str], check=None) -> tuple[argparse.Namespace, dict, object]:
        """``parse``, and what ``check(args, parser)`` returned: the command's checks before any
        engine starts, which call ``parser.error`` on a usage error. They run before vLLM is
        imported when every flag given is the command's own, else after the full parse."""
        checked = None
        if own := self._own_flags_only(argv):
            own_args = own.parse_args(argv)  # its errors are the full parser's too
            if check is not None:
                checked = check(own_args, own)
        from playground.backends.engine import engine_kwargs_from_cli

        args = self.parser.parse_args(argv)
        if check is not None and not own:
            checked = check(args, self.parser)
        saved = {a: a.default for a in self.parser._actions}
        try:
            for action in saved:
                action.default = argparse.SUPPRESS
            given = vars(self.parser.parse_args(argv))
        finally:
            for action, default in saved.items():
                action.default = default
        return args, engine_kwargs_from_cli(given), checked

    def _own_flags_only(self, argv: list[str]) -> argparse.ArgumentParser | None:
        """The command's own parser when every flag in ``argv`` is one of its flags (a value like
        ``-0.5`` or ``-`` is no flag); None when one is vLLM's, mistyped, or --help."""
        parser = self.own_parser()
        known = parser._option_string_actions
        for word in argv:
            if word.startswith("-") and word != "-" and not _NEGATIVE.match(word) and word.split("=")[0] not in known:
                return None
        return parser

    @staticmethod
    def sampling_settings(args: argparse.Namespace) -> dict:
        """The sampling settings given on the command line, coerced and each checked as a request's
        would be (InvalidRequest: a usage error, said once, not once per line that takes it); the
        ones not given are left out, so the schema's defaults still apply."""
        given = {name: value for name in SAMPLING_FLAGS if (value := getattr(args, _dest(name))) is not None}
        request = SampleRequest.from_user(prompt="", **given)
        request.check_each(list(given), limits_before_engine(args))
        return {k: getattr(request, k) for k in given}


def limits_before_engine(args) -> Limits:
    """What a command's requests can be held to before its engine starts (``Limits.before_engine``):
    its --max-n, and the logprobs cap the engine will have (vLLM's --max-logprobs, read only when
    given, else its default; a server's is taken to be that default too)."""
    return Limits.before_engine(getattr(args, "max_n", DEFAULT_MAX_N),
                                getattr(args, "max_logprobs", None) or VLLM_MAX_LOGPROBS)


# Commands that sample (batch, qa, sweep) take every request setting but the prompt as a flag,
# named after the schema's field (``--top-p``), with its help and default.
SAMPLING_FLAGS = [f.name for f, _ in fields() if f.name != "prompt"]


def _dest(name: str) -> str:
    return "sample_seed" if name == "seed" else name  # vLLM's parser has a `seed` of its own


def _add_sampling_flags(parser: argparse.ArgumentParser, group, leave_out: tuple[str, ...] = ()) -> None:
    """Fill the sampling group. vLLM's engine-wide --seed would take the name a person expects for
    the sampling seed: the engine's becomes --engine-seed, and --seed is the samples' base seed."""
    if action := parser._option_string_actions.pop("--seed", None):  # argparse has no public rename
        action.option_strings = ["--engine-seed" if s == "--seed" else s for s in action.option_strings]
        parser._option_string_actions["--engine-seed"] = action
        action.help = "vLLM's engine-wide random seed (vLLM's own --seed)."

    schema = {f.name: (f, meta) for f, meta in fields()}
    for name in SAMPLING_FLAGS:
        f, meta = schema[name]
        flag = "--" + name.replace("_", "-")
        if f.type.startswith("bool"):
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=meta.help)
        elif f.type == "list[str]":
            group.add_argument(flag, dest=name, action="append", help=f"{meta.help} Repeat for more.")
        else:
            default = f" (default {f.default})" if f.default is not None else ""
            # Left out of --help but still read, so that the command can say why it takes none.
            group.add_argument(flag, dest=_dest(name), metavar=name.upper(),
                               help=argparse.SUPPRESS if name in leave_out else meta.help + default)


def add_cpu_flags(group) -> None:
    """The playground's engine flags beside vLLM's (playground.backends.resources says why)."""
    group.add_argument("--cpu-threads", type=positive_int(os.cpu_count() or 1), default=None,
                       help="OpenMP threads the engine computes with on a CPU (default: every usable core on "
                            "machines of up to 4 cores, vLLM's own binding on bigger ones; "
                            "VLLM_CPU_OMP_THREADS_BIND, if set, is left to vLLM). The KV cache is sized from "
                            "--max-n and --concurrency unless --kv-cache-memory-bytes, --gpu-memory-utilization "
                            "or VLLM_CPU_KVCACHE_SPACE says otherwise.")
    group.add_argument("--paced-core", type=positive_float("--paced-core"), default=None, metavar="TOKENS_PER_S",
                       help="For the bench: no engine core and no weights; vLLM's front end gets random tokens of "
                            "English text at this many tokens a second (a GPU's pace on any machine), so the app's "
                            "own CPU per token can be measured where a GPU would put it. Never for real samples.")


def add_max_n_flag(group, per: str, note: str = "") -> None:
    """--max-n with one bound and one default in every command; only what the samples belong to
    (a prompt, a run, a request) differs in its help."""
    group.add_argument("--max-n", type=positive_int(MAX_N_CEILING), default=DEFAULT_MAX_N,
                       help=f"Most samples per {per} (default {DEFAULT_MAX_N}, at most {MAX_N_CEILING}){note}.")


def positive_int(ceiling: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if not 1 <= value <= ceiling:
            raise argparse.ArgumentTypeError(f"must be between 1 and {ceiling}, got {value}")
        return value

    return parse


def positive_float(name: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be above 0, got {text}")
        return value

    return parse


# --- a remote vLLM server ------------------------------------------------------------------------

API_KEY_ENV = ("VLLM_API_KEY", "OPENAI_API_KEY")
REQUEST_TIMEOUT = 60.0
NEEDS_BASE_URL = "--backend openai needs --base-url, the server's address, e.g. http://HOST:8000/v1"


def add_remote_flags(group) -> None:
    """The flags that choose and reach a remote vLLM server (``--backend openai``)."""
    group.add_argument("--backend", choices=("embedded", "openai"), default="embedded",
                       help="embedded: run vLLM in this process (default). openai: drive an existing "
                            "vLLM server (vllm serve) through its OpenAI-compatible API.")
    group.add_argument("--base-url", default=None,
                       help="The server's API address with --backend openai, e.g. http://HOST:8000/v1.")
    group.add_argument("--api-key", default=None,
                       help=f"The server's API key (vllm serve --api-key); default: ${API_KEY_ENV[0]}, "
                            f"else ${API_KEY_ENV[1]}.")
    group.add_argument("--request-timeout", type=_positive_seconds, default=None,
                       help="Seconds to wait for the server to connect, answer, or send the next "
                            f"chunk of a stream (default {REQUEST_TIMEOUT:g}).")


def check_remote_flags(parser: argparse.ArgumentParser, args) -> None:
    """A usage error, before any engine starts, for the server's flags given without
    ``--backend openai`` (dropped silently, a batch run here would pass for the server's) and for
    ``--backend openai`` without ``--base-url``."""
    if args.backend == "openai":
        if not args.base_url:
            parser.error(NEEDS_BASE_URL)
        return
    given = [flag for flag, value in (("--base-url", args.base_url), ("--api-key", args.api_key),
                                      ("--request-timeout", args.request_timeout)) if value is not None]
    if given:
        parser.error(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for a vLLM server: add --backend "
                     f"openai to use one, or leave {'it' if len(given) == 1 else 'them'} out to run on an engine here")


def create_remote_backend(args, max_n: int) -> RemoteBackend:
    """The RemoteBackend the parsed flags ask for; RemoteError if the server cannot be used.
    For the commands' synchronous start-up (no event loop runs yet): discovery runs to its end
    on a loop of its own; the backend then works on any loop."""
    from playground.backends.remote import RemoteBackend

    if not args.base_url:
        raise RemoteError(NEEDS_BASE_URL)
    api_key = args.api_key or next((os.environ[n] for n in API_KEY_ENV if os.environ.get(n)), None)
    return asyncio.run(RemoteBackend.connect(args.base_url, api_key=api_key, max_n=max_n,
                                             request_timeout=args.request_timeout or REQUEST_TIMEOUT,
                                             model=getattr(args, "model", None)))


def connect_remote(args, engine_kwargs: dict, error) -> RemoteBackend:
    """``create_remote_backend`` for a command's start: a server that cannot be used is a usage
    error (``error``, the parser's), said at once; the server is named on stderr, and engine flags
    given are said to be the server's (no engine starts here), not silently dropped."""
    try:
        backend = create_remote_backend(args, max_n=args.max_n)
    except RemoteError as e:
        error(str(e))
    info = backend.info()
    print(f"server: {info.get('base_url')} serves {info.get('model')} (vLLM {info.get('vllm_version')}); "
          "no engine starts here", file=sys.stderr)
    if engine_kwargs:
        flags = ", ".join("--" + name.replace("_", "-") for name in engine_kwargs)
        print(f"note: {flags} set an engine, and the server's engine is set where it is started (vllm serve): "
              "ignored here", file=sys.stderr)
    return backend


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return value


# --- files ---------------------------------------------------------------------------------------

def check_distinct(parser: argparse.ArgumentParser, reads: dict[str, Path | None],
                   writes: dict[str, Path | None]) -> None:
    """A usage error when a file to write is a file the command reads, or two writes name one file:
    said before any work, where writing would have destroyed the input (a batch's prompts replaced
    by its bundles) or kept only the last of two results. ``-`` (stdin, stdout) is no file."""
    def same(a: Path, b: Path) -> bool:
        try:
            return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
        except OSError:
            return False

    files = [(flag, Path(path)) for flag, path in writes.items() if path is not None and str(path) != "-"]
    for k, (flag, path) in enumerate(files):
        for name, source in reads.items():
            if source is not None and str(source) != "-" and same(path, Path(source)):
                parser.error(f"{flag}: {path} is the {name} this command reads; writing it would destroy it. "
                             "Give another file")
        for other, earlier in files[:k]:
            if same(path, earlier):
                parser.error(f"{other} and {flag} both name {path}: give each a file of its own")


def note_whole_text_reference(reference: str | None, answer) -> None:
    """A right answer compared with each sample's whole text (the default extractor) rarely matches
    ("391" against "17 * 23 = 391"): say so on stderr, once, so a pass@k of 0 is not taken at its word."""
    from playground.analysis import DEFAULT_EXTRACTOR, whole_text_reference

    spec = getattr(answer, "spec", answer) or DEFAULT_EXTRACTOR
    if reference is not None and spec == DEFAULT_EXTRACTOR:
        print(f"note: {whole_text_reference(reference)}; --answer last-number, boxed or regex:PATTERN reads an answer "
              "out of the text", file=sys.stderr)


SKIPPED_SHOWN = 20  # bad lines named one by one; a file that is no JSONL at all would print one per line


def say_skipped(errors: list, hint: str) -> None:
    """Each line a command skips, named on stderr, up to SKIPPED_SHOWN, then how many more and
    ``hint``, the question a file of many bad lines raises (is it the kind of file the command reads?)."""
    for error in errors[:SKIPPED_SHOWN]:
        print(f"skipping {error}", file=sys.stderr)
    if len(errors) > SKIPPED_SHOWN:
        print(f"… and {len(errors) - SKIPPED_SHOWN} more lines skipped: {hint}", file=sys.stderr)


def check_out_path(parser: argparse.ArgumentParser, flag: str, path: Path | None) -> None:
    """A usage error if ``path`` cannot be written as a file (its folder is missing, or it is a
    folder itself): said before any work (or engine start) is spent, not when the result is
    written at the end and the work is lost."""
    if path is None or str(path) == "-":  # stdout
        return
    if path.is_dir():
        parser.error(f"{flag}: {path} is a folder: give the name of a file to write")
    if file := next((folder for folder in path.parents if folder.is_file()), None):
        parser.error(f"{flag}: {file} is a file, not a folder to write {path.name} in")
    if not path.parent.resolve().is_dir():
        parser.error(f"{flag}: the folder {path.parent} does not exist")
    try:  # what ``write_atomically`` will do there: a file of its own beside the path, then gone
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except OSError as e:
        parser.error(f"{flag}: no file can be written in {path.parent} ({e.strerror or e}), so not {path.name}")


def write_atomically(path: Path, lines: Iterable[str]) -> None:
    """Write a temp file beside ``path``, then rename it over ``path``: a reader sees the old file
    or the whole new one, never half of it, and a failure leaves no temp file behind."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
