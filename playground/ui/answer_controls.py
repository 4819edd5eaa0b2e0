"""How a tab lets a person choose how answers are read from samples: the choices, the two controls
(an extractor and a regular expression for the regex one), and the measures they add.

The Set tab always reads answers (its default extractor); the Sweep and Compare tabs read them
only when asked ("none" by default), adding the majority answer and its vote share to their
measures. Written once here so the three tabs offer the same choices and say the same sentence for
a pattern that cannot work.
"""

from __future__ import annotations

import gradio as gr

from playground import analysis
from playground.ui.messages import refusal

LABELS = {"normalized": "whole text (normalized)", "first-line": "first line", "last-number": "last number",
          "boxed": "\\boxed{…}", "regex": "regular expression"}
CHOICES = [(LABELS.get(name, name), name) for name in analysis.EXTRACTORS]  # the Set tab's radio
NO_ANSWER = "none"
OPTIONAL_CHOICES = [("none (do not read answers)", NO_ANSWER), *CHOICES]  # the Sweep and Compare tabs' dropdowns
PATTERN_LABEL = "Pattern (regular expression, one group)"
PATTERN_EXAMPLE = "answer is (\\w+)"


def extractor_spec(choice: str | None, pattern: str | None) -> str:
    """The extractor the controls name: ``regex:PATTERN`` for the regex, else the choice."""
    choice = choice or analysis.DEFAULT_EXTRACTOR
    return f"regex:{pattern or ''}" if choice == "regex" else choice


def waiting_for_pattern(choice: str | None, pattern: str | None) -> bool:
    """"regular expression" picked and no pattern typed yet: the next thing a person does is type
    one, so a tab that redraws on the pick waits for it rather than refusing the empty box."""
    return choice == "regex" and not (pattern or "").strip()


def optional_controls(label: str, elem_prefix: str) -> tuple[gr.Dropdown, gr.Textbox]:
    """Declare the two controls, "none" chosen, in the current layout."""
    choice = gr.Dropdown(OPTIONAL_CHOICES, value=NO_ANSWER, label=label, elem_id=f"{elem_prefix}-answer")
    pattern = gr.Textbox(label=PATTERN_LABEL, placeholder=PATTERN_EXAMPLE, elem_id=f"{elem_prefix}-pattern")
    return choice, pattern


def with_chosen_answers(measures: analysis.Measures | None, choice: str | None,
                        pattern: str | None) -> analysis.Measures | None:
    """``measures`` plus the majority answer and its vote share when an extractor is chosen ("none":
    ``measures`` as they are), computed once per run however often a handler's views ask; gr.Error,
    a sentence naming the pattern, for one that cannot work."""
    if choice and choice != NO_ANSWER:
        try:
            measures = analysis.with_answers(measures, extractor_spec(choice, pattern))
        except analysis.InvalidExtractor as e:
            raise refusal(str(e)) from None
    return once_per_run(measures)


def once_per_run(measures: analysis.Measures | None) -> analysis.Measures | None:
    """``measures`` remembered per run: a sweep's chart, table and report, or a comparison's table
    and report, each read every run's set measures (pairwise similarity, Vendi), which cost."""
    if measures is None:
        return None
    known: dict[int, tuple] = {}

    def remembered(run) -> dict:
        if id(run) not in known:
            try:
                known[id(run)] = (run, measures(run))  # holding the run keeps its id from being reused
            except analysis.InvalidExtractor as e:  # a pattern that took too long on this run's samples
                raise refusal(str(e)) from None
        return known[id(run)][1]

    return remembered
