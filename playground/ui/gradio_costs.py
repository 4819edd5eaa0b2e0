"""What Gradio does at every event, yield and idle moment that this app does not need.

The app shares one process and one GIL with vLLM's front end: every millisecond Gradio spends per
event, per yield of a stream, or per second while nothing happens is taken from the engine's
outputs. Each adjustment here keeps what Gradio's own behaviour gives a person, and says what it
cost without it (measured on a 2-core CPU machine, the app's process CPU time).

Gradio is pinned (requirements.txt): these touch its queue's attributes, one method of the Blocks
and the signatures of its component classes, and ``tests/test_gradio_costs.py`` holds each to
Gradio's own results.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import sys
import types

import gradio as gr
from gradio.blocks import Block, postprocess_update_dict

# Gradio's idle queue looks for a new event every millisecond (1,000 wake-ups a second on the event
# loop that streams the runs, about 5 % of a core here whatever the app does); every 20 ms
# still cost about 5 ms of CPU a second. 50 ms is Gradio's own value on Windows, and far below
# what a person notices between a click and its start.
QUEUE_POLL_S = 0.05
# Its progress loop looks for progress bars' news every 10 ms, run or no run. Only the QA matrix
# has a progress bar, and four updates a second is plenty for one.
PROGRESS_POLL_S = 0.25
# At the end of every event it summarizes its last 10,000 events for its monitoring page (a pandas
# frame grouped by function, with percentiles): 30-50 ms of CPU an event, every /sample call and
# every click, with the GIL held while runs stream. Once every 1,000 events keeps that page's figures.
ANALYTICS_EVERY = 1000
_SKIP = {"__type__": "update"}  # gr.skip(): an output the event leaves as it is


def trim(demo: gr.Blocks) -> None:
    """Apply every adjustment to ``demo`` (after ``demo.queue()``, before ``launch``)."""
    demo._queue.sleep_when_free = QUEUE_POLL_S
    demo._queue.progress_update_sleep_when_free = PROGRESS_POLL_S
    demo._queue.ANAYLTICS_CACHE_FREQUENCY = ANALYTICS_EVERY
    matplotlib_absent()
    skip_untouched(demo)
    signatures_once(demo)


def matplotlib_absent() -> None:
    """Gradio imports matplotlib around every call of an event's function (to pin its backend),
    twice per yield of a stream; where it is not installed, each try searches the whole import
    path again (about a millisecond). Marked absent once, the import fails at once, as it would."""
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None


def signatures_once(demo: gr.Blocks) -> None:
    """Gradio reads a component's configuration from its class's ``__init__`` signature, which it
    computes anew each time (``inspect.signature`` keeps none): once per component at every new
    session (a page load, every ``/sample`` call made without a session of its own: 240 of them, 60 %
    of the 36 ms a session cost) and per update. ``inspect.signature`` returns a function's own
    ``__signature__`` when it has one, so each ``__init__`` of the page's component classes gets
    the very signature ``inspect`` computes, once."""
    for kind in {type(block) for block in demo.blocks.values()}:
        for cls in kind.__mro__:
            init = cls.__dict__.get("__init__")
            if isinstance(init, types.FunctionType) and "__signature__" not in init.__dict__:
                init.__signature__ = inspect.signature(init)


def skip_untouched(demo: gr.Blocks) -> None:
    """Outputs an event leaves as they are cost nothing.

    An event lists its outputs once; a handler that returns a dict of some of them, or
    ``gr.skip()`` for one, leaves the rest as they are. Gradio still treats each of those as a
    property update: it builds a new component from the old one's arguments and recomputes its
    config (its API schema by pydantic included), 1-10 ms each, to send ``{"__type__": "update"}``
    in the end. The page's events list up to a hundred outputs (a run's end, a tab opened, the page
    loaded), so a page run spent about 150 ms of CPU on them, and each page load 100 ms. Here only
    the outputs given a value go through Gradio's postprocessing; the others get the same empty
    update from Gradio's own function for one (``None`` for a ``gr.State``, as Gradio gives them),
    without the new component. An empty dict changes none of them (Gradio itself would take it
    for one value and refuse the event: Stop pressed with nothing running did that)."""
    original = demo.postprocess_data

    async def postprocess_data(self, block_fn, predictions, state):
        values = _by_output(block_fn, predictions)
        if values is None:  # a shape left to Gradio as it is
            return await original(block_fn, predictions, state)
        outputs = list(block_fn.outputs)
        kept = [i for i, v in enumerate(values) if not _skipped(v)]
        if len(kept) == len(outputs):
            return await original(block_fn, predictions, state)
        done = []
        if kept:
            given = copy.copy(block_fn)
            given.outputs = [outputs[i] for i in kept]
            # one output: its bare value, as Gradio has it from a function of one output
            done = await original(given, values[kept[0]] if len(kept) == 1 else [values[i] for i in kept], state)
        result = [None if getattr(block, "stateful", False) else _empty_update(block)
                  for block in outputs]
        for i, value in zip(kept, done, strict=True):
            result[i] = value
        return result

    demo.postprocess_data = types.MethodType(postprocess_data, demo)


def _by_output(block_fn, predictions) -> list | None:
    """A value per output, in the event's order, or None where Gradio's own path is the only one
    (batched and validator functions, one output, a component it matches by key)."""
    outputs = list(block_fn.outputs)
    if block_fn.batch or getattr(block_fn, "is_validator_function", False) or len(outputs) < 2:
        return None
    if isinstance(predictions, dict):
        if predictions == _SKIP or not predictions:  # {}: a dict of none of its outputs changes none
            return [_SKIP] * len(outputs)
        if not predictions or not all(isinstance(k, Block) for k in predictions):
            return None
        by_id = {block._id: value for block, value in predictions.items()}
        if len(by_id) != len(predictions) or not by_id.keys() <= {b._id for b in outputs}:
            return None
        return [by_id.get(block._id, _SKIP) for block in outputs]
    if isinstance(predictions, (list, tuple)) and len(predictions) == len(outputs):
        return list(predictions)
    return None


def _empty_update(block) -> dict:
    """Gradio's empty update of a component of this kind (an HTML's carries its own ``props``,
    which Gradio finds by reading ``HTML.__init__``'s signature at every call): made once a kind."""
    kind = type(block)
    if kind not in _EMPTY:
        _EMPTY[kind] = postprocess_update_dict(block, dict(_SKIP))
    return {k: dict(v) if isinstance(v, dict) else v for k, v in _EMPTY[kind].items()}


_EMPTY: dict[type, dict] = {}


def _skipped(value) -> bool:
    return isinstance(value, dict) and value == _SKIP
