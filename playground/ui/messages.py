"""How a failure reaches the person: as a sentence, never a traceback."""

from __future__ import annotations

import logging

import gradio as gr

from playground.errors import PlaygroundError

log = logging.getLogger(__name__)


def refusal(message: str) -> gr.Error:
    """A refusal the person can act on (pick a run first, a bad value): a toast on the page, not a
    traceback in the terminal, where Gradio prints one for every ``gr.Error`` unless told not to."""
    return gr.Error(message, print_exception=False)


def shown(error: Exception) -> gr.Error:
    """Ours as written; anything else (a check vLLM makes that we do not, a bug) with its type,
    and logged with its traceback (once: here)."""
    if isinstance(error, gr.Error):
        return error
    if isinstance(error, PlaygroundError):
        return refusal(str(error))
    log.error("unexpected error in a run", exc_info=error)
    return refusal(f"unexpected error ({type(error).__name__}): {error}")
