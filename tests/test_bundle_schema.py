"""Real bundles against the published JSON Schema: the real engine's runs, every output_kind on the
wrapper's and vLLM's own fan-out, with and without logprobs, are valid under
playground/bundle.schema.json, and what ``json`` alone reads of each sample is what the project's
reader gives."""

from __future__ import annotations

import json

import jsonschema
import pytest

from playground.bundle_format import SCHEMA_PATH
from playground.request import OUTPUT_KINDS, SampleRequest
from playground.run import Run
from tests.helpers import record_to_end

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
PROMPT = "A list of three colours:"


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["bundle_version"] == {"const": 5, "description": SCHEMA["properties"][
        "bundle_version"]["description"]}


@pytest.mark.parametrize("logprobs", [None, 3])
@pytest.mark.parametrize("mode", ["wrapper", "native"])
@pytest.mark.parametrize("output_kind", OUTPUT_KINDS)
def test_a_real_bundle_is_valid_and_json_alone_reads_its_samples(backend, output_kind, mode, logprobs):
    run = record_to_end(backend, SampleRequest(prompt=PROMPT, n=2, seed=8, max_tokens=6, output_kind=output_kind,
                                               mode=mode, logprobs=logprobs, use_chat_template=False,
                                               stop=["\n\n"]))
    text = run.to_json()
    data = json.loads(text)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert data["bundle_version"] == 5 and run.status == "finished" and run.events
    read = Run.from_json(text)
    assert read == run
    assert [(s["index"], s["seed"], s["text"], s["token_ids"], s["finish_reason"], s["stop_reason"])
            for s in data["samples"]] == [(s.index, s.seed, s.text, s.token_ids, s.finish_reason, s.stop_reason)
                                          for s in read.samples]
    assert all(s["token_ids"] for s in data["samples"]) and [s["seed"] for s in data["samples"]] == [8, 9]
    assert (logprobs is None) == all(s.logprobs is None for s in run.samples)


def test_a_bundle_that_breaks_the_layout_is_told_by_the_schema(backend):
    run = record_to_end(backend, SampleRequest(prompt=PROMPT, n=1, seed=1, max_tokens=2, use_chat_template=False))
    data = json.loads(run.to_json())
    del data["samples"][0]["text"]
    with pytest.raises(jsonschema.ValidationError, match="'text' is a required property"):
        jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_what_a_run_records_of_where_it_came_from_is_in_the_schema(backend):
    """A sweep's value, a branch's point, a replay's source, a batch line and a right answer, each
    as the code that writes it writes it: valid, and each described by the schema (not merely let
    through as an unknown property)."""
    from playground.analysis.branching import BranchPoint
    from playground.sampling.sweep_request import SweepRequest

    run = record_to_end(backend, SampleRequest(prompt=PROMPT, n=1, seed=1, max_tokens=2, use_chat_template=False))
    sweep = SweepRequest.from_user("temperature", "0.5 1.0", prompt=PROMPT, n=1, seed=1)
    labels = {**sweep.labels(1), "branch": BranchPoint("run-1", 0, 3, 42, " sea").to_dict(),
              "replay": {"of": "run-1", "pace": "x4", "note": "the file's next run plays"}, "batch_line": 3,
              "reference": "391"}
    data = json.loads(run.to_json())
    data["request"].update(labels)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    described = SCHEMA["properties"]["request"]["properties"]
    assert all(described[name].get("description") for name in labels), set(labels) - set(described)
    data["request"]["batch_line"] = 0
    with pytest.raises(jsonschema.ValidationError, match="0 is less than the minimum of 1"):
        jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_a_bundle_another_client_wrote_to_the_schema_opens_without_the_text_of_each_token(tmp_path):
    """The schema asks each sample's text and ids, not each token's text: such a bundle opens,
    its samples as written, the tokens' texts filled where the views need them, and
    ``analyze --graph`` draws it."""
    from playground import analysis
    from playground.bundles import read_runs

    data = {"bundle_version": 5, "request": {"prompt": "Where is the cat?", "n": 2, "seed": 1}, "status": "finished",
            "texts": {"2": " cat"}, "events": [],
            "samples": [{"index": 0, "seed": 1, "text": "The cat sat.", "token_ids": [1, 2, 3],
                         "finish_reason": "stop", "stop_reason": None},
                        {"index": 1, "seed": 2, "text": "A cat sat.", "token_ids": [4, 2, 3],
                         "finish_reason": "stop", "stop_reason": None}]}
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")
    (run,) = read_runs(path)
    assert [(s.text, s.token_ids, s.token_texts) for s in run.samples] == [("The cat sat.", [1, 2, 3], []),
                                                                          ("A cat sat.", [4, 2, 3], [])]
    assert analysis.pieces(run.samples[0]) == ["⟨id 1⟩", "⟨id 2⟩", "⟨id 3⟩"]
    graph = analysis.sample_graph(run)
    shared = [node for node in graph.nodes if node.samples == [0, 1]]
    assert [node.text for node in shared] == ["cat sat."] and graph.text_of(1) == "A cat sat."
