"""Settings links without a browser: the query a form makes holds what differs from the starting
form, in the schema's names, and reading it back gives the same request; what a link gets wrong
is named and left out."""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qsl, urlsplit

import gradio as gr
import pytest
from hypothesis import given
from hypothesis import strategies as st

from playground.request import Limits, fields
from playground.ui.form import form_value, request_from_form
from playground.ui.links import read_query, settings_query

LIMITS = Limits(max_n=32)
NAMES = [f.name for f, _ in fields() if f.name != "prefix_token_ids"]  # the form's settings
START = {"prompt": "", "n": 4, "seed": "", "output_kind": "CUMULATIVE", "mode": "wrapper", "temperature": 1.0,
         "top_p": 1.0, "top_k": 0, "min_p": 0.0, "max_tokens": 64, "presence_penalty": 0.0, "frequency_penalty": 0.0,
         "repetition_penalty": 1.0, "stop": "", "logprobs": 5, "use_chat_template": True, "ignore_eos": False}


def defaults() -> dict:
    return dataclasses.asdict(request_from_form(**START))


def test_a_link_holds_what_differs_from_the_starting_form_and_reads_back_the_same_request():
    form = {**START, "prompt": "Name a colour & a number: 7?", "n": 8.0, "seed": "9007199254740993",
            "temperature": 0.7, "stop": "END\n\\n", "logprobs": 0, "use_chat_template": False, "mode": "native"}
    query = settings_query(defaults(), **form)
    pairs = parse_qsl(urlsplit(query).query, keep_blank_values=True)
    assert [name for name, _ in pairs] == ["prompt", "n", "seed", "mode", "temperature", "stop", "stop", "logprobs",
                                           "use_chat_template"], "the schema's order, what differs only"
    assert dict(pairs)["seed"] == "9007199254740993" and ("stop", "\n") in pairs
    values, problems, twice = read_query(pairs, NAMES, LIMITS)
    assert problems == twice == []
    asked = dataclasses.asdict(request_from_form(**form))
    assert values == {name: asked[name] for name, _ in pairs}
    again = request_from_form(**{**START, **{name: form_value(name, value) for name, value in values.items()}})
    assert dataclasses.asdict(again) == asked, "the form filled from the link asks for the same request"
    assert settings_query(defaults(), **START) == "?", "an untouched form: nothing to carry"


def test_what_a_link_gets_wrong_is_named_and_the_rest_is_kept():
    pairs = [("n", "0"), ("temperature", "hot"), ("colour", "red"), ("seed", "5"), ("top_p", "1.5"),
             ("output_kind", "sometimes"), ("ignore_eos", "yes"), ("__theme", "dark"), ("run", "x"),
             ("Max-Tokens", "8")]
    values, problems, _ = read_query(pairs, NAMES, LIMITS)
    assert values == {"seed": 5}
    assert problems == ["<code>colour</code> is not a setting of the form",
                        "<code>Max-Tokens</code> is not a setting of the form (did you mean max_tokens?)",
                        "n must be between 1 and 32 (--max-n), got 0",  # each named once
                        "output_kind must be one of CUMULATIVE, DELTA, FINAL_ONLY, got 'SOMETIMES'",
                        "temperature must be a number, got 'hot'",
                        "top_p must be in (0, 1], got 1.5", "ignore_eos must be true or false, got 'yes'"]


def test_a_request_field_the_form_does_not_hold_and_a_setting_given_twice_are_named():
    values, problems, twice = read_query([("prefix_token_ids", "1,2"), ("n", "3"), ("n", "4")], NAMES, LIMITS)
    assert values == {"n": 4}
    assert problems == ["<code>prefix_token_ids</code> is a setting of a request that the form does not hold (a "
                        "run's link, or the API, carries it)"]
    assert twice == ["<code>n</code> is given 2 times: the last, '4', is used"]  # used, not left at its default
    values, problems, _ = read_query([("top_k", "1e30"), ("n", "2")], NAMES, LIMITS)  # past what vLLM can send
    assert values == {"n": 2} and problems == ["top_k must be -1 or 0 (off) or a positive count up to 2147483647, "
                                               "got 1000000000000000000000000000000"]


def test_a_setting_is_checked_with_the_links_own_n():
    values, problems, _ = read_query([("n", "1"), ("temperature", "0")], NAMES, LIMITS)
    assert values == {"n": 1, "temperature": 0.0} and problems == [], "greedy is fine at n=1"
    values, problems, _ = read_query([("temperature", "0")], NAMES, LIMITS)
    assert values == {} and "greedy sampling (temperature 0) with n=4" in problems[0]


def test_a_form_that_is_not_a_request_makes_no_link():
    with pytest.raises(gr.Error, match="n must be a whole number"):
        settings_query(defaults(), **{**START, "n": 2.5})


def test_a_value_past_a_sliders_bounds_is_named_and_the_control_left_as_it_was():
    """The server takes top_p 0.001 (a link, a run a script made), the form's slider 0.01 to 1 does
    not: put there, the slider would refuse every Run of the page without a word."""
    from playground.ui.form import form_update, setting_controls

    with gr.Blocks():
        form = setting_controls(LIMITS, NAMES)
    values, problems, _ = read_query([("top_p", "0.001"), ("n", "2"), ("seed", "5")], NAMES, LIMITS)
    assert problems == [] and values["top_p"] == 0.001, "the schema takes it"
    update, unfit = form_update(form, values)
    assert unfit == ["`top_p`: 0.001 is outside the form's 0.01 to 1"]
    assert update == {form["n"]: 2, form["seed"]: "5"}
    values, problems, _ = read_query([("logprobs", "0"), ("n", "2")], NAMES, LIMITS)  # the API's 0: no alternatives
    update, unfit = form_update(form, values)
    assert values["logprobs"] == 0 and update == {form["n"]: 2}, "not the slider's 0, which is off"
    assert unfit == ["`logprobs`: 0 (each sampled token's own logprob, no alternatives; asked through the API) cannot "
                     "be set in the form, where 0 is off"]
    assert form_update(form, {"logprobs": None}) == ({form["logprobs"]: 0}, [])  # off is the slider's 0


def test_every_number_box_of_the_form_passes_what_was_typed_for_the_server_to_check():
    """A box for a whole number (top_k) given 1.5: Gradio's precision would round it to 2 without a
    word; the box passes 1.5 on, and the request's check names it."""
    from playground.ui.form import request_from_form, setting_controls

    with gr.Blocks():
        form = setting_controls(LIMITS, NAMES)
    boxes = {name: control for name, control in form.items() if isinstance(control, gr.Number)}
    assert "top_k" in boxes and all(box.precision is None for box in boxes.values()), boxes
    assert boxes["top_k"].preprocess(1.5) == 1.5
    with pytest.raises(gr.Error, match="top_k must be a whole number, got 1.5"):
        request_from_form(**{**START, "top_k": boxes["top_k"].preprocess(1.5)})
    assert request_from_form(**{**START, "top_k": boxes["top_k"].preprocess(40)}).top_k == 40


def test_words_from_outside_are_written_as_text_in_every_line_that_quotes_them():
    """A stop string, a run's error, a forced token, a refused value and a sample's words quoted in
    the Branch tab's line: written as text (no tag, link or code span of theirs reaches the page's
    Markdown), and read back as what they were."""
    import html
    import re

    from playground.ui import branch_tab, views
    from playground.ui.markdown import code, plain
    from tests.test_report import make_run

    hostile = "x` <svg><a href=\"javascript:alert(1)\">[t](javascript:alert(2))"

    def unmarked(text: str) -> bool:  # no tag and no link Markdown would make of it
        return "<svg" not in text and "](javascript" not in text.replace("\\[t]", "")

    run = make_run([[1, 2, 3]], "run-a", stop=[hostile])
    run.status, run.error = "error", hostile
    run.samples[0].token_texts = ["x`", "<svg>", "[t](javascript:alert(2))"]
    for line in (views.run_summary(run), views.refused_summary(f"got {hostile!r}"),
                 branch_tab._context(run, 0, 2), plain(hostile), code(hostile)):
        assert unmarked(line), line
    assert re.sub(r"\\(.)", r"\1", html.unescape(plain(hostile))) == hostile  # the same words, as text


@given(st.lists(st.text(min_size=1, max_size=12).filter(lambda s: "\x00" not in s), min_size=1, max_size=4))
def test_stop_strings_go_into_the_form_and_come_back_as_they_were(stops):
    """Any stop string (a newline, a tab, a carriage return or a backslash in it, a path's
    C:\\new) shown in the form's box and read back is itself: a link or a reopened run that puts it
    there asks for the same request when Run is pressed."""
    asked = request_from_form(**{**START, "stop": form_value("stop", stops)}).stop
    assert asked == [s for s in stops if s != ""]


def test_a_path_in_a_stop_string_keeps_its_backslash():
    assert form_value("stop", ["C:\\new", "a\tb"]) == "C:\\\\new\na\\tb"
    assert request_from_form(**{**START, "stop": "C:\\\\new\na\\tb\nkept \\as typed"}).stop == [
        "C:\\new", "a\tb", "kept \\as typed"]
