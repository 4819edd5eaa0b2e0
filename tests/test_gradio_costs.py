"""Gradio's per-event adjustments (playground/ui/gradio_costs.py) give what Gradio's own path gives.

No engine and no server: ``postprocess_data`` is Gradio's step from a handler's return value to
what is sent, called here on a small Blocks of the kinds of outputs the page has, with and
without the adjustment, on the same values.
"""

from __future__ import annotations

import asyncio
import inspect

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from playground.ui import gradio_costs


def _blocks():
    with gr.Blocks() as demo:
        text = gr.Textbox(label="a")
        note = gr.Markdown()
        plot = gr.Plot(label="chart")
        html = gr.HTML()
        state = gr.State(0)
        button = gr.Button("go")
        button.click(lambda: None, None, [text, note, plot, html, state])
    return demo, (text, note, plot, html, state)


def _both(make_predictions):
    """Gradio's own result and the adjusted one, each on a fresh Blocks and session."""
    results = []
    for adjusted in (False, True):
        demo, outputs = _blocks()
        if adjusted:
            gradio_costs.skip_untouched(demo)
        fn = next(iter(demo.fns.values()))
        state = SessionState(demo)
        data = asyncio.run(demo.postprocess_data(fn, make_predictions(outputs), state))
        results.append((data, state, outputs))
    return results


CASES = {
    "a dict of some outputs": lambda o: {o[0]: "hello", o[3]: "<b>x</b>"},
    "a dict with a State": lambda o: {o[1]: "**hi**", o[4]: 7},
    "a dict with an update": lambda o: {o[0]: gr.update(value="v", visible=False), o[2]: gr.skip()},
    "one gr.skip() for all": lambda o: gr.skip(),
    "a tuple with skips": lambda o: ("t", gr.skip(), gr.skip(), "<i>h</i>", gr.skip()),
    "a tuple of every output": lambda o: ("t", "m", None, "h", 3),
    "a dict of one output": lambda o: {o[1]: "only"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_data_as_gradio(case):
    (own, own_state, _), (adjusted, adjusted_state, outputs) = _both(CASES[case])
    assert adjusted == own
    assert list(adjusted_state.state_data.values()) == list(own_state.state_data.values())  # a State keeps its value


def test_an_empty_dict_leaves_every_output_as_gr_skip_does():
    """A handler with nothing to change (Stop pressed with nothing running) returns ``{}``: the
    same as one ``gr.skip()``, where Gradio alone would refuse the event as short of values."""
    (skipped, _, _), _ = _both(lambda o: gr.skip())
    demo, outputs = _blocks()
    fn = next(iter(demo.fns.values()))
    with pytest.raises(ValueError, match="didn't return enough output values"):
        asyncio.run(demo.postprocess_data(fn, {}, SessionState(demo)))
    gradio_costs.skip_untouched(demo)
    assert asyncio.run(demo.postprocess_data(fn, {}, SessionState(demo))) == skipped


def test_outputs_left_as_they_are_are_not_rebuilt():
    """What the adjustment saves: Gradio builds a session copy of every output it is given
    ``gr.skip()`` for; adjusted, only outputs given a property get one."""
    (own, own_state, _own_outputs), (adjusted, adjusted_state, o) = _both(lambda o: {o[0]: gr.update(visible=False)})
    assert adjusted == own
    def rebuilt(state, outputs):
        return [i for i, b in enumerate(outputs[:4]) if state.blocks_config.blocks.get(b._id, b) is not b]

    assert rebuilt(own_state, _own_outputs) == [0, 1, 2, 3]  # Gradio's own: the Textbox and each one left as it is
    assert rebuilt(adjusted_state, o) == [0]


def test_trim_sets_the_queue():
    demo, _ = _blocks()
    demo.queue()
    gradio_costs.trim(demo)
    assert demo._queue.sleep_when_free == gradio_costs.QUEUE_POLL_S
    assert demo._queue.progress_update_sleep_when_free == gradio_costs.PROGRESS_POLL_S
    assert demo._queue.ANAYLTICS_CACHE_FREQUENCY == gradio_costs.ANALYTICS_EVERY


def test_signatures_once_give_the_same_session_config():
    """A new session's configuration of every component is the same with the signatures kept."""
    demo, outputs = _blocks()
    own = SessionState(demo).config_values
    gradio_costs.signatures_once(demo)
    assert SessionState(demo).config_values == own
    kind = type(outputs[2]).__init__
    assert inspect.signature(kind) is inspect.signature(kind)  # kept, not computed again
