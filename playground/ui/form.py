"""The run form: a control per request setting, made from the schema (``playground.request``), and
the form's values back into a checked SampleRequest.

The layout names each setting's control once (handlers receive the form as keyword arguments,
``inputs_kwargs``), so nothing keeps a list of names in step with a list of components, and a
new setting in the schema is a new control here without a line written for it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import gradio as gr

from playground import analysis
from playground.errors import InvalidRequest
from playground.request import Limits, SampleRequest, fields
from playground.run import Run
from playground.ui.markdown import plain
from playground.ui.messages import refusal

ELEM_IDS = {"use_chat_template": "chat-template", "stop": "stop-strings"}  # "#stop" is the Stop button
LABELS = {"n": "n (samples)", "use_chat_template": "Apply the chat template", "stop": "Stop strings",
          "logprobs": "logprobs top-k (0: off)", "top_k": "top_k (0 or -1: off)", "seed": "Seed",
          "ignore_eos": "ignore_eos (always run to max_tokens)"}


def setting_controls(limits: Limits, names: list[str], **values: Any) -> dict[str, gr.components.Component]:
    """The controls of ``names``, declared in the current layout, by field name. ``values``: a
    control's starting value where it is not the schema's default."""
    schema = {f.name: (f, meta) for f, meta in fields()}
    return {name: _control(*schema[name], limits, values.get(name)) for name in names}


def _control(f, meta, limits: Limits, value: Any) -> gr.components.Component:
    name = f.name
    default = value if value is not None else (None if f.default is dataclasses.MISSING else f.default)
    common = {"label": LABELS.get(name, name), "elem_id": ELEM_IDS.get(name, name.replace("_", "-"))}
    if meta.choices:
        return gr.Radio(list(meta.choices), value=default, info=meta.help, **common)
    if f.type.startswith("bool"):
        return gr.Checkbox(value=bool(default), **common)
    if f.type == "list[str]":
        return gr.Textbox(lines=2, placeholder="one per line; \\n stands for a newline, \\\\ for a backslash", **common)
    if name == "seed":  # text: a 19-digit seed must not go through a float
        return gr.Textbox(placeholder="blank = random (shown after the run)", **common)
    if name == "prompt":
        return gr.Textbox(lines=3, placeholder="Type a prompt, or pick an example below (Ctrl+Enter runs, Esc stops)",
                          label="Prompt", elem_id="prompt")
    if meta.slider is not None:
        low, high, step = meta.slider
        if high is None:  # the engine's own bound: max_tokens below the context, n up to --max-n
            high = getattr(limits, meta.limit) - (1 if meta.limit == "max_model_len" else 0)
        return gr.Slider(low, high, value=min(default or 0, high), step=step, **common)
    # No precision, even for a whole number: Gradio would round 1.5 to 2 without a word, where the
    # server's check names it ("top_k must be a whole number, got 1.5").
    return gr.Number(value=default, **common)


# A number typed into a slider's box outside its bounds: Gradio's slider moves it to the nearest
# bound when the box loses focus, without a word, so a run of "n = 0" would quietly be a run of
# n=1. Heard first (the capture phase, before the slider's own blur), said under the control until
# the control is changed again. The server checks every value anyway: this is what the page says.
BOUNDS_JS = """
() => {
  const NOTE = 'bounds-note';
  document.addEventListener('blur', (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.type !== 'number' || box.min === '' || box.max === '') return;
    const block = box.closest('.block');
    if (!block || !block.querySelector('input[type=range]')) return;
    block.querySelectorAll('.' + NOTE).forEach((n) => n.remove());
    const typed = Number(box.value), low = Number(box.min), high = Number(box.max);
    if (box.value === '' || Number.isNaN(typed) || (typed >= low && typed <= high)) return;
    const label = (block.querySelector('[data-testid="block-info"], label') || {}).textContent || 'the value';
    const note = document.createElement('div');
    note.className = NOTE;
    const used = typed < low ? low : high;
    note.textContent = `${label.trim()}: ${box.value} is outside ${low} to ${high}, so ${used} is used.`;
    block.appendChild(note);
    const clear = () => { note.remove(); block.removeEventListener('input', clear, true); };
    setTimeout(() => block.addEventListener('input', clear, true), 0);  // the slider's own update is not a change
  }, true);
}
"""


# The keyboard, as playgrounds have it: Ctrl+Enter (⌘+Enter) presses Run from anywhere on the page, Esc
# presses the Stop beside the summary while a run streams there. Not from a one-line box (a
# dropdown's Esc closes its list) and not when a component has taken the key already.
KEYS_JS = """
() => {
  // Esc in a one-line box closes its list (a dropdown's); on a checkbox, radio, slider or number it stops.
  const KEEPS_ESC = new Set(['text', 'search', 'email', 'url', 'password']);
  const ARROWS = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1};
  // Gradio names each option of a radio group apart, so the browser sees groups of one: the arrows
  // do nothing and every option is a Tab stop. The page does what a radio group does: the arrows
  // pick the next option, and Tab stops at the one picked (roving tabindex).
  const radios = (group) => [...group.querySelectorAll(':scope > label > input[type=radio]')];
  const rove = () => {
    for (const group of document.querySelectorAll('.wrap:has(> label > input[type=radio])')) {
      const options = radios(group), picked = options.find((o) => o.checked) || options[0];
      for (const o of options) o.tabIndex = o === picked ? 0 : -1;
    }
  };
  document.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    const target = event.target;
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey) && !event.shiftKey && !event.altKey) {
      const run = document.querySelector('#run');
      if (run && !run.disabled) { event.preventDefault(); run.click(); }
    } else if (event.key === 'Escape' && !(target instanceof HTMLInputElement && KEEPS_ESC.has(target.type))) {
      const stop = document.querySelector('#stop-near');
      if (stop && !stop.disabled) { event.preventDefault(); stop.click(); }
    } else if (event.key in ARROWS && target instanceof HTMLInputElement && target.type === 'radio'
               && !event.altKey && !event.ctrlKey && !event.metaKey) {
      const group = target.closest('.wrap'), options = group ? radios(group).filter((o) => !o.disabled) : [];
      if (options.length < 2) return;
      const next = options[(options.indexOf(target) + ARROWS[event.key] + options.length) % options.length];
      event.preventDefault();
      next.click();
      next.focus();
      rove();
    } else if (event.key === 'Tab') {
      rove();
    }
  });
}
"""


def form_request(**settings: Any) -> SampleRequest:
    """The form's values -> a SampleRequest (numbers arrive as floats, stop strings as lines, the
    logprobs slider's 0 means off); InvalidRequest names a value that cannot be one."""
    if "stop" in settings:
        lines = (settings["stop"] or "").replace("\r\n", "\n").split("\n")
        settings["stop"] = [_unescape(line) for line in lines if line != ""]
    if "logprobs" in settings:
        settings["logprobs"] = settings["logprobs"] or None
    return SampleRequest.from_user(**settings)


def request_from_form(**settings: Any) -> SampleRequest:
    """``form_request`` for a handler: gr.Error names a value that cannot be one."""
    try:
        return form_request(**settings)
    except InvalidRequest as e:
        raise refusal(str(e)) from None


def form_value(name: str, value: Any) -> Any:
    """A request's value as its control shows it: the inverse of ``request_from_form`` (a seed as
    text, stop strings as lines, logprobs off as 0)."""
    if name == "stop":
        return "\n".join(_escape(s) for s in value or [])
    if name == "seed":
        return "" if value is None else str(value)
    if name == "logprobs":
        return value or 0
    return value


def outside(control: gr.components.Component, value: Any) -> str | None:
    """Why ``value`` cannot go into ``control`` (a slider's bounds are narrower than what the server
    takes: a link or a run made by a script may ask for temperature 3), or None. A slider given such
    a value would refuse every Run of the page until it is moved."""
    if not isinstance(control, gr.Slider) or not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if control.minimum <= value <= control.maximum:
        return None
    return f"{value:g} is outside the form's {control.minimum:g} to {control.maximum:g}"


# A stop string is one line of its box: a newline in it is written \n, a carriage return \r, a tab
# \t, and a backslash itself \\ (so a path's C:\\new is not read as a newline). Any other
# backslash is kept as typed.
_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPED = re.compile(r"\\([\\nrt])")


def _unescape(line: str) -> str:
    return _ESCAPED.sub(lambda found: _ESCAPES[found[1]], line)


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


# The engine's logprobs=0 records each sampled token's own logprob and no alternative; the form's
# slider at 0 is logprobs off. A run or a link that asked for 0 is said, not turned into "off".
LOGPROBS_ZERO = ("0 (each sampled token's own logprob, no alternatives; asked through the API) cannot be set in the "
                 "form, where 0 is off")


def form_update(form: dict[str, gr.components.Component], values: dict[str, Any]) -> tuple[dict, list[str]]:
    """The form's controls set to ``values``, and a sentence per value a control cannot hold (a
    slider's bounds), which is left as it was."""
    update, problems = {}, []
    for name, value in values.items():
        if name not in form or (value is None and name not in ("seed", "logprobs")):
            continue
        shown = form_value(name, value)
        if name == "logprobs" and value == 0:  # the engine's 0 is not the slider's 0
            problems.append(f"`logprobs`: {LOGPROBS_ZERO}")
        elif reason := outside(form[name], shown):
            problems.append(f"`{name}`: {plain(reason)}")
        else:
            update[form[name]] = shown
    return update, problems


def run_in_form(form: dict[str, gr.components.Component], run: Run, replaying: bool = False) -> tuple[dict, str]:
    """A run opened (by its link, or from the saved runs): its settings in the form, so that Run
    asks for it again, and the sentence that says what Run will then ask for (``replaying``: the
    app has no engine, and Run plays its file's run of that prompt)."""
    asked = {name: run.request[name] for name in form if name in run.request}
    update, unfit = form_update(form, asked)
    said = "its settings are in the form"
    if unfit:
        said += (" except what the form cannot hold (" + "; ".join(unfit) + "): Run asks for the others, with the "
                 "form's own value there.")
    elif replaying:
        said += (", so Run plays the file's run of its prompt closest to them (this app replays saved runs and has no "
                 "engine).")
    elif of := analysis.replayed_from(run):
        said += f", so Run asks the engine for them (the run was a replay of `{of}`: Run samples them anew)."
    else:
        said += ", so Run asks for it again."
    if run.request.get("prefix_token_ids"):
        said += " It was a branch: the form cannot hold its prefix, so Run asks for the request without it."
    return update, said
