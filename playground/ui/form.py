"""The run form: the page's settings, by SampleRequest field name, into a checked SampleRequest.

The layout names each setting's component once (``inputs_kwargs``), so a handler receives the
form as keyword arguments and nothing keeps a list of names in step with a list of components.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from playground.errors import InvalidRequest
from playground.sampling.request import SampleRequest


def request_from_form(**settings: Any) -> SampleRequest:
    """UI values -> a checked SampleRequest (numbers arrive as floats, stop strings as lines,
    logprobs 0 means off)."""
    stop = settings.pop("stop", None) or ""
    settings["stop"] = [_unescape(line) for line in stop.splitlines() if line != ""]
    settings["logprobs"] = settings.get("logprobs") or None  # the slider's 0 is "off"
    try:
        return SampleRequest.from_user(**settings)
    except InvalidRequest as e:
        raise gr.Error(str(e)) from None


def _unescape(line: str) -> str:
    return line.replace("\\n", "\n").replace("\\t", "\t")
