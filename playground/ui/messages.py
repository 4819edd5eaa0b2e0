"""How a failure reaches the person: as a sentence, never a traceback."""

from __future__ import annotations

import logging

import gradio as gr

from playground.errors import PlaygroundError

log = logging.getLogger(__name__)


def shown(error: Exception) -> gr.Error:
    """Ours as written; anything else (a check vLLM makes that we do not, a bug) with its type,
    and logged with its traceback."""
    if isinstance(error, gr.Error):
        return error
    if isinstance(error, PlaygroundError):
        return gr.Error(str(error))
    log.error("unexpected error in a run", exc_info=error)
    return gr.Error(f"unexpected error ({type(error).__name__}): {error}")
