"""How a failure reaches the person: as a sentence, never a traceback."""

from __future__ import annotations

import html
import logging

import gradio as gr

from playground.errors import PlaygroundError
from playground.ui.markdown import toast

log = logging.getLogger(__name__)


def refusal(message: str) -> gr.Error:
    """A refusal the person can act on (pick a run first, a bad value): a toast on the page, not a
    traceback in the terminal, where Gradio prints one for every ``gr.Error`` unless told not to. Titled
    "Not done": nothing went wrong, the press was refused and changed nothing (the pinned Gradio's page still
    heads the toast "Error": its front end reads the title from another field than its server sends;
    a refusal that needs no error's end to its event is a ``warned`` one)."""
    return gr.Error(toast(message), print_exception=False, title="Not done")


def warned(message: str) -> dict:
    """A button refused before it did anything (nothing picked, too few runs): a warning toast,
    and every output of its event as it was. Raised as a ``gr.Error``, the refusal would mark
    every output of the event "Error", and Open's outputs are the whole page. For a queued event
    (the default): elsewhere Gradio cannot deliver the toast."""
    warn(message)
    return gr.skip()


def warn(message: str) -> None:
    """A warning toast; its text, which may quote a run's or a person's words, shown as text."""
    gr.Warning(toast(message))


def said(error: Exception) -> str:
    """An error's sentence as plain text, escaped once where it is shown: ours as written (a
    ``gr.Error``'s is written for a toast already, and is read back); anything else (a check vLLM
    makes that we do not, a bug) with its type, and logged with its traceback (once: here)."""
    if isinstance(error, gr.Error):
        return html.unescape(error.message)
    if isinstance(error, PlaygroundError):
        return str(error)
    log.error("unexpected error in a run", exc_info=error)
    return f"unexpected error ({type(error).__name__}): {error}"


def shown(error: Exception) -> gr.Error:
    """The error as a toast: a ``gr.Error`` as it is, anything else with its sentence (``said``)."""
    return error if isinstance(error, gr.Error) else refusal(said(error))
