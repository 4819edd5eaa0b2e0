"""The run record of a real async run: complete, and a bundle that round-trips unchanged."""

from __future__ import annotations

import pytest

from playground.backend import record
from playground.request import SampleRequest
from playground.run import Run


@pytest.fixture(scope="module")
def real_run(host, backend) -> Run:
    async def go():
        run = None
        async for run in record(backend, SampleRequest(prompt="The sea was calm and", n=3, seed=9, max_tokens=6,
                                                       output_kind="DELTA", logprobs=2)):
            pass
        return run

    return host.run(go())


def test_a_bundle_round_trips_through_json_unchanged(real_run):
    text = real_run.to_json()
    again = Run.from_json(text)
    assert again == real_run
    assert again.to_json() == text


def test_the_record_holds_the_request_events_and_samples(real_run):
    data = real_run.to_dict()
    assert {"request", "samples", "events", "engine", "status"} <= set(data)
    assert data["request"]["rendered_prompt"] == "The sea was calm and" and data["request"]["prompt_token_ids"]
    for s in data["samples"]:
        assert {"index", "seed", "text", "token_ids", "finish_reason"} <= set(s)
        assert len(s["token_times"]) == len(s["token_ids"]) == len(s["token_texts"]) == len(s["logprobs"])
    for e in data["events"]:
        assert {"t", "finished", "outputs"} <= set(e)
    tokens = real_run.tokens_frame()
    assert len(tokens) == sum(len(s.token_ids) for s in real_run.samples)
    assert len(real_run.events_frame()) == len(real_run.events)
